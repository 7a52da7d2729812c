"""The lifetime of a C handle shared by threads, store callbacks and NumPy views.

Every C call on a cache enters its :class:`_Life` (counting the calls in
flight) and leaves it when the call returns. :meth:`_Life.close` refuses while
the closing thread is itself inside a call on the handle (a :class:`Store`
callback that closes the cache whose save is running), makes every later call
raise :class:`ClosedError`, waits for the calls in flight on other threads, and
destroys the handle once no NumPy view of its memory is left (:meth:`pin`).
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Callable, Optional

from .errors import ClosedError, FailedPreconditionError


class _Pin:
    """Owner object under a NumPy view: while it lives, the handle's memory does."""

    __slots__ = ("__array_interface__", "__weakref__")


class _Life:
    def __init__(self, what: str, handle: int, destroy: Callable[[int], None]) -> None:
        self._what = what
        self._handle: Optional[int] = handle
        self._destroy = destroy
        self._cond = threading.Condition(threading.Lock())
        self._calls = 0  # C calls in flight, every thread
        self._depth = threading.local()  # .n: calls in flight on this thread
        self._closing = False  # set by the first close(): new calls raise
        self._closer: Optional[int] = None
        self._closed = False  # close() has finished (the handle may still be pinned)
        self._pins = 0  # live NumPy owners of the handle's memory

    # -- calls
    def enter(self) -> int:
        """Counts a C call; returns the handle. ClosedError once closing."""
        with self._cond:
            if self._closing:
                raise ClosedError(f"the {self._what} is closed")
            self._calls += 1
            h = self._handle
        self._depth.n = getattr(self._depth, "n", 0) + 1
        assert h is not None
        return h

    def exit(self) -> None:
        self._depth.n -= 1
        with self._cond:
            self._calls -= 1
            if self._calls == 0:
                self._cond.notify_all()

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(handle, *args)`` as a counted call (the GIL is released inside)."""
        h = self.enter()
        try:
            return fn(h, *args)
        finally:
            self.exit()

    @property
    def closing(self) -> bool:
        return self._closing

    def handle(self) -> int:
        """The raw handle for the caller's own calls; ClosedError once closing."""
        with self._cond:
            if self._closing or self._handle is None:
                raise ClosedError(f"the {self._what} is closed")
            return self._handle

    # -- close
    def close(self, before_destroy: Optional[Callable[[], None]] = None) -> None:
        """Idempotent. Raises FailedPreconditionError (and changes nothing) when
        this thread is inside a call on the handle; otherwise waits for the
        calls of other threads, runs ``before_destroy`` and destroys the
        handle, or leaves that to the last pin's death."""
        me = threading.get_ident()
        with self._cond:
            if getattr(self._depth, "n", 0) > 0:
                raise FailedPreconditionError(
                    f"close(): this thread is inside a call on this {self._what} (a Store "
                    f"callback of its save, restore, store_exists or store_remove?); closing "
                    f"now would destroy the {self._what} under that call. Close it after the "
                    f"call returns")
            if self._closing:
                # Another close() runs or ran: wait for it unless it is this
                # thread's (a release callback run by the destroy).
                while not self._closed and self._closer != me:
                    self._cond.wait()
                return
            self._closing = True
            self._closer = me
            while self._calls > 0:
                self._cond.wait()
        try:
            if before_destroy is not None:
                before_destroy()
        finally:
            with self._cond:
                self._closed = True
                self._cond.notify_all()
                h = self._take_if_unpinned()
            if h is not None:
                self._destroy(h)

    def _take_if_unpinned(self) -> Optional[int]:
        if self._pins > 0 or self._handle is None:
            return None
        h, self._handle = self._handle, None
        return h

    # -- NumPy views
    def pin(self, array_interface: dict) -> _Pin:
        """An owner for ``np.asarray``: the handle is not destroyed while it
        (and so any array viewing it) lives, even after close()."""
        with self._cond:
            if self._closing:
                raise ClosedError(f"the {self._what} is closed")
            self._pins += 1
        p = _Pin()
        p.__array_interface__ = array_interface
        weakref.finalize(p, self._unpin)
        return p

    def _unpin(self) -> None:
        with self._cond:
            self._pins -= 1
            h = self._take_if_unpinned() if self._closed else None
        if h is not None:
            self._destroy(h)
