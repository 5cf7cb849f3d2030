"""The client of a receiver's optional inspection hook (``docs/contract.md`` §5.5).

The hook lets the suite see what a receiver did with the events it acknowledged: which it
processed (once each?) and which gaps it noticed. Its shape::

    GET <hook URL>?server=<X-RVC-Server>&task_id=<task_id>
    200 {"events": [{"event_id": "…", "seq": 1}, …], "gaps": [2, …]}

``events`` lists every event processed for that task, once per time it was processed, in
processing order; ``gaps`` every seq the receiver noticed missing for the task (whether or
not it arrived later). A task it knows nothing of is ``{"events": [], "gaps": []}`` or a
404. Other keys are allowed and ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from robot_mcp_conformance._checks import Clause, violation
from robot_mcp_conformance._exceptions import HookError
from robot_mcp_kit import __version__

__all__ = ["HookView", "InspectionHook", "ask"]

_QUOTE_CHARS = 300


@dataclass(frozen=True)
class HookView:
    """What the hook said of one task."""

    server: str
    task_id: str
    event_ids: tuple[str, ...]
    """The ``event_id`` of each processed event, in processing order, repeats included."""
    gaps: frozenset[int]

    def times_processed(self, event_id: str) -> int:
        """How many times the receiver processed ``event_id``."""
        return self.event_ids.count(event_id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "task_id": self.task_id,
            "event_ids": list(self.event_ids),
            "gaps": sorted(self.gaps),
        }


class InspectionHook:
    """Asks a receiver's inspection hook about tasks. Not thread-safe; :meth:`close` it.

    Args:
        url: the hook's URL (``--inspect-url``).
        timeout_s: how long one question may take.
    """

    def __init__(self, url: str, timeout_s: float) -> None:
        self.url = url
        self._client = httpx.Client(
            timeout=timeout_s,
            headers={"User-Agent": f"robot-mcp-conformance/{__version__} (receiver suite)"},
        )

    def __repr__(self) -> str:
        return f"InspectionHook(url={self.url!r})"

    def close(self) -> None:
        """Close the HTTP connections (idempotent)."""
        self._client.close()

    def task(self, server: str, task_id: str) -> HookView:
        """What the receiver processed for ``task_id`` of ``server``.

        Raises:
            HookError: no answer, a status other than 200 or 404, or another shape.
        """
        where = f"GET {self.url}?server={server}&task_id={task_id}"
        try:
            response = self._client.get(self.url, params={"server": server, "task_id": task_id})
        except httpx.HTTPError as exc:
            raise HookError(f"the inspection hook did not answer {where}: {exc!r}") from None
        if response.status_code == 404:
            return HookView(server, task_id, (), frozenset())
        quoted = response.text[:_QUOTE_CHARS]
        if response.status_code != 200:
            raise HookError(
                f"the inspection hook answered {where} with {response.status_code}, not 200 "
                f"(or 404 for an unknown task): {quoted!r}"
            )
        try:
            data = response.json()
        except ValueError:
            raise HookError(
                f"the inspection hook's answer to {where} is not JSON: {quoted!r}"
            ) from None
        return _view(server, task_id, data, where, quoted)


def ask(hook: InspectionHook, clause: Clause, server: str, task_id: str) -> HookView:
    """``hook.task(server, task_id)``, or fail the test citing ``clause`` and why the hook
    could not say (a clause that needs the hook cannot be judged without its answer)."""
    try:
        return hook.task(server, task_id)
    except HookError as exc:
        violation(clause, f"cannot be judged: {exc}")


def _view(server: str, task_id: str, data: Any, where: str, quoted: str) -> HookView:
    shape = (
        '{"events": [{"event_id": "...", "seq": 1}, ...], "gaps": [2, ...]} (docs/contract.md §5.5)'
    )
    events = data.get("events") if isinstance(data, dict) else None
    gaps = data.get("gaps") if isinstance(data, dict) else None
    if not isinstance(events, list) or not isinstance(gaps, list):
        raise HookError(f"the inspection hook answered {where} with {quoted!r}, not {shape}")
    ids: list[str] = []
    for entry in events:
        event_id = entry.get("event_id") if isinstance(entry, dict) else None
        if not isinstance(event_id, str):
            raise HookError(
                f"the inspection hook answered {where} with an event without a string "
                f"event_id ({str(entry)[:100]!r}); the shape is {shape}"
            )
        ids.append(event_id)
    if not all(type(seq) is int for seq in gaps):
        raise HookError(f"the inspection hook's gaps for {where} are not all seqs: {gaps!r:.100}")
    return HookView(server, task_id, tuple(ids), frozenset(gaps))
