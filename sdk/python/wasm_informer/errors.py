"""Typed errors of the cache and API calls.

Invariant: every ``err`` the host returns becomes one of these exceptions;
nothing here lets a WIT error escape as a trap.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, List, NoReturn

from componentize_py_types import Err
from wit_world.imports import types as _types


class CacheErrorKind(str, Enum):
    """The case of a WIT ``cache-error``; compares equal to its name."""

    FORBIDDEN = "forbidden"
    UNKNOWN_RESOURCE = "unknown-resource"
    INVALID_SELECTOR = "invalid-selector"
    UNKNOWN_INDEX = "unknown-index"
    TOO_MANY_OBJECTS = "too-many-objects"

    def __str__(self) -> str:
        return self.value


class ApiErrorKind(str, Enum):
    """The case of a WIT ``api-error``; compares equal to its name
    (``e.kind == "not-found"``)."""

    FORBIDDEN = "forbidden"
    NOT_FOUND = "not-found"
    CONFLICT = "conflict"
    ALREADY_EXISTS = "already-exists"
    INVALID = "invalid"
    RATE_LIMITED = "rate-limited"
    TIMEOUT = "timeout"
    UNAVAILABLE = "unavailable"

    def __str__(self) -> str:
        return self.value


Cause = _types.Cause


class CacheError(Exception):
    """A failed cache query; ``kind`` is the WIT ``cache-error`` case."""

    def __init__(self, kind: CacheErrorKind, detail: str, query: str) -> None:
        super().__init__(f"cache {query}: {kind}: {detail}")
        self.kind = kind
        self.detail = detail


class ApiError(Exception):
    """A failed API call (``kube``, ``events``). ``kind`` is the WIT
    ``api-error`` case, ``detail`` the server's (or the host's) message,
    ``causes`` the field causes of an ``invalid`` answer."""

    def __init__(self, kind: ApiErrorKind, detail: str, call: str,
                 causes: List[Cause] | None = None) -> None:
        self.kind = kind
        self.detail = detail
        self.causes: List[Cause] = list(causes or [])
        why = detail
        if self.causes:
            why += " (" + "; ".join(f"{c.field}: {c.message}" for c in self.causes) + ")"
        super().__init__(f"{call}: {kind}: {why}")

    @property
    def not_found(self) -> bool:
        """True for ``not-found``."""
        return self.kind is ApiErrorKind.NOT_FOUND

    @property
    def conflict(self) -> bool:
        """True for ``conflict``."""
        return self.kind is ApiErrorKind.CONFLICT


_CACHE_KINDS = {
    _types.CacheError_Forbidden: CacheErrorKind.FORBIDDEN,
    _types.CacheError_UnknownResource: CacheErrorKind.UNKNOWN_RESOURCE,
    _types.CacheError_InvalidSelector: CacheErrorKind.INVALID_SELECTOR,
    _types.CacheError_UnknownIndex: CacheErrorKind.UNKNOWN_INDEX,
    _types.CacheError_TooManyObjects: CacheErrorKind.TOO_MANY_OBJECTS,
}

_API_KINDS = {
    _types.ApiError_Forbidden: ApiErrorKind.FORBIDDEN,
    _types.ApiError_NotFound: ApiErrorKind.NOT_FOUND,
    _types.ApiError_Conflict: ApiErrorKind.CONFLICT,
    _types.ApiError_AlreadyExists: ApiErrorKind.ALREADY_EXISTS,
    _types.ApiError_Invalid: ApiErrorKind.INVALID,
    _types.ApiError_RateLimited: ApiErrorKind.RATE_LIMITED,
    _types.ApiError_Timeout: ApiErrorKind.TIMEOUT,
    _types.ApiError_Unavailable: ApiErrorKind.UNAVAILABLE,
}


def raise_cache(e: Err[Any], query: str) -> NoReturn:
    """Raises the CacheError of a WIT ``cache-error``."""
    v = e.value
    kind = _CACHE_KINDS[type(v)]
    if kind is CacheErrorKind.TOO_MANY_OBJECTS:
        detail = f"one call may reference at most {v.value} objects; narrow the query"
    else:
        detail = str(v.value)
    raise CacheError(kind, detail, query) from None


def raise_api(e: Err[Any], call: str) -> NoReturn:
    """Raises the ApiError of a WIT ``api-error``."""
    v = e.value
    kind = _API_KINDS[type(v)]
    if kind is ApiErrorKind.INVALID:
        raise ApiError(kind, v.value.message, call, v.value.causes) from None
    raise ApiError(kind, str(v.value), call) from None
