"""The ``event-handler`` world: the :class:`Plugin` base class of the
exported ``handler`` interface.

Invariant: an ordinary exception from ``configure`` or an event method becomes
the ``err`` result of ``init``/``on-event`` (a handler error, counted by the
host, after which the plugin carries on); the objects of a call are closed
when its export returns.
"""

from __future__ import annotations

import json as _json
from typing import Any, Callable, Dict

from componentize_py_types import Err
from wit_world.imports import types as _types

from . import _scope
from .objects import Event, EventKind


def message(e: BaseException) -> str:
    """``Type: text`` of an exception, as the host records it."""
    text = str(e)
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def parse_config(config: str) -> Dict[str, Any]:
    """The manifest's ``[config]`` table from its JSON; raises ``Err``."""
    try:
        parsed = _json.loads(config)
    except ValueError as e:
        raise Err(f"config is not valid JSON: {e}")
    if not isinstance(parsed, dict):
        raise Err("config must be a table")
    return parsed


def run_init(configure: Callable[[Dict[str, Any]], None], config: str) -> None:
    """Runs ``configure`` on the parsed config; every failure is an ``Err``."""
    try:
        configure(parse_config(config))
    except Err:
        raise
    except Exception as e:  # noqa: BLE001 - every failure becomes the err result
        raise Err(message(e))
    finally:
        _scope.end_call()


class Plugin:
    """Base class of the exported WIT interface ``handler``.

    Subclass it as ``class Handler(Plugin)`` in ``app.py`` and override
    ``configure(config)`` and ``on_add`` / ``on_update`` / ``on_delete`` /
    ``on_sync`` (each defaults to ``handle(event)``, which does nothing).
    Raise to report a handler error. Keep state that must survive between
    events on the class or at module level.
    """

    def configure(self, config: Dict[str, Any]) -> None:
        """Receives the manifest's ``[config]`` table, parsed. Raise to refuse it."""

    def handle(self, event: Event) -> None:
        """Handles an event of any kind the plugin has no method for."""

    def on_add(self, event: Event) -> None:
        """An object appeared (also used for the initial replay of the cache)."""
        self.handle(event)

    def on_update(self, event: Event) -> None:
        """An object changed; ``event.old`` is its previous state when the host had it."""
        self.handle(event)

    def on_delete(self, event: Event) -> None:
        """An object is gone; ``event.object`` is its last known state."""
        self.handle(event)

    def on_sync(self, event: Event) -> None:
        """A periodic resync re-delivered an unchanged object."""
        self.handle(event)

    # WIT exports -------------------------------------------------------------

    def init(self, config: str) -> None:
        run_init(self.configure, config)

    def on_event(self, event: _types.EventInfo) -> None:
        ev = Event(event)
        kind = event.kind
        try:
            if kind == EventKind.ADDED:
                self.on_add(ev)
            elif kind == EventKind.UPDATED:
                self.on_update(ev)
            elif kind == EventKind.DELETED:
                self.on_delete(ev)
            else:
                self.on_sync(ev)
        except Err:
            raise
        except Exception as e:  # noqa: BLE001
            raise Err(message(e))
        finally:
            _scope.end_call()
