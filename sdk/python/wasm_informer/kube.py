"""The Kubernetes API, exactly as the plugin's manifest grants it
(``[[write]]`` tables). Every call blocks only this plugin, is paced by its
``write_qps``/``write_burst``, ends within ``write_timeout_ms``, and raises
:class:`~wasm_informer.ApiError` on failure. Writes carry the field manager
``wasm-informer/PLUGIN``; under dry run they are sent with ``dryRun=All``.

``resource`` is a resource id (``v1/pods``, ``apps/v1/deployments``);
``namespace`` is None for cluster-scoped resources; bodies are JSON-encodable
values (or JSON text). Objects returned are valid for the call.
"""

from __future__ import annotations

import json as _json
from dataclasses import dataclass
from enum import Enum
from typing import Any, Optional, Union

from componentize_py_types import Err
from wit_world.imports import kube as _kube

from .errors import raise_api
from .objects import KubeObject, wrap


class PatchType(str, Enum):
    """The form of a patch."""

    MERGE = "merge"
    """RFC 7386 JSON merge patch: ``None`` deletes a field."""
    JSON = "json"
    """RFC 6902 JSON patch: a list of operations."""
    STRATEGIC_MERGE = "strategic-merge"
    """Kubernetes strategic merge patch: lists merge by key."""
    APPLY = "apply"
    """Server-side apply: the fully specified intent, owned by ``wasm-informer/PLUGIN``."""


class Propagation(str, Enum):
    """What happens to a deleted object's dependents."""

    ORPHAN = "orphan"
    BACKGROUND = "background"
    FOREGROUND = "foreground"


_PATCH = {
    PatchType.MERGE: _kube.PatchType.MERGE,
    PatchType.JSON: _kube.PatchType.JSON,
    PatchType.STRATEGIC_MERGE: _kube.PatchType.STRATEGIC_MERGE,
    PatchType.APPLY: _kube.PatchType.APPLY,
}

_PROPAGATION = {
    Propagation.ORPHAN: _kube.Propagation.ORPHAN,
    Propagation.BACKGROUND: _kube.Propagation.BACKGROUND,
    Propagation.FOREGROUND: _kube.Propagation.FOREGROUND,
}


@dataclass(frozen=True)
class Patch:
    """A patch: its form and its body. Build one with ``Patch.merge(...)``,
    ``Patch.json(...)``, ``Patch.strategic_merge(...)`` or ``Patch.apply(...)``."""

    type: PatchType
    body: Any

    @classmethod
    def merge(cls, body: Any) -> "Patch":
        """RFC 7386 JSON merge patch."""
        return cls(PatchType.MERGE, body)

    @classmethod
    def json(cls, operations: Any) -> "Patch":
        """RFC 6902 JSON patch: a list of ``{"op", "path", "value"}``."""
        return cls(PatchType.JSON, operations)

    @classmethod
    def strategic_merge(cls, body: Any) -> "Patch":
        """Kubernetes strategic merge patch."""
        return cls(PatchType.STRATEGIC_MERGE, body)

    @classmethod
    def apply(cls, body: Any) -> "Patch":
        """Server-side apply of the fully specified intent (with ``apiVersion``,
        ``kind`` and ``metadata.name``). Sent with :func:`patch` it may create
        the object (the grant needs ``create`` as well as ``patch``);
        :func:`apply` can forbid that (``must_exist``)."""
        return cls(PatchType.APPLY, body)


def _text(body: Any) -> str:
    return body if isinstance(body, str) else _json.dumps(body, separators=(",", ":"))


def _where(resource: str, namespace: Optional[str], name: Optional[str] = None) -> str:
    ns = f"{namespace}/" if namespace else ""
    return f"{resource} {ns}{name or ''}".rstrip()


def _one(call: str, fn: Any, *args: Any) -> KubeObject:
    try:
        return KubeObject(fn(*args))
    except Err as e:
        raise_api(e, call)


