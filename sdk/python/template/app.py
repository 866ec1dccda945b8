"""Template wasm-informer plugin in Python: logs one line per event and the
number of cached objects in the event's namespace.

Build: scripts/build-plugins.sh
"""
import wasm_informer as wi


class State:
    prefix = "event"


class Handler(wi.Plugin):
    def configure(self, config):
        prefix = config.get("prefix", "event")
        if not isinstance(prefix, str):
            raise ValueError("config.prefix must be a string")
        State.prefix = prefix

    def handle(self, event):
        ns = event.object.meta.namespace
        peers = len(wi.by_index(event.resource, "namespace", ns)) if ns else 0
        wi.info(f"{State.prefix} kind={event.kind.name.lower()} resource={event.resource} "
                f"key={event.key} namespace-objects={peers}")
