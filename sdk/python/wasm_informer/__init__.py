"""wasm-informer plugin SDK for Python: event helpers, typed cache wrappers and
leveled logging over the ``wasm-informer:plugin@0.1.0`` WIT imports.

Invariant: a plugin built on :class:`Plugin` never traps on an ordinary Python
exception; ``configure``/``handle`` exceptions become the ``err`` result of
``init``/``on-event`` (a handler error, counted by the host, after which the
plugin carries on). Only a real trap (fuel, deadline, memory) replaces the
instance.

componentize-py generates ``wit_world`` and ``componentize_py_types`` when it
builds the component; ``scripts/build-plugins.sh`` puts this directory on the
module path.
"""

import json as _json
from typing import Any, Dict, List, Optional

from componentize_py_types import Err
from wit_world.imports import cache as _cache
from wit_world.imports import log as _log
from wit_world.imports import types as _types

Event = _types.Event
EventKind = _types.EventKind
ObjectView = _types.ObjectView
ObjectMeta = _types.ObjectMeta

__all__ = [
    "CacheError", "Event", "EventKind", "ObjectMeta", "ObjectView", "Plugin",
    "annotations", "body", "by_index", "debug", "error", "get", "has_synced",
    "info", "is_deleted", "is_stale", "key_of", "labels", "list_objects", "log",
    "trace", "warn",
]


# ---- logging ---------------------------------------------------------------

def log(level: str, message: str) -> None:
    """Writes one message to the host log; level is trace|debug|info|warn|error."""
    _log.log(_LEVELS[level], str(message))


_LEVELS = {
    "trace": _log.Level.TRACE,
    "debug": _log.Level.DEBUG,
    "info": _log.Level.INFO,
    "warn": _log.Level.WARN,
    "error": _log.Level.ERROR,
}


def trace(message: str) -> None:
    """Logs at trace level."""
    _log.log(_log.Level.TRACE, str(message))


def debug(message: str) -> None:
    """Logs at debug level."""
    _log.log(_log.Level.DEBUG, str(message))


def info(message: str) -> None:
    """Logs at info level."""
    _log.log(_log.Level.INFO, str(message))


def warn(message: str) -> None:
    """Logs at warn level."""
    _log.log(_log.Level.WARN, str(message))


def error(message: str) -> None:
    """Logs at error level."""
    _log.log(_log.Level.ERROR, str(message))


# ---- cache -----------------------------------------------------------------

_ERROR_KINDS = {
    _types.CacheError_Forbidden: "forbidden",
    _types.CacheError_UnknownResource: "unknown-resource",
    _types.CacheError_InvalidSelector: "invalid-selector",
    _types.CacheError_UnknownIndex: "unknown-index",
}


class CacheError(Exception):
    """A failed cache query. ``kind`` is the WIT ``cache-error`` case name."""

    def __init__(self, kind: str, detail: str, query: str):
        super().__init__(f"cache {query}: {kind}: {detail}")
        self.kind = kind
        self.detail = detail


def _call(query: str, fn, *args):
    try:
        return fn(*args)
    except Err as e:
        v = e.value
        raise CacheError(_ERROR_KINDS.get(type(v), "unknown"), getattr(v, "value", str(v)), query) from None


def get(resource: str, key: str) -> Optional[ObjectView]:
    """One cached object by resource id and key, or None. Raises CacheError."""
    return _call(f"get {resource} {key}", _cache.get, resource, key)


def list_objects(resource: str, namespace: Optional[str] = None,
                 label_selector: Optional[str] = None) -> List[ObjectView]:
    """Cached objects of a resource, optionally by namespace and label selector.
    Raises CacheError."""
    return _call(f"list {resource}", _cache.list, resource, namespace, label_selector)


def by_index(resource: str, index_name: str, value: str) -> List[ObjectView]:
    """Cached objects whose index value equals ``value``. Raises CacheError."""
    return _call(f"by-index {resource} {index_name}", _cache.by_index, resource, index_name, value)


def has_synced(resource: str) -> bool:
    """Whether the informer for ``resource`` finished its first list. Raises CacheError."""
    return _call(f"has-synced {resource}", _cache.has_synced, resource)


# ---- object and event helpers ----------------------------------------------

def labels(view: Any) -> Dict[str, str]:
    """Labels of an ObjectView (or ObjectMeta) as a dict."""
    meta = getattr(view, "meta", view)
    return {kv.key: kv.value for kv in meta.labels}


def annotations(view: Any) -> Dict[str, str]:
    """Annotations of an ObjectView (or ObjectMeta) as a dict."""
    meta = getattr(view, "meta", view)
    return {kv.key: kv.value for kv in meta.annotations}


def body(view: ObjectView) -> Any:
    """The parsed JSON body of an object view."""
    return _json.loads(view.json)


def key_of(view: Any) -> str:
    """``namespace/name``, or ``name`` for cluster-scoped objects."""
    meta = getattr(view, "meta", view)
    return f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name


def is_deleted(event: Event) -> bool:
    """True for ``deleted`` events."""
    return event.kind == EventKind.DELETED


def is_stale(event: Event) -> bool:
    """True when the cache already holds a newer version of the event's object
    (a later event for the key is queued). Deletes are never stale."""
    if event.kind == EventKind.DELETED:
        return False
    current = get(event.resource, event.key)
    return current is not None and current.meta.resource_version != event.object.meta.resource_version


# ---- the plugin base class -------------------------------------------------

class Plugin:
    """Base class for the exported ``handler`` interface.

    Subclass it as ``class Handler(Plugin)`` in ``app.py`` and override
    ``configure(config: dict)`` and ``handle(event)``. Keep state that must
    survive between events at module level.
    """

    def configure(self, config: Dict[str, Any]) -> None:
        """Receives the manifest's ``[config]`` table, parsed. Raise to refuse it."""

    def handle(self, event: Event) -> None:
        """Handles one event. Raise to report a handler error."""
        raise NotImplementedError("Plugin.handle must be overridden")

    # WIT exports -------------------------------------------------------------

    def init(self, config: str) -> None:
        try:
            parsed = _json.loads(config)
        except ValueError as e:
            raise Err(f"config is not valid JSON: {e}")
        if not isinstance(parsed, dict):
            raise Err("config must be a table")
        try:
            self.configure(parsed)
        except Err:
            raise
        except Exception as e:  # noqa: BLE001 - every failure becomes the err result
            raise Err(_message(e))

    def on_event(self, event: Event) -> None:
        try:
            self.handle(event)
        except Err:
            raise
        except Exception as e:  # noqa: BLE001
            raise Err(_message(e))


def _message(e: BaseException) -> str:
    text = str(e)
    return f"{type(e).__name__}: {text}" if text else type(e).__name__
