"""wasm-informer-world: controller

py-service-exposer: the Python twin of the Rust ``service-exposer``. For every
Deployment labelled ``expose: "true"`` (the label key is ``[config] label``),
it keeps a Service of the same name whose controller owner reference is the
Deployment, selecting its pods and exposing its containers' ports.

One reconcile, level-triggered (it is never told what changed):

- Deployment labelled and with ports: apply the Service (server-side apply)
  unless the cached one already matches; a Service left by an earlier
  Deployment of the same name is deleted first.
- Deployment not labelled (any more), or without ports: delete the Service it
  controls, if any.
- Deployment gone: its Service is the garbage collector's (the owner
  reference); one it missed, controlled by a Deployment of that name, is
  deleted.
- A Service of that name that no Deployment controls (made by hand) is left
  alone: a terminal error, not retried until something changes.

The manifest declares ``for = "apps/v1/deployments"`` and
``owns = ["v1/services"]`` (a change to a Service queues its Deployment) and
grants ``[[write]] resource = "v1/services" verbs = ["create", "patch",
"delete"]``.

Invariant: every write is conditional on what was read (apply owns only its
fields; deletes carry the uid and resourceVersion they saw), so a stale cache
gives a conflict and a retry, never a wrong Service.

Build: scripts/build-plugins.sh py-service-exposer
"""
from typing import Any, Dict, List, Optional, Tuple

import wasm_informer as wi

SERVICES = "v1/services"


class Settings:
    label = "expose"


def desired_ports(deployment: Any) -> List[Dict[str, Any]]:
    """One port per distinct (port, protocol) of the pod template, named after
    the container port (or ``port-N``), targeting the container port."""
    out: List[Dict[str, Any]] = []
    containers = (((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
        "containers") or []
    for c in containers:
        for p in c.get("ports") or []:
            port = p.get("containerPort")
            if not isinstance(port, int):
                continue
            protocol = p.get("protocol") or "TCP"
            if any(o["port"] == port and o["protocol"] == protocol for o in out):
                continue
            name = p.get("name") or f"port-{port}"
            if any(o["name"] == name for o in out):
                name = f"{name}-{port}"
            out.append({"name": name, "port": port, "targetPort": port, "protocol": protocol})
    return out


def selector(deployment: Any) -> Dict[str, str]:
    """The pods a Deployment manages: its selector's ``matchLabels``, else its
    template's labels."""
    spec = deployment.get("spec") or {}
    m = (spec.get("selector") or {}).get("matchLabels") or {}
    if m:
        return m
    return ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}


def controlling_deployment(service: wi.KubeObject) -> Optional[Tuple[str, str]]:
    """(name, uid) of the Deployment that controls ``service``, if one does."""
    for o in service.owner_references:
        if o.controller and o.kind == "Deployment" and o.api_version.startswith("apps/"):
            return o.name, o.uid
    return None


def matches(service: wi.KubeObject, ports: List[Dict[str, Any]], sel: Dict[str, str]) -> bool:
    """Whether the cached Service already is what we would apply."""
    spec = service.body.get("spec") or {}
    have = [{"name": p.get("name"), "port": p.get("port"), "targetPort": p.get("targetPort"),
             "protocol": p.get("protocol") or "TCP"} for p in spec.get("ports") or []]
    return have == ports and (spec.get("selector") or {}) == sel


def delete_service(service: wi.KubeObject, why: str) -> None:
    try:
        wi.kube.delete(SERVICES, service.namespace, service.name, uid=service.uid,
                       resource_version=service.resource_version)
    except wi.ApiError as e:
        if e.not_found:
            return
        raise
    wi.info(f"deleted Service {service.key} ({why})")


class Reconciler(wi.Controller):
    def configure(self, config: Dict[str, Any]) -> None:
        label = config.get("label", Settings.label)
        if not isinstance(label, str) or not label:
            raise ValueError("config.label must be a non-empty string")
        Settings.label = label

    def reconcile(self, request: wi.Request) -> Optional[wi.Action]:
        service = wi.cache.get(SERVICES, request.key)
        deployment = request.object()
        if deployment is None:
            # Gone: the garbage collector deletes the Service through its
            # owner reference; delete one it could not know about.
            if service is not None:
                owner = controlling_deployment(service)
                if owner is not None and owner[0] == request.name:
                    delete_service(service, "its Deployment is gone")
            return None
        meta = deployment.meta
        if meta.deletion_timestamp is not None:
            return None
        body = deployment.body
        ports = desired_ports(body)
        wanted = meta.labels.get(Settings.label) == "true" and bool(ports)
        owner = controlling_deployment(service) if service is not None else None
        if service is not None and owner is not None:
            if owner[1] != meta.uid:
                delete_service(service, "left by an earlier Deployment of this name")
                service, owner = None, None
            elif not wanted:
                delete_service(service, "the Deployment is no longer exposed")
                return None
        if not wanted:
            return None
        if service is not None and owner is None:
            raise wi.Terminal(
                f"Service {service.key} exists and no Deployment controls it; not taking it over")
        sel = selector(body)
        if service is not None and matches(service, ports, sel):
            return None
        apply = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": request.name,
                "namespace": request.namespace,
                "labels": {"app.kubernetes.io/managed-by": "py-service-exposer"},
                "ownerReferences": [{
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": request.name,
                    "uid": meta.uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }],
            },
            "spec": {"selector": sel, "ports": ports},
        }
        # Creates the Service when there is none (an apply that may create: the
        # grant has `create` as well as `patch`), and takes over its fields.
        wi.kube.apply(SERVICES, request.namespace, request.name, apply, force=True)
        wi.info(f"applied Service {request.key} with {len(ports)} port(s)")
        return None
