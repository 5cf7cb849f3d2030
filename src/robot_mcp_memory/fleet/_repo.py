"""What the fleet registry needs of storage: :class:`FleetRepo`.

The port says what storage must do, not how. Every method is one transaction (a write
that reads first reads the row it writes under the transaction's lock); nothing here
validates an argument or words a refusal — that is :class:`~robot_mcp_memory.fleet.
FleetService`'s. Storage errors are the memory server's own: a write naming a group that
does not exist raises :class:`~robot_mcp_memory.MissingReference`, one that meets a record
another writer just created :class:`~robot_mcp_memory.WriteConflict`, an unreachable
store :class:`~robot_mcp_kit.store.StoreUnavailable`; nothing is written then.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from robot_mcp_memory.fleet._model import FleetRows, Group, Placement, Robot

__all__ = ["FleetRepo", "GroupLabels"]

GroupLabels = dict[str, str | None]
"""A group's ``name``, ``customer`` and ``factory``: the ones a write sets (None clears);
a label absent from the dict is kept."""


class FleetRepo(Protocol):
    """Robots, groups and settings as stored (see the module docstring)."""

    def robot(self, robot_id: str) -> Robot | None:
        """The robot, or None."""
        ...

    def robots(self, group_id: str | None = None) -> list[Robot]:
        """Every robot (of ``group_id``), by id."""
        ...

    def group(self, group_id: str) -> Group | None:
        """The group with its members, or None."""
        ...

    def groups(self) -> list[Group]:
        """Every group by id, each with its members."""
        ...

    def placement(self, robot_id: str, toggle: str) -> Placement:
        """Where the robot stands, with the ``fleet_settings`` value ``toggle`` (the global
        self-improve toggle's key), in one statement (an unknown robot: ungrouped)."""
        ...

    def group_members_of(self, robot_id: str) -> list[str]:
        """The robots of ``robot_id``'s group (none when it is ungrouped or unknown)."""
        ...

    def setting(self, key: str) -> str | None:
        """A ``fleet_settings`` value, or None."""
        ...

    def put_setting(self, key: str, value: str) -> None:
        """Set a ``fleet_settings`` value."""
        ...

    def save_robot(
        self,
        robot_id: str,
        *,
        name: str | None,
        rename: bool,
        group_id: str | None,
        meta: str | None,
        now: str,
    ) -> tuple[Robot, bool]:
        """Insert the robot or update it: ``name`` only when ``rename``, ``group_id`` and
        ``meta`` (JSON text) only when not None, ``updated`` to ``now``. The robot as
        stored, and whether it was new.

        Raises:
            MissingReference: ``group_id`` does not exist.
        """
        ...

    def set_meta(self, robot_id: str, meta: str, now: str) -> Robot | None:
        """Replace a robot's meta (JSON text); None when it is not registered."""
        ...

    def move_robot(
        self, robot_id: str, group_id: str | None, now: str
    ) -> tuple[str | None, Robot] | None:
        """Put a registered robot into ``group_id`` (None: ungrouped); its group before and
        the robot as stored, or None when it is not registered.

        Raises:
            MissingReference: ``group_id`` does not exist.
        """
        ...

    def save_group(self, group_id: str, labels: GroupLabels, now: str) -> Group:
        """Insert the group (no self-improve toggle of its own) or update its ``labels``;
        ``updated`` to ``now``. The group as stored."""
        ...

    def delete_group(self, group_id: str, check: Callable[[Group], None]) -> Group | None:
        """Lock the group, hand it (with its members) to ``check`` — which raises to refuse
        — and delete it; the group as it was, or None when it does not exist. A robot
        registered into it meanwhile waits for the delete, or is among the members."""
        ...

    def set_group_self_improve(self, group_id: str, enabled: bool | None, now: str) -> bool:
        """Set a group's toggle (None: inherit); False when the group does not exist."""
        ...

    def insert_group(self, group: Group) -> Group | None:
        """Insert ``group`` exactly as given, unless its id is taken; None when inserted,
        else the group stored under that id."""
        ...

    def insert_robot(self, robot: Robot, meta: str) -> Robot | None:
        """Insert ``robot`` exactly as given (``meta`` its JSON text), unless its id is
        taken; None when inserted, else the robot stored under that id.

        Raises:
            MissingReference: its group does not exist.
        """
        ...

    def export_rows(self) -> FleetRows:
        """Every group (without members), robot and setting as stored, of one moment."""
        ...

    def import_rows(self, rows: FleetRows) -> None:
        """Write ``rows`` exactly in one transaction: groups, robots, settings (into an
        empty registry; a row already there fails them all with :class:`WriteConflict`)."""
        ...
