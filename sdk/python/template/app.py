"""Template wasm-informer plugin in Python, world event-handler.

For every pod it is told about, it logs one line with the number of pods
cached in the pod's namespace, and it gives a pod that lacks the label
``[config] label`` (default ``team``) that label, with the value
``[config] value`` (default ``unassigned``), by server-side apply, then
records a Normal Event ``Labelled`` about the pod. It decides from the pod as the cache holds it when the
event is handled (an event may be stale). The apply must find the pod
(a pod deleted while its event waited is never re-created), so the manifest
needs to grant only ``[[write]] resource = "v1/pods" verbs = ["patch"]``, and
``events = true``.

Build: scripts/build-plugins.sh
"""
from typing import Any, Dict

import wasm_informer as wi


class Settings:
    label = "team"
    value = "unassigned"


def string(config: Dict[str, Any], field: str) -> str:
    v = config.get(field, getattr(Settings, field))
    if not isinstance(v, str) or not v:
        raise ValueError(f"config.{field} must be a string")
    return v


def check(kind: str, event: wi.Event) -> None:
    ns = event.object.namespace or ""
    # A query of the host's shared cache: no API call.
    peers = len(wi.cache.list("v1/pods", ns))
    wi.info(f"{kind} {event.key} ({peers} pods in {ns})")
    label, value = Settings.label, Settings.value
    # The event may be stale: decide from the pod as the cache holds it now (a
    # KubeObject: each property reads one field from the host).
    pod = wi.cache.get("v1/pods", event.key)
    if pod is None:
        wi.info(f"gone {event.key}")
        return
    if pod.label(label) is not None or pod.deletion_timestamp is not None:
        return
    # Server-side apply of just the label, owned by `wasm-informer/PLUGIN`.
    intent = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod.name, "namespace": ns, "labels": {label: value}},
    }
    try:
        # The pod may be gone since the event: must_exist never re-creates it.
        wi.kube.apply("v1/pods", ns, pod.name, intent, must_exist=True)
    except wi.ApiError as e:
        if not e.not_found:
            raise
        wi.info(f"gone {event.key}")
        return
    wi.events.normal(pod, "Labelled", "Label", f"set {label}={value}")
    wi.info(f"labelled {event.key} {label}={value}")


class Handler(wi.Plugin):
    def configure(self, config: Dict[str, Any]) -> None:
        Settings.label = string(config, "label")
        Settings.value = string(config, "value")

    def on_add(self, event: wi.Event) -> None:
        check("added", event)

    def on_update(self, event: wi.Event) -> None:
        check("updated", event)

    def on_delete(self, event: wi.Event) -> None:
        wi.info(f"deleted {event.key}")
