"""py-probe: exercises the Python SDK for the guest-level tests. On every
event it runs the ops of its ``[config] ops``, in order, and returns the
outcome of each as JSON in its ``err`` result (the op schema is
plugins/testing/js-probe's).

Invariant: ``on-event`` always returns ``err([<outcome>, ...])``.
"""
import json
from typing import Any, Dict, List, Optional

from componentize_py_types import Err

import wasm_informer as wi

PATCHES = {
    "merge": wi.Patch.merge,
    "json": wi.Patch.json,
    "strategic-merge": wi.Patch.strategic_merge,
    "apply": wi.Patch.apply,
}


class State:
    ops: List[Dict[str, Any]] = []
    kept: Optional[wi.KubeObject] = None
    kept_event: Optional[wi.Event] = None


def read(o: Optional[wi.KubeObject]) -> Any:
    if o is None:
        return None
    m = o.meta
    r = o.reference
    return {
        "resource": o.resource,
        "key": o.key,
        "namespace": o.namespace,
        "name": o.name,
        "uid": o.uid,
        "resource_version": o.resource_version,
        "generation": o.generation,
        "label_app": o.label("app"),
        "annotation_note": o.annotation("note"),
        "labels": o.labels,
        "annotations": o.annotations,
        "meta": {
            "namespace": m.namespace, "name": m.name, "uid": m.uid,
            "resourceVersion": m.resource_version, "generation": m.generation,
            "labels": m.labels, "annotations": m.annotations,
            "creationTimestamp": m.creation_timestamp, "deletionTimestamp": m.deletion_timestamp,
            "finalizers": m.finalizers,
            "ownerReferences": [{"apiVersion": x.api_version, "kind": x.kind, "name": x.name,
                                 "uid": x.uid, "controller": x.controller}
                                for x in m.owner_references],
        },
        "reference": {"apiVersion": r.api_version, "kind": r.kind, "namespace": r.namespace,
                      "name": r.name, "uid": r.uid},
        "body": o.body,
    }


def one(o: Optional[wi.KubeObject]) -> Dict[str, Any]:
    return {"ok": True, "object": None if o is None else o.body}


def run(op: Dict[str, Any], event: wi.Event) -> Dict[str, Any]:
    call = op.get("call")
    ns = op.get("namespace")
    res = op.get("resource", "")
    name = op.get("name", "")
    if call == "read":
        return {"ok": True, "object": read(event.object), "old": read(event.old),
                "kind": event.kind.name.lower(), "initial": event.is_in_initial_list,
                "final_state_unknown": event.final_state_unknown}
    if call == "cache-get":
        o = wi.cache.get(res, op["key"])
        return {"ok": True, "keys": [] if o is None else [o.key]}
    if call == "cache-list":
        return {"ok": True, "keys": [o.key for o in wi.cache.list(res, ns, op.get("selector"))]}
    if call == "by-index":
        return {"ok": True, "keys": [o.key for o in wi.cache.by_index(res, op["index"], op["value"])]}
    if call == "get":
        return one(wi.kube.get(res, ns, name))
    if call == "create":
        return one(wi.kube.create(res, ns, op["body"]))
    if call == "replace":
        return one(wi.kube.replace(res, ns, name, op["body"]))
    if call == "patch":
        p = PATCHES[op.get("patch", "merge")](op["body"])
        return one(wi.kube.patch(res, ns, name, p, force=op.get("force", False)))
    if call == "delete":
        d = op.get("delete", {})
        return one(wi.kube.delete(res, ns, name, uid=d.get("uid"),
                                  resource_version=d.get("resource_version"),
                                  propagation=d.get("propagation")))
    if call == "get-status":
        return one(wi.kube.get_status(res, ns, name))
    if call == "replace-status":
        return one(wi.kube.replace_status(res, ns, name, op["body"]))
    if call == "patch-status":
        p = PATCHES[op.get("patch", "merge")](op["body"])
        return one(wi.kube.patch_status(res, ns, name, p, force=op.get("force", False)))
    if call == "event":
        e = op.get("event", {})
        publish = wi.events.warning if e.get("type") == "warning" else wi.events.normal
        publish(event.object, e.get("reason", ""), e.get("action", ""), e.get("note", ""))
        return {"ok": True}
    if call == "dry-run":
        return {"ok": True, "dry_run": wi.kube.dry_run()}
    if call == "use-after":
        before, State.kept = State.kept, event.object
        return {"ok": True} if before is None else {"ok": True, "name": before.name}
    if call == "use-event-after":
        before_event, State.kept_event = State.kept_event, event
        return {"ok": True} if before_event is None else {"ok": True, "name": before_event.object.name}
    if call == "finalizer":
        request = wi.Request(resource=res, namespace=ns, name=name, key=op["key"])
        steps: List[str] = []

        def apply(_: wi.KubeObject) -> Optional[wi.Action]:
            steps.append("apply")
            return wi.Action.requeue(1.0)

        def cleanup(_: wi.KubeObject) -> Optional[wi.Action]:
            steps.append("cleanup")
            if op.get("cleanup_fails"):
                raise wi.Retry("cleanup failed")
            ms = op.get("cleanup_requeue_ms")
            return None if ms is None else wi.Action.requeue(ms / 1000)

        action = wi.finalizer(request, op["finalizer"], apply=apply, cleanup=cleanup)
        done = action is None or action.requeue_after is None
        return {"ok": True, "step": steps[0] if steps else "none",
                "action": "done" if done else f"requeue {round(action.requeue_after * 1000)}"}
    return {"ok": False, "error": "sdk", "message": f"unknown call {call}"}


def outcome(op: Dict[str, Any], event: wi.Event) -> Dict[str, Any]:
    try:
        return run(op, event)
    except wi.ApiError as e:
        return {"ok": False, "error": str(e.kind), "message": str(e), "detail": e.detail}
    except wi.CacheError as e:
        return {"ok": False, "error": f"cache:{e.kind}", "message": str(e)}
    except Exception as e:  # noqa: BLE001
        return {"ok": False, "error": "sdk", "message": str(e)}


class Handler(wi.Plugin):
    def configure(self, config: Dict[str, Any]) -> None:
        State.ops = config.get("ops", [])

    def handle(self, event: wi.Event) -> None:
        raise Err(json.dumps([outcome(op, event) for op in State.ops]))
