"""Kubernetes objects held by the host, and the events about them.

A :class:`KubeObject` wraps one host handle. Each property is one call into
the host that copies only what it returns, made the first time it is read and
remembered after. Objects are valid for the export call that produced them
(see ``_scope``): copy what must outlive it (``obj.body``, a field).
"""

from __future__ import annotations

import json as _json
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, TypeVar

from wit_world.imports import types as _types

from . import _scope

EventKind = _types.EventKind
ObjectRef = _types.ObjectRef
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
    """A Kubernetes object held by the host: the object of an event, a cached
    object or an API server's answer."""

    __slots__ = ("_raw", "_owned", "_memo", "_what")

    def __init__(self, raw: _types.Object, owned: bool) -> None:
        self._raw: Optional[_types.Object] = raw
        self._owned = owned
        self._memo: Dict[str, Any] = {}
        self._what = ""
        _scope.register(self)

    def _h(self) -> _types.Object:
        raw = self._raw
        if raw is None:
            raise RuntimeError(f"KubeObject {self._what} {_CLOSED}")
        return raw

    def _get(self, name: str, read: Callable[[_types.Object], T]) -> T:
        raw = self._h()
        memo = self._memo
        if name in memo:
            return memo[name]
        v = read(raw)
        memo[name] = v
        return v

    def _close(self) -> None:
        raw = self._raw
        if raw is None:
            return
        self._what = self._memo.get("key", "(key not read)")
        self._raw = None
        if self._owned:
            raw.__exit__(None, None, None)

    def dispose(self) -> None:
        """Releases the handle now instead of at the end of the call."""
        self._close()

    def __enter__(self) -> "KubeObject":
        return self

    def __exit__(self, *exc: Any) -> None:
        self._close()

    @property
    def is_open(self) -> bool:
        """False once the call that produced the object has returned."""
        return self._raw is not None

    @property
    def resource(self) -> str:
        """The resource id, for example ``v1/pods``."""
        return self._get("resource", lambda h: h.resource())

    @property
    def key(self) -> str:
        """``namespace/name``, or ``name`` for cluster-scoped objects."""
        return self._get("key", lambda h: h.key())

    @property
    def namespace(self) -> Optional[str]:
        """``metadata.namespace``; None for cluster-scoped objects."""
        return self._get("namespace", lambda h: h.namespace())

    @property
    def name(self) -> str:
        """``metadata.name``."""
        return self._get("name", lambda h: h.name())

    @property
    def uid(self) -> str:
        """``metadata.uid``."""
        return self._get("uid", lambda h: h.uid())

    @property
    def resource_version(self) -> str:
        """``metadata.resourceVersion``."""
        return self._get("resource_version", lambda h: h.resource_version())

    @property
    def generation(self) -> Optional[int]:
        """``metadata.generation``, when the object has one."""
        return self._get("generation", lambda h: h.generation())

    @property
    def labels(self) -> Dict[str, str]:
        """Every label."""
        return self._get("labels", lambda h: dict(h.labels()))

    @property
    def annotations(self) -> Dict[str, str]:
        """Every annotation."""
        return self._get("annotations", lambda h: dict(h.annotations()))

    def label(self, key: str) -> Optional[str]:
        """The value of one label, or None."""
        h = self._h()
        all_ = self._memo.get("labels")
        return all_.get(key) if all_ is not None else h.label(key)

    def annotation(self, key: str) -> Optional[str]:
        """The value of one annotation, or None."""
        h = self._h()
        all_ = self._memo.get("annotations")
        return all_.get(key) if all_ is not None else h.annotation(key)

    @property
    def meta(self) -> ObjectMeta:
        """Everything parsed of ``metadata``, in one call."""
        def read(h: _types.Object) -> ObjectMeta:
            m = h.meta()
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
    def reference(self) -> ObjectRef:
        """This object as an Event's ``regarding``."""
        return self._get("reference", lambda h: h.reference())

    @property
    def json(self) -> str:
        """The whole object as compact JSON text."""
        return self._get("json", lambda h: h.json())

    @property
    def body(self) -> Any:
        """The whole object, parsed (the same value on every read; a copy that
        outlives the call)."""
        return self._get("body", lambda h: _json.loads(self.json))

    def __repr__(self) -> str:
        state = "open" if self._raw is not None else "closed"
        return f"<KubeObject {self._memo.get('key', '?')} {state}>"


def owned(raw: Optional[_types.Object]) -> Optional[KubeObject]:
    """Wraps an owned handle (a query or API result)."""
    return None if raw is None else KubeObject(raw, True)


class Event:
    """One notification for one object: ``object`` is the new state (for a
    delete, the last known state), ``old`` the previous state of an update
    when the host still had it. Both are valid for the call."""

    __slots__ = ("kind", "is_in_initial_list", "final_state_unknown",
                 "_object", "_old", "_wrapped", "_wrapped_old", "_open")

    def __init__(self, info: _types.EventInfo, obj: _types.Object,
                 old: Optional[_types.Object]) -> None:
        self.kind: EventKind = info.kind
        self.is_in_initial_list: bool = info.is_in_initial_list
        self.final_state_unknown: bool = info.final_state_unknown
        self._object = obj
        self._old = old
        self._wrapped: Optional[KubeObject] = None
        self._wrapped_old: Optional[KubeObject] = None
        self._open = True

    def _lend(self, raw: _types.Object) -> KubeObject:
        if not self._open:
            raise RuntimeError(f"the event's object {_CLOSED}")
        return KubeObject(raw, False)

    @property
    def object(self) -> KubeObject:
        """The new state (for ``deleted``, the last known state)."""
        if self._wrapped is None:
            self._wrapped = self._lend(self._object)
        return self._wrapped

    @property
    def old(self) -> Optional[KubeObject]:
        """The previous state of an update, when the host had it."""
        if self._old is None:
            return None
        if self._wrapped_old is None:
            self._wrapped_old = self._lend(self._old)
        return self._wrapped_old

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
