"""wasm-informer plugin SDK for Python, over the WIT imports of
``wasm-informer:plugin@0.2.1``, for both worlds:

- ``event-handler``: ``class Handler(wi.Plugin)`` with ``configure`` and
  ``on_add`` / ``on_update`` / ``on_delete`` / ``on_sync`` (or ``handle``);
- ``controller``: ``class Reconciler(wi.Controller)`` with ``configure`` and
  ``reconcile(request) -> wi.Action | None``.

Objects are :class:`KubeObject` wrappers over object references: each property
copies one field into the plugin the first time it is read. ``wi.cache``
queries the shared cache, ``wi.kube`` writes to the cluster (as the manifest's
``[[write]]`` grants allow; ``wi.kube.apply(..., must_exist=True)`` is the
server-side apply that never creates), ``wi.events`` records Kubernetes Events.

Invariants:
- a plugin built on :class:`Plugin` or :class:`Controller` never traps on an
  ordinary Python exception: it becomes the ``err`` result of the export (a
  handler error, or a retried reconcile); only a real trap (fuel, deadline,
  memory) replaces the instance;
- every object handed out during an export call (the event's objects, query
  and API results) is a reference valid for that call only: the host forgets
  it when the call returns (there is nothing to release), and reading a kept
  object afterwards raises a clear error instead of trapping the instance.

componentize-py generates ``wit_world`` and ``componentize_py_types`` when it
builds the component; ``scripts/build-plugins.sh`` puts this directory on the
module path.
"""

from __future__ import annotations

from . import cache, events, kube
from ._log import debug, error, info, log, trace, warn
from .controller import Action, Controller, ReconcileError, Request, Retry, Terminal, finalizer
from .errors import ApiError, ApiErrorKind, CacheError, CacheErrorKind, Cause
from .events import EventType
from .handler import Plugin
from .kube import Patch, PatchType, Propagation
from .objects import (Event, EventKind, KubeObject, ObjectMeta, ObjectReference, OwnerReference,
                      is_deleted, is_live)

__all__ = [
    "Action", "ApiError", "ApiErrorKind", "CacheError", "CacheErrorKind", "Cause", "Controller",
    "Event", "EventKind", "EventType", "KubeObject", "ObjectMeta", "ObjectReference", "OwnerReference",
    "Patch", "PatchType", "Plugin", "Propagation", "ReconcileError", "Request", "Retry",
    "Terminal", "cache", "debug", "error", "events", "finalizer", "info", "is_deleted",
    "is_live", "is_stale", "kube", "log", "trace", "warn",
]


def is_stale(event: Event) -> bool:
    """True when the cache already holds another version of the event's object
    than the event itself (a later event for the key is queued). Deletes are
    never stale. Raises :class:`CacheError`."""
    if event.kind == EventKind.DELETED:
        return False
    o = event.object
    current = cache.get(o.resource, o.key)
    return current is not None and current.resource_version != o.resource_version
