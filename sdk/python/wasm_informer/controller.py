"""The ``controller`` world: the :class:`Controller` base class of the
exported ``reconciler`` interface, :class:`Request`, :class:`Action`,
:class:`ReconcileError` and the :func:`finalizer` helper.

A controller is called with the key of an object that needs reconciling,
from a per-plugin work queue with client-go's semantics (a key is queued at
most once, never reconciled twice at once, retried with rate-limited backoff,
requeued after a delay on request). It reads the object's current state from
the cache (it may be gone: then clean up) and makes the world match it.

Invariant: ``reconcile`` ends in an action or a reconcile error, never a trap:
an ordinary exception is a retry, :class:`Terminal` is not retried; the
objects of a call are closed when its export returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

from types import ModuleType

from componentize_py_types import Err

from . import _scope, cache, kube
from .errors import ApiError
from .handler import message, run_init
from .objects import KubeObject


@dataclass(frozen=True)
class Request:
    """The object to reconcile."""

    resource: str
    """The primary resource, for example ``apps/v1/deployments``."""
    namespace: Optional[str]
    """None for cluster-scoped objects."""
    name: str
    key: str
    """``namespace/name``, or ``name``."""

    def object(self) -> Optional[KubeObject]:
        """The object's current state in the cache, or None when it is gone."""
        return cache.get(self.resource, self.key)


@dataclass(frozen=True)
class Action:
    """What to do after a successful reconcile: nothing until the next change
    (``Action.done()``, or returning None), or reconcile again after a delay."""

    requeue_after: Optional[float] = None
    """Seconds until the next reconcile, change or not."""

    @staticmethod
    def done() -> "Action":
        """Nothing until the next change."""
        return _DONE

    @staticmethod
    def requeue(after: float) -> "Action":
        """Reconcile again after ``after`` seconds."""
        if after < 0:
            raise ValueError("Action.requeue: after must be >= 0 seconds")
        return Action(requeue_after=after)

    def _wit(self) -> Any:
        if self.requeue_after is None:
            return _w().Action_Done()
        return _w().Action_RequeueAfter(int(round(self.requeue_after * 1000)))


_DONE = Action()


def _w() -> ModuleType:
    """The exported interface's bindings, which only the ``controller`` world
    has (this module is imported in both worlds)."""
    from wit_world.exports import reconciler

    return reconciler


class ReconcileError(Exception):
    """A failed reconcile that is retried with the work queue's backoff (as is
    any other exception)."""

    terminal = False


class Retry(ReconcileError):
    """Try again later, with backoff."""


class Terminal(ReconcileError):
    """Do not retry: counted and logged; the next change queues the key again."""

    terminal = True


class Controller:
    """Base class of the exported WIT interface ``reconciler``.

    Subclass it as ``class Reconciler(Controller)`` in ``app.py`` and override
    ``configure(config)`` and ``reconcile(request) -> Action | None``. (The
    base class wraps the ``reconcile`` a subclass defines into the WIT export.)
    """

    def configure(self, config: Dict[str, Any]) -> None:
        """Receives the manifest's ``[config]`` table, parsed. Raise to refuse it."""

    def reconcile(self, request: Request) -> Optional[Action]:  # replaced for subclasses
        raise NotImplementedError("Controller.reconcile must be overridden")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        user = cls.__dict__.get("reconcile")
        if user is not None:
            cls._reconcile = user  # type: ignore[attr-defined]
            cls.reconcile = Controller._export_reconcile  # type: ignore[method-assign,assignment]

    # WIT exports -------------------------------------------------------------

    def init(self, config: str) -> None:
        run_init(self.configure, config)

    def _export_reconcile(self, request: Any) -> Any:
        _wit = _w()
        req = Request(resource=request.resource, namespace=request.namespace,
                      name=request.name, key=request.key)
        try:
            result = self._reconcile(req)  # type: ignore[attr-defined]
            if result is None:
                return _wit.Action_Done()
            if not isinstance(result, Action):
                raise TypeError("reconcile must return an Action or None")
            return result._wit()
        except Err:
            raise
        except Exception as e:  # noqa: BLE001 - every failure becomes the err result
            text = str(e) if isinstance(e, (ReconcileError, ApiError)) else message(e)
            if isinstance(e, ReconcileError) and e.terminal:
                raise Err(_wit.ReconcileError_Terminal(text))
            raise Err(_wit.ReconcileError_Retry(text))
        finally:
            _scope.end_call()


