"""py-noop: a Python plugin of world event-handler 0.2 that reads nothing and
does nothing, through the SDK: the per-event cost of the language and the SDK
alone, measured against plugins/testing/py-v01 (the same in 0.1)."""
import wasm_informer as wi


class Handler(wi.Plugin):
    pass
