"""How the recorder tells others that something changed: waits, live feeds and listeners.

:class:`Notifier` owns the condition, the async waiters, the subscriptions and the
listeners; :class:`fake_rvc.Recorder` holds one, calls :meth:`Notifier.notify` after each
change and delegates its public wait methods to it. Waiting, two ways:

* **sync** — :meth:`Notifier.wait_for` blocks the calling thread on a
  ``threading.Condition``. Call it from a test thread, never from the loop that runs the
  app (it would stall the app).
* **async** — :meth:`Notifier.wait_for_async` awaits an ``asyncio.Event`` that
  :meth:`Notifier.notify` sets with ``loop.call_soon_threadsafe``, so it works on any
  loop, including the app's own (the long-poll endpoint uses it).

The live page reads a :class:`Subscription`; the CLI prints through a listener.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

from fake_rvc._exceptions import WaitTimeout
from fake_rvc._records import Attempt, TaskState
from robot_mcp_kit.log import get_logger

__all__ = ["FeedItem", "Listener", "Notifier", "Subscription"]

T = TypeVar("T")

Listener = Callable[[Attempt], None]
"""Called with each recorded attempt, on the recording thread."""

FeedItem = tuple[str, Attempt | TaskState | None]
"""One item of a live feed: ``("attempt", Attempt)``, ``("task_state", TaskState)`` or
``("reset", None)``."""

_log = get_logger("fake_rvc")


class Subscription:
    """A live feed of attempts for one asyncio loop (the page's SSE stream uses it).

    Items are ``("attempt", Attempt)``, ``("task_state", TaskState)``, ``("reset", None)``,
    or ``None`` when the recorder closes its streams. Unsubscribe with
    :meth:`fake_rvc.Recorder.unsubscribe`.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.queue: asyncio.Queue[FeedItem | None] = asyncio.Queue()

    def push(self, item: FeedItem | None) -> None:
        """Hand ``item`` to the subscriber's loop (thread-safe; dropped if that loop closed)."""
        with contextlib.suppress(RuntimeError):  # loop already closed: nobody listens
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)


class Notifier:
    """Waits, live feeds and listeners over some state guarded by ``lock``.

    Args:
        lock: the lock that guards the watched state; the condition is built on it, so a
            predicate runs while the state holds still.
        describe: what a timeout message names (the recorder passes its ``repr``).

    Thread-safe.
    """

    def __init__(self, lock: threading.RLock, describe: Callable[[], str]) -> None:
        self._lock = lock
        self._describe = describe
        self._cond = threading.Condition(lock)
        self._async_waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
        self._subscriptions: set[Subscription] = set()
        self._listeners: list[Listener] = []

    def notify(self, attempt: Attempt | TaskState | None) -> None:
        """Wake every waiter, feed every subscription, call every listener (None: reset).

        Listeners hear of attempts only, not of a :class:`TaskState`. Call it without
        holding the lock, so listeners and feeds run outside it.
        """
        with self._lock:
            self._cond.notify_all()
            waiters = list(self._async_waiters)
            subscriptions = list(self._subscriptions)
            listeners = list(self._listeners)
        for loop, flag in waiters:
            with contextlib.suppress(RuntimeError):  # the waiter's loop is closed
                loop.call_soon_threadsafe(flag.set)
        item: FeedItem
        if attempt is None:
            item = ("reset", None)
        elif isinstance(attempt, TaskState):
            item = ("task_state", attempt)
        else:
            item = ("attempt", attempt)
        for sub in subscriptions:
            sub.push(item)
        if isinstance(attempt, Attempt):
            for listener in listeners:
                try:
                    listener(attempt)
                except Exception:  # a broken printer must not break the receiver
                    _log.exception("listener_failed", listener=repr(listener))

    # ----------------------------------------------------------------- waiting

    def wait_for(self, predicate: Callable[[], T | None], timeout_s: float) -> T:
        """Block until ``predicate()`` returns something other than None or False.

        Raises:
            WaitTimeout: the predicate still failed after ``timeout_s`` (a ``TimeoutError``).
        """
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                result = predicate()
                if result is not None and result is not False:
                    return result
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self._timeout(timeout_s)
                self._cond.wait(remaining)

    async def wait_for_async(self, predicate: Callable[[], T | None], timeout_s: float) -> T:
        """Await until ``predicate()`` returns something other than None or False.

        Raises:
            WaitTimeout: the predicate still failed after ``timeout_s`` (a ``TimeoutError``).
        """
        loop = asyncio.get_running_loop()
        flag = asyncio.Event()
        waiter = (loop, flag)
        deadline = loop.time() + timeout_s
        with self._lock:
            self._async_waiters.add(waiter)
        try:
            while True:
                flag.clear()
                result = predicate()
                if result is not None and result is not False:
                    return result
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise self._timeout(timeout_s)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(flag.wait(), remaining)
        finally:
            with self._lock:
                self._async_waiters.discard(waiter)

    def _timeout(self, timeout_s: float) -> WaitTimeout:
        return WaitTimeout(f"Condition not met within {timeout_s} s: {self._describe()}.")

    # ----------------------------------------------------------------- live feeds

    def subscribe(self) -> Subscription:
        """A new live feed for the running loop (call it on the loop that will read it)."""
        sub = Subscription(asyncio.get_running_loop())
        with self._lock:
            self._subscriptions.add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        """Stop feeding ``sub``."""
        with self._lock:
            self._subscriptions.discard(sub)

    def close_streams(self) -> None:
        """End every live feed: each gets ``None``, then none is fed any more."""
        with self._lock:
            subs = list(self._subscriptions)
            self._subscriptions.clear()
        for sub in subs:
            sub.push(None)

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(attempt)`` at each :meth:`notify` with an attempt."""
        with self._lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        """Stop calling ``listener``."""
        with self._lock:
            self._listeners.remove(listener)

    @contextlib.contextmanager
    def listening(self, listener: Listener) -> Iterator[None]:
        """Register ``listener`` for the duration of a ``with`` block."""
        self.add_listener(listener)
        try:
            yield
        finally:
            self.remove_listener(listener)
