"""py-faulty: a deliberately misbehaving Python plugin for the fault-containment
tests. [config] mode = "spin" loops forever, "throw" raises Err (a handler
error), "crash" raises an ordinary exception out of the export (a trap, because
this plugin uses the WIT bindings directly, not the SDK's Plugin base class),
"ok" behaves; ``every`` = N misbehaves only on every Nth event (default 1).
Every handled event logs ``handled key=KEY n=N``.
"""
import json

from componentize_py_types import Err
from wit_world.imports import log, objects


class State:
    mode = "ok"
    every = 1
    n = 0


class Handler:
    def init(self, config: str) -> None:
        c = json.loads(config)
        State.mode = c.get("mode", "ok")
        State.every = c.get("every", 1)
        if State.mode not in ("ok", "spin", "throw", "crash"):
            raise Err(f"config.mode {State.mode} is not ok|spin|throw|crash")

    def on_event(self, event) -> None:
        key = objects.key(event.object)
        State.n += 1
        if State.n % State.every == 0:
            if State.mode == "spin":
                i = 0
                while i >= 0:
                    i += 1
            if State.mode == "throw":
                raise Err(f"boom key={key} n={State.n}")
            if State.mode == "crash":
                raise RuntimeError(f"crash key={key} n={State.n}")
        log.log(log.Level.INFO, f"handled key={key} n={State.n}")
