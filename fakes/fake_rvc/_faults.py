"""The fault plan: injected answers (a status, a delay, a dropped connection) per server.

Faults act before authentication, like a broken network or proxy would; they queue up in
order per server, and a server's own faults go before the ones for any server (``"*"``).
A fault may name one task: it then acts only on that task's posts (by the body's
``task_id``), and other posts pass it by. A status fault may carry ``retry_after_s``, sent
as ``Retry-After`` (a 429 or 503 that tells the poster when to come back).
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, replace
from typing import Any

from fake_rvc._exceptions import FaultError

__all__ = ["ANY_SERVER", "Fault", "FaultPlan"]

ANY_SERVER = "*"
"""Fault-plan key that matches posts from any server (per-server faults go first)."""


@dataclass(frozen=True)
class Fault:
    """An injected answer for the next ``remaining`` posts from one server.

    ``delay_s`` waits before answering; then ``status`` answers with that status (the
    event is not stored; with ``retry_after_s`` a ``Retry-After`` header too), ``drop``
    closes the connection without a response, and neither processes the post normally (so
    a delay alone just makes the receiver slow). With ``task_id`` it acts only on posts of
    that task.
    """

    server: str
    status: int | None = None
    delay_s: float | None = None
    drop: bool = False
    remaining: int = 1
    task_id: str | None = None
    retry_after_s: int | None = None

    def __post_init__(self) -> None:
        """A fault is valid by construction.

        Raises:
            FaultError: nothing to inject, both ``status`` and ``drop``, a status outside
                100–599, a delay outside 0–3600 s, a count (``remaining``) below 1, an
                empty server, or a ``retry_after_s`` without a status or outside 0–86400.
        """
        if self.status is None and self.delay_s is None and not self.drop:
            raise FaultError("A fault needs at least one of status, delay_s or drop=True.")
        if self.status is not None and self.drop:
            raise FaultError("A fault either answers with a status or drops; not both.")
        if self.status is not None and not 100 <= self.status <= 599:
            raise FaultError(f"Fault status must be 100-599, got {self.status}.")
        if self.delay_s is not None and not 0 <= self.delay_s <= 3600:
            raise FaultError(f"Fault delay_s must be 0-3600 seconds, got {self.delay_s}.")
        if self.remaining < 1:
            raise FaultError(f"Fault count must be at least 1, got {self.remaining}.")
        if not self.server:
            raise FaultError("Fault server must be a server name or '*'.")
        if self.task_id is not None and not self.task_id:
            raise FaultError("Fault task_id must be a task id, or left out for every task.")
        if self.retry_after_s is not None:
            if self.status is None:
                raise FaultError("Fault retry_after_s goes with a status (a 429 or a 503).")
            if type(self.retry_after_s) is not int or not 0 <= self.retry_after_s <= 86400:
                raise FaultError(
                    f"Fault retry_after_s must be whole seconds, 0-86400, got "
                    f"{self.retry_after_s!r}."
                )

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict of every field."""
        return asdict(self)


class FaultPlan:
    """The pending faults, per server in the order they will be used. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: dict[str, list[Fault]] = {}

    def __len__(self) -> int:
        with self._lock:
            return sum(map(len, self._faults.values()))

    def add(self, fault: Fault) -> Fault:
        """Queue ``fault`` after the ones already pending for its server; return it."""
        with self._lock:
            self._faults.setdefault(fault.server, []).append(fault)
        return fault

    def take(self, server: str | None, task_id: str | None = None) -> Fault | None:
        """Consume one fault for a post from ``server`` (its own first, then ``"*"``).

        A fault naming a task is taken only for a post of ``task_id``.
        """
        with self._lock:
            for key in (server, ANY_SERVER):
                plan = self._faults.get(key) if key is not None else None
                if not plan:
                    continue
                at = next((i for i, f in enumerate(plan) if f.task_id in (None, task_id)), None)
                if at is None:
                    continue
                fault = plan[at]
                if fault.remaining <= 1:
                    plan.pop(at)
                else:
                    plan[at] = replace(fault, remaining=fault.remaining - 1)
                if not plan:
                    del self._faults[key]  # type: ignore[arg-type]  # key is not None here
                return fault
            return None

    def pending(self) -> list[Fault]:
        """Return the pending faults, per server in the order they will be used."""
        with self._lock:
            return [f for plan in self._faults.values() for f in plan]

    def clear(self, server: str | None = None) -> None:
        """Remove pending faults for ``server``, or all of them when None."""
        with self._lock:
            if server is None:
                self._faults.clear()
            else:
                self._faults.pop(server, None)
