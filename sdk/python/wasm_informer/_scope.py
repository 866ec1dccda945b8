"""The call scope: every :class:`~wasm_informer.KubeObject` handed out during
one export call (``init``, ``on-event``, ``reconcile``) is registered here and
closed when the call returns; the handles it owns (query and API results) are
dropped then.

Invariant: no host handle outlives the call that obtained it, whatever the
plugin keeps a reference to; a closed object raises instead of touching a
handle that is gone (which would trap the instance).
"""

from __future__ import annotations

from typing import Any, List

_open: List[Any] = []


def register(obj: Any) -> None:
    """Adds an object to the current call's scope."""
    _open.append(obj)


def end_call() -> None:
    """Closes every object of the call, dropping the handles it owns."""
    global _open
    if not _open:
        return
    objects, _open = _open, []
    for o in objects:
        o._close()


def open_objects() -> int:
    """How many objects the current call holds (for tests)."""
    return len(_open)
