"""The receiver's counters: one mutable :class:`Counters`, read as a :class:`ReceiverStats`.

Counted where things happen (on the receiver's event loop); read by
:attr:`Receiver.stats <robot_mcp_kit.receiver.Receiver.stats>`, its ``repr`` and, while
telemetry is on, the ``robot_mcp.receiver.*`` observable instruments at each export.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

__all__ = ["Counters", "ReceiverStats"]


@dataclass(frozen=True, slots=True)
class ReceiverStats:
    """A snapshot of the receiver's counters.

    Posts: ``accepted`` (a new event, stored), ``duplicates`` (an event stored before,
    acknowledged again), ``ignored`` (a type this kit does not know, acknowledged),
    ``refused`` (4xx), ``unavailable`` (503: the event could not be stored; its poster
    sends it again). Delivery: ``delivered`` (updates the handler returned from),
    ``handler_failures`` (calls that raised), ``given_up`` (updates passed over after
    ``give_up_after`` failures), ``waiting`` (events stored, not yet handed over).
    Repair and reconciliation: ``repaired`` (events fetched with ``get_task_events``),
    ``gaps`` (GAP updates: seqs that will never come), ``states`` and ``lost`` (STATE and
    LOST updates), ``reconciles`` (polls of a server that answered), ``call_failures``
    (MCP calls that failed).
    """

    accepted: int = 0
    duplicates: int = 0
    ignored: int = 0
    refused: int = 0
    unavailable: int = 0
    delivered: int = 0
    handler_failures: int = 0
    given_up: int = 0
    waiting: int = 0
    repaired: int = 0
    gaps: int = 0
    states: int = 0
    lost: int = 0
    reconciles: int = 0
    call_failures: int = 0

    def to_dict(self) -> dict[str, int]:
        """A JSON-ready view."""
        return asdict(self)


_NAMES = tuple(f.name for f in fields(ReceiverStats) if f.name != "waiting")


class Counters:
    """The live counters (plain ints; the receiver's event loop is their only writer)."""

    __slots__ = _NAMES

    def __init__(self) -> None:
        for name in _NAMES:
            setattr(self, name, 0)

    def add(self, name: str, value: int = 1) -> None:
        """Add ``value`` to the counter ``name`` (a field of :class:`ReceiverStats`)."""
        setattr(self, name, getattr(self, name) + value)

    def snapshot(self, waiting: int) -> ReceiverStats:
        """The counters now, with ``waiting`` as given."""
        return ReceiverStats(waiting=waiting, **{name: getattr(self, name) for name in _NAMES})