def get(resource: str, namespace: Optional[str], name: str) -> KubeObject:
    """A live read from the API server, bypassing the cache (verb ``get``)."""
    return _one(f"get {_where(resource, namespace, name)}", _kube.get, resource, namespace, name)


def create(resource: str, namespace: Optional[str], body: Any) -> KubeObject:
    """Creates an object (verb ``create``)."""
    return _one(f"create {_where(resource, namespace)}", _kube.create,
                resource, namespace, _text(body))


def replace(resource: str, namespace: Optional[str], name: str, body: Any) -> KubeObject:
    """Replaces an object (verb ``replace``). Its ``metadata.resourceVersion``
    is the precondition: a stale one raises ``conflict``."""
    return _one(f"replace {_where(resource, namespace, name)}", _kube.replace,
                resource, namespace, name, _text(body))


def patch(resource: str, namespace: Optional[str], name: str, patch: Patch,
          force: bool = False) -> KubeObject:
    """Patches an object (verb ``patch``). ``force`` applies to
    :meth:`Patch.apply` only: it takes over fields another manager owns."""
    return _one(f"patch {_where(resource, namespace, name)}", _kube.patch,
                resource, namespace, name, _PATCH[PatchType(patch.type)], _text(patch.body), force)


def apply(resource: str, namespace: Optional[str], name: str, intent: Any, *,
          force: bool = False, must_exist: bool = False) -> KubeObject:
    """Server-side apply of ``intent``, the fully specified object
    (``apiVersion``, ``kind``, ``metadata.name`` and the fields this plugin
    owns), as field manager ``wasm-informer/PLUGIN`` (verb ``patch``, and
    ``create`` too unless ``must_exist``). ``force`` takes over fields another
    manager owns instead of raising ``conflict``. ``must_exist`` never creates
    the object: when the host's cache does not hold it, this raises
    ``not-found`` and nothing is sent. Use it for writes made from an event:
    the object may be gone by the time the event is handled."""
    options = _kube.ApplyOptions(force=bool(force), must_exist=bool(must_exist))
    return _one(f"apply {_where(resource, namespace, name)}", _kube.apply,
                resource, namespace, name, _text(intent), options)


def delete(resource: str, namespace: Optional[str], name: str, *,
           uid: Optional[str] = None, resource_version: Optional[str] = None,
           propagation: Union[Propagation, str, None] = None) -> Optional[KubeObject]:
    """Deletes an object (verb ``delete``), only if it still has ``uid`` and is
    still at ``resource_version`` when those are given. Returns the object
    while finalizers or foreground deletion hold it, None when it is gone."""
    options = _kube.DeleteOptions(
        uid=uid, resource_version=resource_version,
        propagation=None if propagation is None else _PROPAGATION[Propagation(propagation)])
    try:
        return wrap(_kube.delete(resource, namespace, name, options))
    except Err as e:
        raise_api(e, f"delete {_where(resource, namespace, name)}")


def get_status(resource: str, namespace: Optional[str], name: str) -> KubeObject:
    """Reads the status subresource."""
    return _one(f"get-status {_where(resource, namespace, name)}", _kube.get_status,
                resource, namespace, name)


def replace_status(resource: str, namespace: Optional[str], name: str, body: Any) -> KubeObject:
    """Replaces the status subresource (same precondition as :func:`replace`)."""
    return _one(f"replace-status {_where(resource, namespace, name)}", _kube.replace_status,
                resource, namespace, name, _text(body))


def patch_status(resource: str, namespace: Optional[str], name: str, patch: Patch,
                 force: bool = False) -> KubeObject:
    """Patches the status subresource."""
    return _one(f"patch-status {_where(resource, namespace, name)}", _kube.patch_status,
                resource, namespace, name, _PATCH[PatchType(patch.type)], _text(patch.body), force)


def dry_run() -> bool:
    """Whether this plugin's writes are dry runs (``dry_run = true``, or the host's ``--dry-run``)."""
    return _kube.dry_run()
