"""wasm-informer-wit: v0.1

py-v01: a Python plugin of the frozen world
``wasm-informer:plugin/event-handler@0.1.0``, written against the 0.1 WIT
directly (no SDK), as plugins were before 0.2: the host must keep running it
unchanged. [config] mode = "noop" (the default: reads nothing, the 0.1
baseline of the per-event cost measurements) or "echo": answers every event
with ``err(<what it saw, as JSON>)``, including a cache ``get`` of its own key.
"""
import json

from componentize_py_types import Err
from wit_world.imports import cache


class State:
    echo = False


def meta(view):
    if view is None:
        return None
    m = view.meta
    return {
        "namespace": m.namespace,
        "name": m.name,
        "uid": m.uid,
        "resource_version": m.resource_version,
        "labels": [[kv.key, kv.value] for kv in m.labels],
        "json_bytes": len(view.json),
    }


class Handler:
    def init(self, config: str) -> None:
        mode = json.loads(config).get("mode", "noop")
        if mode not in ("noop", "echo"):
            raise Err(f"config.mode {mode} is not noop|echo")
        State.echo = mode == "echo"

    def on_event(self, event) -> None:
        if not State.echo:
            return
        cached = cache.get(event.resource, event.key)
        raise Err(json.dumps({
            "world": "0.1",
            "kind": event.kind.name.lower(),
            "resource": event.resource,
            "key": event.key,
            "meta": meta(event.object),
            "old": meta(event.old_object),
            "initial": event.is_in_initial_list,
            "cached_resource_version": None if cached is None else cached.meta.resource_version,
        }))
