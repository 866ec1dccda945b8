"""wasm-informer-world: controller

Template wasm-informer controller in Python: makes sure every object of its
primary resource carries the label ``[config] label`` = ``value`` (default
managed-by=wasm-informer), by a JSON merge patch, and records a Normal Event
``Labelled`` when it sets it.

Level-triggered: it is told which object to look at, never what changed, and
reads the current state from the cache. The manifest must grant
``[[write]] resource = RESOURCE verbs = ["patch"]`` and ``events = true``.

Build: scripts/build-plugins.sh
"""
from typing import Any, Dict, Optional

import wasm_informer as wi


class Settings:
    label = "managed-by"
    value = "wasm-informer"
    requeue_ms = 0


def string(config: Dict[str, Any], field: str) -> str:
    v = config.get(field, getattr(Settings, field))
    if not isinstance(v, str) or not v:
        raise ValueError(f"config.{field} must be a non-empty string")
    return v


class Reconciler(wi.Controller):
    def configure(self, config: Dict[str, Any]) -> None:
        Settings.label = string(config, "label")
        Settings.value = string(config, "value")
        r = config.get("requeue_ms", 0)
        if not isinstance(r, int) or r < 0:
            raise ValueError("config.requeue_ms must be a non-negative integer")
        Settings.requeue_ms = r

    def reconcile(self, request: wi.Request) -> Optional[wi.Action]:
        after = wi.Action.requeue(Settings.requeue_ms / 1000) if Settings.requeue_ms else None
        obj = request.object()  # the cached state; None when the object is gone
        if obj is None:
            wi.info(f"gone {request.key}")
            return None
        if obj.label(Settings.label) == Settings.value:
            return after
        patch = wi.Patch.merge({"metadata": {"labels": {Settings.label: Settings.value}}})
        try:
            wi.kube.patch(request.resource, request.namespace, request.name, patch)
        except wi.ApiError as e:
            if e.kind == wi.ApiErrorKind.NOT_FOUND:
                return None  # deleted since: nothing to do
            if e.kind == wi.ApiErrorKind.INVALID:
                raise wi.Terminal(str(e))  # the server refuses this label: retrying cannot help
            raise  # anything else is retried with backoff
        wi.events.normal(obj, "Labelled", "Label", f"set {Settings.label}={Settings.value}")
        wi.info(f"labelled {request.key} {Settings.label}={Settings.value}")
        return after
