"""How the recorder tells others that something changed: waits, live feeds and listeners.

:class:`RecorderWaits` is the half of :class:`fake_rvc.Recorder` that other threads and
loops block on. Waiting, two ways:

* **sync** — :meth:`~RecorderWaits.wait_for_event`, :meth:`~RecorderWaits.wait_for_attempts`
  and :meth:`~RecorderWaits.wait_for` block the calling thread on a ``threading.Condition``.
  Call them from a test thread, never from the loop that runs the app (it would stall the
  app).
* **async** — :meth:`~RecorderWaits.wait_for_event_async` and
  :meth:`~RecorderWaits.wait_for_async` await an ``asyncio.Event`` that the recorder sets
  with ``loop.call_soon_threadsafe``, so they work on any loop, including the app's own
  (the long-poll endpoint uses them).

The live page reads a :class:`Subscription`; the CLI prints through a listener.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Self, TypeVar

from fake_rvc._exceptions import WaitTimeout
from fake_rvc._logging import log_event
from fake_rvc._records import Attempt, ReceivedEvent

__all__ = ["Listener", "RecorderWaits", "Subscription"]

T = TypeVar("T")

Listener = Callable[[Attempt], None]
"""Called with each recorded attempt, on the recording thread."""


class Subscription:
    """A live feed of attempts for one asyncio loop (the page's SSE stream uses it).

    Items are ``("attempt", Attempt)``, ``("reset", None)``, or ``None`` when the recorder
    closes its streams. Unsubscribe with :meth:`RecorderWaits.unsubscribe`.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.queue: asyncio.Queue[tuple[str, Attempt | None] | None] = asyncio.Queue()

    def push(self, item: tuple[str, Attempt | None] | None) -> None:
        """Hand ``item`` to the subscriber's loop (thread-safe; dropped if that loop closed)."""
        with contextlib.suppress(RuntimeError):  # loop already closed: nobody listens
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)


