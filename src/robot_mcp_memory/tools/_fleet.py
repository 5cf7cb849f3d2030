"""The eight fleet-registry tools (DESIGN §5): robots, groups and self-improve toggles.

The registry is the fleet's one source of truth: every brain reads and writes it through
these tools, so a grouping edit from any brain is seen by all at once. A robot-scoped
connection may register and describe only itself and sees only its own group; the rest is
fleet administration, for the admin token (memory spec §6a, :mod:`robot_mcp_memory._policy`).
Handlers and :func:`register` as in :mod:`robot_mcp_memory.tools._processes`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.fastmcp import FastMCP
from mcp.types import CallToolResult

from robot_mcp_memory._exceptions import ToolFailure
from robot_mcp_memory._policy import (
    own_group,
    require_admin,
    require_self,
)
from robot_mcp_memory.tools._runner import (
    Answer,
    ToolRunner,
    add_tool,
)

if TYPE_CHECKING:
    from robot_mcp_memory.services import Memory
    from robot_mcp_memory.tenant import Tenant

__all__ = [
    "ADMIN_TOOLS",
    "delete_group",
    "list_groups",
    "list_robots",
    "register",
    "register_robot",
    "set_group",
    "set_robot_meta",
    "set_self_improve",
    "upsert_group",
]

ADMIN_TOOLS = frozenset({"set_group", "upsert_group", "delete_group", "set_self_improve"})
"""The fleet tools a scoped (robot) connection can never call."""


def register_robot(
    memory: Memory,
    tenant: Tenant | None,
    *,
    robot_id: str,
    name: str | None = None,
    group_id: str | None = None,
    meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``register_robot`` tool's body (its description is the wrapper's)."""
    require_self(tenant, robot_id, "register")
    scoped, own = own_group(memory.fleet, tenant)
    if scoped and group_id is not None and group_id != own:
        raise ToolFailure.forbidden(
            "a robot-scoped connection may not move itself into another group; "
            "the admin does that with set_group"
        )
    return memory.fleet.register_robot(robot_id, name, group_id, meta).to_dict()


def set_robot_meta(
    memory: Memory, tenant: Tenant | None, *, robot_id: str, meta: dict[str, Any]
) -> dict[str, Any]:
    """The ``set_robot_meta`` tool's body (its description is the wrapper's)."""
    require_self(tenant, robot_id, "change the meta of")
    return memory.fleet.set_robot_meta(robot_id, meta).to_dict()


def list_robots(memory: Memory, tenant: Tenant | None) -> dict[str, Any]:
    """The ``list_robots`` tool's body (its description is the wrapper's)."""
    scoped, group = own_group(memory.fleet, tenant)
    if not scoped:
        robots = memory.fleet.list_robots()
    elif group is not None:
        robots = memory.fleet.list_robots(group)
    else:  # an ungrouped robot sees itself
        assert tenant is not None
        assert tenant.robot is not None
        own = memory.fleet.get_robot(tenant.robot)
        robots = [own] if own is not None else []
    return {"robots": [robot.to_dict() for robot in robots]}


def list_groups(memory: Memory, tenant: Tenant | None) -> dict[str, Any]:
    """The ``list_groups`` tool's body (its description is the wrapper's)."""
    scoped, group = own_group(memory.fleet, tenant)
    if not scoped:
        groups = memory.fleet.list_groups()
    else:
        found = memory.fleet.get_group(group) if group is not None else None
        groups = [found] if found is not None else []
    return {
        "groups": [g.to_dict() for g in groups],
        "global_self_improve": memory.fleet.global_self_improve(),
    }


def set_group(
    memory: Memory, tenant: Tenant | None, *, robot_id: str, group_id: str | None = None
) -> dict[str, Any]:
    """The ``set_group`` tool's body (its description is the wrapper's)."""
    require_admin(tenant, "set_group")
    return memory.fleet.set_group(robot_id, group_id).to_dict()


def upsert_group(
    memory: Memory,
    tenant: Tenant | None,
    *,
    group_id: str,
    name: str | None = None,
    customer: str | None = None,
    factory: str | None = None,
) -> dict[str, Any]:
    """The ``upsert_group`` tool's body (its description is the wrapper's)."""
    require_admin(tenant, "upsert_group")
    return memory.fleet.upsert_group(group_id, name, customer, factory).to_dict()


def delete_group(memory: Memory, tenant: Tenant | None, *, group_id: str) -> dict[str, Any]:
    """The ``delete_group`` tool's body (its description is the wrapper's)."""
    require_admin(tenant, "delete_group")
    memory.fleet.delete_group(group_id)
    return {"deleted": group_id}


def set_self_improve(
    memory: Memory, tenant: Tenant | None, *, enabled: bool | None, group_id: str | None = None
) -> dict[str, Any]:
    """The ``set_self_improve`` tool's body (its description is the wrapper's)."""
    require_admin(tenant, "set_self_improve")
    return memory.fleet.set_self_improve(enabled, group_id)


