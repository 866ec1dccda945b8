"""The call clock: counts the export calls (``init``, ``on-event``,
``reconcile``) that have returned. Every :class:`~wasm_informer.KubeObject`
remembers the count at its creation and is valid only while it is unchanged:
the host forgets an object reference when the call that handed it out
returns, and reading a forgotten one would trap the instance.

Invariant: ``end_call`` runs when every export returns, so an object kept past
its call raises a clear error before any host call is made.
"""

calls = 0


def end_call() -> None:
    """Marks the end of the current export call."""
    global calls
    calls += 1
