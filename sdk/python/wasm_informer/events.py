"""Kubernetes Events (events.k8s.io/v1) about objects, recorded with
``reportingController`` ``wasm-informer/PLUGIN``. Needs ``events = true`` in
the manifest. A repeat of the same type, reason and action about the same
object within six minutes increments the first Event's ``series`` instead of
creating a new object. Raises :class:`~wasm_informer.ApiError`.
"""

from __future__ import annotations

from enum import Enum
from typing import Union

from componentize_py_types import Err
from wit_world.imports import events as _events

from .errors import raise_api
from .objects import KubeObject, ObjectReference


class EventType(str, Enum):
    """``Normal`` or ``Warning``."""

    NORMAL = "normal"
    WARNING = "warning"


_TYPES = {EventType.NORMAL: _events.EventType.NORMAL, EventType.WARNING: _events.EventType.WARNING}


def publish(regarding: Union[KubeObject, ObjectReference], type: Union[EventType, str],  # noqa: A002
            reason: str, action: str, note: str = "") -> None:
    """Records an Event about ``regarding`` (an object or its reference)."""
    ref = regarding.reference if isinstance(regarding, KubeObject) else regarding
    event = _events.Event(regarding=ref, type=_TYPES[EventType(type)],
                          reason=reason, action=action, note=note)
    try:
        _events.publish(event)
    except Err as e:
        ns = f"{ref.namespace}/" if ref.namespace else ""
        raise_api(e, f"event {reason} about {ref.kind} {ns}{ref.name}")


def normal(regarding: Union[KubeObject, ObjectReference], reason: str, action: str, note: str = "") -> None:
    """Records a ``Normal`` Event."""
    publish(regarding, EventType.NORMAL, reason, action, note)


def warning(regarding: Union[KubeObject, ObjectReference], reason: str, action: str, note: str = "") -> None:
    """Records a ``Warning`` Event."""
    publish(regarding, EventType.WARNING, reason, action, note)