def register(mcp: FastMCP, runner: ToolRunner) -> None:
    """Add the eight fleet tools to ``mcp``; ``runner`` runs each call."""

    async def _register_robot(
        robot_id: str,
        name: str | None = None,
        group_id: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> Annotated[CallToolResult, Answer]:
        """Register a robot in the fleet registry, or update a registered one.

        Args:
            robot_id: the robot's id, e.g. "rap-1" (letters, digits, '.', '_', '-').
            name: a human name; "" clears it, omitted keeps it.
            group_id: put the robot in this existing group; omitted keeps its group.
            meta: a JSON object of facts about the robot (replaces the stored one).

        A robot-scoped connection may register only itself, and not into another group.
        Returns JSON: the robot {robot_id, group_id, name, meta, registered, updated}.
        """
        return await runner.run(
            "register_robot",
            register_robot,
            {"robot_id": robot_id, "name": name, "group_id": group_id, "meta": meta},
            robot_id=robot_id,
            group_id=group_id,
        )

    add_tool(mcp, "register_robot", _register_robot)

    async def _set_robot_meta(
        robot_id: str, meta: dict[str, Any]
    ) -> Annotated[CallToolResult, Answer]:
        """Replace a registered robot's meta (a JSON object of facts about it).

        A robot-scoped connection may change only its own. Returns JSON: the robot.
        """
        return await runner.run(
            "set_robot_meta",
            set_robot_meta,
            {"robot_id": robot_id, "meta": meta},
            robot_id=robot_id,
        )

    add_tool(mcp, "set_robot_meta", _set_robot_meta)

    async def _list_robots() -> Annotated[CallToolResult, Answer]:
        """List the registered robots (a robot-scoped connection: its own group's only).

        Returns JSON {"robots": [{robot_id, group_id, name, meta, registered, updated}]}.
        """
        return await runner.run("list_robots", list_robots, {})

    add_tool(mcp, "list_robots", _list_robots)

    async def _list_groups() -> Annotated[CallToolResult, Answer]:
        """List the groups with their robots and self-improve toggles (a robot-scoped
        connection: its own group only).

        Returns JSON {"groups": [{group_id, name, customer, factory, self_improve, robots,
        created, updated}], "global_self_improve": bool}; a group's self_improve null means
        it follows the global toggle.
        """
        return await runner.run("list_groups", list_groups, {})

    add_tool(mcp, "list_groups", _list_groups)

    async def _set_group(
        robot_id: str, group_id: str | None = None
    ) -> Annotated[CallToolResult, Answer]:
        """Move a registered robot into a group, or ungroup it (group_id null). Admin only.

        The robot's documents and lessons then belong to that group's scope, at once.
        Returns JSON: the robot.
        """
        return await runner.run(
            "set_group",
            set_group,
            {"robot_id": robot_id, "group_id": group_id},
            robot_id=robot_id,
            group_id=group_id,
        )

    add_tool(mcp, "set_group", _set_group)

    async def _upsert_group(
        group_id: str,
        name: str | None = None,
        customer: str | None = None,
        factory: str | None = None,
    ) -> Annotated[CallToolResult, Answer]:
        """Create a group or update its name / customer / factory tags. Admin only.

        An omitted field is kept; "" clears it. Returns JSON: the group.
        """
        return await runner.run(
            "upsert_group",
            upsert_group,
            {"group_id": group_id, "name": name, "customer": customer, "factory": factory},
            group_id=group_id,
        )

    add_tool(mcp, "upsert_group", _upsert_group)

    async def _delete_group(group_id: str) -> Annotated[CallToolResult, Answer]:
        """Delete an empty group. Admin only.

        A group that still has robots is refused with "conflict" naming them: move them
        with set_group first. Returns JSON {"deleted": group_id}.
        """
        return await runner.run(
            "delete_group", delete_group, {"group_id": group_id}, group_id=group_id
        )

    add_tool(mcp, "delete_group", _delete_group)

    async def _set_self_improve(
        enabled: bool | None, group_id: str | None = None
    ) -> Annotated[CallToolResult, Answer]:
        """Switch self-improvement (recording and recalling lessons) on or off. Admin only.

        Without group_id: the global toggle, which ungrouped robots and groups without
        their own toggle follow. With group_id: that group's toggle; enabled null returns
        the group to following the global one. Off until an operator switches it on.
        Returns JSON {"group_id", "self_improve"}.
        """
        return await runner.run(
            "set_self_improve",
            set_self_improve,
            {"enabled": enabled, "group_id": group_id},
            group_id=group_id,
            enabled=enabled,
        )

    add_tool(mcp, "set_self_improve", _set_self_improve)
