"""Kubernetes objects held by the host, and the events about them.

A :class:`KubeObject` wraps one object reference. Each property is one call
into the host that copies only what it returns, made the first time it is
read and remembered after. Objects are valid for the export call that
produced them (see ``_scope``): copy what must outlive it (``obj.body``, a
field). There is nothing to release.
"""

from __future__ import annotations

import json as _json
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, TypeVar

from wit_world.imports import objects as _objects
from wit_world.imports import types as _types

from . import _scope

EventKind = _types.EventKind
ObjectReference = _types.ObjectReference
OwnerReference = _types.OwnerReference

T = TypeVar("T")

_CLOSED = ("is used after the call that obtained it returned (objects are valid for "
           "one call; copy what you need, for example obj.body or obj.name, before returning)")


@dataclass(frozen=True)
class ObjectMeta:
    """Everything the host parsed of ``metadata``, with labels and annotations
    as dicts."""

    namespace: Optional[str]
    name: str
    uid: str
    resource_version: str
    generation: Optional[int]
    labels: Dict[str, str] = field(default_factory=dict)
    annotations: Dict[str, str] = field(default_factory=dict)
    creation_timestamp: Optional[str] = None
    deletion_timestamp: Optional[str] = None
    finalizers: List[str] = field(default_factory=list)
    owner_references: List[OwnerReference] = field(default_factory=list)


class KubeObject:
    """A Kubernetes object held by the host, by reference: the object of an
    event, a cached object or an API server's answer."""

    __slots__ = ("_ref", "_call", "_memo")

    def __init__(self, ref: int) -> None:
        self._ref = ref
        self._call = _scope.calls
        self._memo: Dict[str, Any] = {}

    def _r(self) -> int:
        if self._call != _scope.calls:
            raise RuntimeError(f"KubeObject {self._memo.get('key', '(key not read)')} {_CLOSED}")
        return self._ref

    def _get(self, name: str, read: Callable[[int], T]) -> T:
        r = self._r()
        memo = self._memo
        if name in memo:
            return memo[name]
        v = read(r)
        memo[name] = v
        return v

    @property
    def is_open(self) -> bool:
        """False once the call that produced the object has returned."""
        return self._call == _scope.calls

    @property
    def resource(self) -> str:
        """The resource id, for example ``v1/pods``."""
        return self._get("resource", _objects.resource)

    @property
    def key(self) -> str:
        """``namespace/name``, or ``name`` for cluster-scoped objects."""
        return self._get("key", _objects.key)

    @property
    def namespace(self) -> Optional[str]:
        """``metadata.namespace``; None for cluster-scoped objects."""
        return self._get("namespace", _objects.namespace)

    @property
    def name(self) -> str:
        """``metadata.name``."""
        return self._get("name", _objects.name)

    @property
    def uid(self) -> str:
        """``metadata.uid``."""
        return self._get("uid", _objects.uid)

    @property
    def resource_version(self) -> str:
        """``metadata.resourceVersion``."""
        return self._get("resource_version", _objects.resource_version)

    @property
    def generation(self) -> Optional[int]:
        """``metadata.generation``, when the object has one."""
        return self._get("generation", _objects.generation)

    @property
    def labels(self) -> Dict[str, str]:
        """Every label."""
        return self._get("labels", lambda r: dict(_objects.labels(r)))

    @property
    def annotations(self) -> Dict[str, str]:
        """Every annotation."""
        return self._get("annotations", lambda r: dict(_objects.annotations(r)))

    def label(self, key: str) -> Optional[str]:
        """The value of one label, or None."""
        r = self._r()
        all_ = self._memo.get("labels")
        return all_.get(key) if all_ is not None else _objects.label(r, key)

    def annotation(self, key: str) -> Optional[str]:
        """The value of one annotation, or None."""
        r = self._r()
        all_ = self._memo.get("annotations")
        return all_.get(key) if all_ is not None else _objects.annotation(r, key)

    @property
    def meta(self) -> ObjectMeta:
        """Everything parsed of ``metadata``, in one call."""
        def read(r: int) -> ObjectMeta:
            m = _objects.meta(r)
            return ObjectMeta(
                namespace=m.namespace, name=m.name, uid=m.uid,
                resource_version=m.resource_version, generation=m.generation,
                labels=dict(m.labels), annotations=dict(m.annotations),
                creation_timestamp=m.creation_timestamp,
                deletion_timestamp=m.deletion_timestamp,
                finalizers=list(m.finalizers), owner_references=list(m.owner_references))
        return self._get("meta", read)

    @property
    def deletion_timestamp(self) -> Optional[str]:
        """Set while finalizers hold a deleted object."""
        return self.meta.deletion_timestamp

    @property
    def finalizers(self) -> List[str]:
        """``metadata.finalizers``."""
        return self.meta.finalizers

    @property
    def owner_references(self) -> List[OwnerReference]:
        """``metadata.ownerReferences``."""
        return self.meta.owner_references

    @property
    def reference(self) -> ObjectReference:
        """This object as an Event's ``regarding``."""
        return self._get("reference", _objects.reference)

    @property
    def json(self) -> str:
        """The whole object as compact JSON text."""
        return self._get("json", _objects.json)

    @property
    def body(self) -> Any:
        """The whole object, parsed (the same value on every read; a copy that
        outlives the call)."""
        return self._get("body", lambda r: _json.loads(self.json))

    def __repr__(self) -> str:
        state = "open" if self.is_open else "closed"
        return f"<KubeObject {self._memo.get('key', '?')} {state}>"


def wrap(ref: Optional[int]) -> Optional[KubeObject]:
    """Wraps a reference the host handed out in this call."""
    return None if ref is None else KubeObject(ref)


class Event:
    """One notification for one object: ``object`` is the new state (for a
    delete, the last known state), ``old`` the previous state of an update
    when the host still had it. Both are valid for the call."""

    __slots__ = ("kind", "is_in_initial_list", "final_state_unknown",
                 "_info", "_call", "_object", "_old")

    def __init__(self, info: _types.EventInfo) -> None:
        self.kind: EventKind = info.kind
        self.is_in_initial_list: bool = info.is_in_initial_list
        self.final_state_unknown: bool = info.final_state_unknown
        self._info = info
        self._call = _scope.calls
        self._object: Optional[KubeObject] = None
        self._old: Optional[KubeObject] = None

    def _wrap(self, ref: int) -> KubeObject:
        if self._call != _scope.calls:
            raise RuntimeError(f"the event's object {_CLOSED}")
        return KubeObject(ref)

    @property
    def object(self) -> KubeObject:
        """The new state (for ``deleted``, the last known state)."""
        if self._object is None:
            self._object = self._wrap(self._info.object)
        return self._object

    @property
    def old(self) -> Optional[KubeObject]:
        """The previous state of an update, when the host had it."""
        ref = self._info.old_object
        if ref is None:
            return None
        if self._old is None:
            self._old = self._wrap(ref)
        return self._old

    @property
    def resource(self) -> str:
        """The resource id, for example ``v1/pods``."""
        return self.object.resource

    @property
    def key(self) -> str:
        """``namespace/name`` or ``name``."""
        return self.object.key


def is_deleted(event: Event) -> bool:
    """True for ``deleted`` events."""
    return event.kind == EventKind.DELETED


def is_live(event: Event) -> bool:
    """True for ``added``, ``updated`` and ``synced``: the object exists after the event."""
    return event.kind != EventKind.DELETED