class RecorderWaits:
    """Waits, live feeds and listeners over the state of a :class:`fake_rvc.Recorder`.

    The recorder calls :meth:`_init_waits` with its lock and :meth:`_notify` after each
    change; the rest reads the recorder through :meth:`events` and :meth:`attempts`, and
    :meth:`_find_event`, which it provides.
    """

    _lock: threading.RLock
    _cond: threading.Condition
    _async_waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]
    _subscriptions: set[Subscription]
    _listeners: list[Listener]

    def _init_waits(self, lock: threading.RLock) -> None:
        self._lock = lock
        self._cond = threading.Condition(lock)
        self._async_waiters = set()
        self._subscriptions = set()
        self._listeners = []

    # Provided by the recorder.
    def events(
        self, server: str | None = None, task_id: str | None = None, type: str | None = None
    ) -> list[ReceivedEvent]:
        raise NotImplementedError

    def attempts(self, server: str | None = None) -> list[Attempt]:
        raise NotImplementedError

    def _find_event(
        self, task_id: str, type: str | None, server: str | None = None
    ) -> ReceivedEvent | None:
        raise NotImplementedError

    def _notify(self, attempt: Attempt | None) -> None:
        """Wake every waiter, feed every subscription, call every listener (None: reset)."""
        with self._lock:
            self._cond.notify_all()
            waiters = list(self._async_waiters)
            subscriptions = list(self._subscriptions)
            listeners = list(self._listeners)
        for loop, flag in waiters:
            with contextlib.suppress(RuntimeError):  # the waiter's loop is closed
                loop.call_soon_threadsafe(flag.set)
        item: tuple[str, Attempt | None] = (
            ("reset", None) if attempt is None else ("attempt", attempt)
        )
        for sub in subscriptions:
            sub.push(item)
        if attempt is not None:
            for listener in listeners:
                try:
                    listener(attempt)
                except Exception:  # a broken printer must not break the receiver
                    log_event(
                        logging.ERROR, "listener_failed", listener=repr(listener), exc_info=True
                    )

    # ----------------------------------------------------------------- waiting

    def wait_for(self, predicate: Callable[[Self], T | None], timeout_s: float) -> T:
        """Block until ``predicate(self)`` returns something other than None or False.

        Thread-safe; never call it on the loop that runs the app.

        Raises:
            WaitTimeout: the predicate still failed after ``timeout_s`` (a ``TimeoutError``).
        """
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                result = predicate(self)
                if result is not None and result is not False:
                    return result
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise WaitTimeout(f"Condition not met within {timeout_s} s: {self!r}.")
                self._cond.wait(remaining)

    async def wait_for_async(self, predicate: Callable[[Self], T | None], timeout_s: float) -> T:
        """Await until ``predicate(self)`` returns something other than None or False.

        Works on any event loop, including the app's.

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
                result = predicate(self)
                if result is not None and result is not False:
                    return result
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise WaitTimeout(f"Condition not met within {timeout_s} s: {self!r}.")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(flag.wait(), remaining)
        finally:
            with self._lock:
                self._async_waiters.discard(waiter)

    def wait_for_event(
        self,
        task_id: str,
        type: str | None = None,
        timeout_s: float = 10.0,
        *,
        server: str | None = None,
    ) -> ReceivedEvent:
        """Block until task ``task_id`` has an event of ``type`` (any type when None).

        Returns the first such event, even one that arrived before the call.

        Raises:
            WaitTimeout: no such event within ``timeout_s``; the message says what was seen.
        """
        try:
            return self.wait_for(lambda r: r._find_event(task_id, type, server), timeout_s)
        except WaitTimeout:
            raise WaitTimeout(self._timeout_message(task_id, type, timeout_s)) from None

    async def wait_for_event_async(
        self,
        task_id: str,
        type: str | None = None,
        timeout_s: float = 10.0,
        *,
        server: str | None = None,
    ) -> ReceivedEvent:
        """Async twin of :meth:`wait_for_event`, usable on any loop."""
        try:
            return await self.wait_for_async(
                lambda r: r._find_event(task_id, type, server), timeout_s
            )
        except WaitTimeout:
            raise WaitTimeout(self._timeout_message(task_id, type, timeout_s)) from None

    def wait_for_attempts(
        self, count: int, *, server: str | None = None, timeout_s: float = 10.0
    ) -> list[Attempt]:
        """Block until at least ``count`` attempts (from ``server``) were recorded."""

        def enough(r: Self) -> list[Attempt] | None:
            found = r.attempts(server)
            return found if len(found) >= count else None

        return self.wait_for(enough, timeout_s)

    def _timeout_message(self, task_id: str, type: str | None, timeout_s: float) -> str:
        seen = [f"#{e.seq} {e.type}" for e in self.events(task_id=task_id)]
        return (
            f"No {type or 'event'} for task {task_id!r} within {timeout_s} s; "
            f"seen for it: {', '.join(seen) or 'nothing'}."
        )

    # ----------------------------------------------------------------- live feeds

    def subscribe(self, backlog: int = 2000) -> tuple[list[Attempt], Subscription]:
        """Return the last ``backlog`` attempts and a live feed of the ones after them.

        Must be called on the loop that will read the subscription.
        """
        sub = Subscription(asyncio.get_running_loop())
        with self._lock:
            self._subscriptions.add(sub)
            past = self.attempts()[-backlog:] if backlog > 0 else []
        return past, sub

    def unsubscribe(self, sub: Subscription) -> None:
        """Stop feeding ``sub``."""
        with self._lock:
            self._subscriptions.discard(sub)

    def close_streams(self) -> None:
        """End every live feed (used before shutting the server down)."""
        with self._lock:
            subs = list(self._subscriptions)
            self._subscriptions.clear()
        for sub in subs:
            sub.push(None)

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(attempt)`` after each recorded attempt, on the recording thread.

        A listener must be quick and must not raise; the CLI prints one line with it.
        """
        with self._lock:
            self._listeners.append(listener)

    @contextlib.contextmanager
    def listening(self, listener: Listener) -> Iterator[None]:
        """Register ``listener`` for the duration of a ``with`` block."""
        self.add_listener(listener)
        try:
            yield
        finally:
            with self._lock:
                self._listeners.remove(listener)