def finalizer(request: Request, name: str, apply: Callable[[KubeObject], Optional[Action]],
              cleanup: Callable[[KubeObject], Optional[Action]]) -> Optional[Action]:
    """Runs a reconcile under the finalizer ``name`` (for example
    ``example.com/cleanup``), as kube-runtime's ``finalizer`` does:

    - the object is gone: nothing to do (the finalizer made sure cleanup ran);
    - no finalizer yet and not being deleted: adds it and returns; the change
      queues the key again;
    - being deleted with the finalizer: ``cleanup(obj)``; when it returns done
      (``Action.done()`` or None), removes the finalizer so the deletion
      completes; when it returns ``Action.requeue(...)`` (cleanup still under
      way) or raises, keeps the finalizer (and returns the requeue, or raises);
    - being deleted without the finalizer: nothing to do;
    - otherwise: ``apply(obj)``.

    Both patches are JSON patches that test ``/metadata/uid``, so they never
    touch another object re-created under the same name; the add also tests
    the resourceVersion (a stale view gets a conflict), the removal tests the
    finalizer's position.

    Under dry run (``kube.dry_run()``) no patch persists, so the helper does in
    one reconcile what a live run spreads over several, and a dry run shows
    the writes a live run would make: after the (dry-run) add it calls
    ``apply`` at once; an object being deleted without the finalizer gets
    ``cleanup``, as it would have had the finalizer in a live run, and no
    removal (there is nothing to remove). A cleanup with effects outside the
    cluster checks ``kube.dry_run()`` itself. An object deleted while no other
    finalizer held it is gone at once, so a dry run cannot show its cleanup.

    Needs ``patch`` on the resource in the manifest's ``[[write]]`` grants.
    """
    obj = request.object()
    if obj is None:
        return Action.done()
    meta = obj.meta
    deleting = meta.deletion_timestamp is not None
    at = meta.finalizers.index(name) if name in meta.finalizers else -1
    uid = {"op": "test", "path": "/metadata/uid", "value": meta.uid}
    if not deleting and at < 0:
        add = ({"op": "add", "path": "/metadata/finalizers/-", "value": name} if meta.finalizers
               else {"op": "add", "path": "/metadata/finalizers", "value": [name]})
        kube.patch(request.resource, request.namespace, request.name, kube.Patch.json([
            uid,
            {"op": "test", "path": "/metadata/resourceVersion", "value": meta.resource_version},
            add,
        ]))
        if kube.dry_run():
            # A dry-run add does not persist: no change queues the key again.
            return apply(obj)
        return Action.done()
    if not deleting:
        return apply(obj)
    if at < 0:
        # Under dry run the finalizer was never added: a live run would clean up now.
        return cleanup(obj) if kube.dry_run() else Action.done()
    action = cleanup(obj)
    if action is not None and not isinstance(action, Action):
        raise TypeError("cleanup must return an Action or None")
    if action is not None and action.requeue_after is not None:
        # Cleanup still under way: the finalizer holds the delete.
        return action
    try:
        kube.patch(request.resource, request.namespace, request.name, kube.Patch.json([
            uid,
            {"op": "test", "path": f"/metadata/finalizers/{at}", "value": name},
            {"op": "remove", "path": f"/metadata/finalizers/{at}"},
        ]))
    except ApiError as e:
        if not e.not_found:
            raise
    return action
