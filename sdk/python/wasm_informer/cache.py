"""Queries against the host's shared cache. Each needs the resource in the
manifest's ``read`` list (or ``resources``); otherwise it raises
:class:`~wasm_informer.CacheError` ``forbidden``. Results are valid for the
call; one call may reference at most about a million objects (beyond, a query
raises ``too-many-objects``: narrow it with a namespace, a selector or an
index).
"""

from __future__ import annotations

from typing import List, Optional

from componentize_py_types import Err
from wit_world.imports import cache as _cache

from .errors import raise_cache
from .objects import KubeObject, wrap


def get(resource: str, key: str) -> Optional[KubeObject]:
    """One cached object by resource id and key (``namespace/name`` or ``name``), or None."""
    try:
        return wrap(_cache.get(resource, key))
    except Err as e:
        raise_cache(e, f"get {resource} {key}")


def list(resource: str, namespace: Optional[str] = None,  # noqa: A001 - the WIT name
         label_selector: Optional[str] = None) -> List[KubeObject]:
    """Cached objects of a resource, optionally in one namespace and matching a
    label selector in full Kubernetes syntax."""
    try:
        raws = _cache.list(resource, namespace, label_selector)
    except Err as e:
        raise_cache(e, f"list {resource}")
    return [KubeObject(r) for r in raws]


def by_index(resource: str, index_name: str, value: str) -> List[KubeObject]:
    """Cached objects whose value for the named index equals ``value`` (the
    index ``namespace`` always exists)."""
    try:
        raws = _cache.by_index(resource, index_name, value)
    except Err as e:
        raise_cache(e, f"by-index {resource} {index_name}")
    return [KubeObject(r) for r in raws]


def has_synced(resource: str) -> bool:
    """Whether the informer for ``resource`` finished its first list."""
    try:
        return _cache.has_synced(resource)
    except Err as e:
        raise_cache(e, f"has-synced {resource}")
