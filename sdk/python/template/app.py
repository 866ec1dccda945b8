"""Template wasm-informer plugin in Python: logs one line per event and the
number of cached objects in the event's namespace.

Build: scripts/build-plugins.sh
"""
from typing import Any, Dict

import wasm_informer as wi


class State:
    prefix = "event"


class Handler(wi.Plugin):
    def configure(self, config: Dict[str, Any]) -> None:
        prefix = config.get("prefix", "event")
        if not isinstance(prefix, str):
            raise ValueError("config.prefix must be a string")
        State.prefix = prefix

    # One method per event kind (on_add, on_update, on_delete, on_sync), or
    # handle() for every kind.
    def handle(self, event: wi.Event) -> None:
        o = event.object  # a KubeObject: each property reads one field from the host
        ns = o.namespace
        peers = len(wi.cache.by_index(o.resource, "namespace", ns)) if ns else 0
        wi.info(f"{State.prefix} kind={event.kind.name.lower()} resource={o.resource} "
                f"key={o.key} namespace-objects={peers}")
