"""The eight fleet-registry tools (DESIGN §5): robots, groups and self-improve toggles.

The registry is the fleet's one source of truth: every brain reads and writes it through
these tools, so a grouping edit from any brain is seen by all at once. A robot-scoped
connection may register and describe only itself and sees only its own group; the rest is
fleet administration, for the admin token (memory spec §6a, :mod:`.policy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp.server.fastmcp import FastMCP

from robot_mcp_memory.policy import forbidden, own_group, require_admin, require_self
from robot_mcp_memory.tenancy import Tenant

if TYPE_CHECKING:
    from robot_mcp_memory.server import Memory, Run

__all__ = ["register_fleet_tools"]


def register_fleet_tools(mcp: FastMCP, run: Run) -> None:
    """Add the eight fleet tools to ``mcp``; ``run`` executes each call's body."""

    @mcp.tool(structured_output=False)
    async def register_robot(
        robot_id: str,
        name: str | None = None,
        group_id: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> str:
        """Register a robot in the fleet registry, or update a registered one.

        Args:
            robot_id: the robot's id, e.g. "rap-1" (letters, digits, '.', '_', '-').
            name: a human name; "" clears it, omitted keeps it.
            group_id: put the robot in this existing group; omitted keeps its group.
            meta: a JSON object of facts about the robot (replaces the stored one).

        A robot-scoped connection may register only itself, and not into another group.
        Returns JSON: the robot {robot_id, group_id, name, meta, registered, updated}.
        """

        def body(memory: Memory, tenant: Tenant | None) -> dict[str, Any]:
            require_self(tenant, robot_id, "register")
            scoped, own = own_group(memory.fleet, tenant)
            if scoped and group_id is not None and group_id != own:
                raise forbidden(
                    "a robot-scoped connection may not move itself into another group; "
                    "the admin does that with set_group"
                )
            return memory.fleet.register_robot(robot_id, name, group_id, meta).to_dict()

        return await run("register_robot", body, robot_id=robot_id, group_id=group_id)

    @mcp.tool(structured_output=False)
    async def set_robot_meta(robot_id: str, meta: dict[str, Any]) -> str:
        """Replace a registered robot's meta (a JSON object of facts about it).

        A robot-scoped connection may change only its own. Returns JSON: the robot.
        """

        def body(memory: Memory, tenant: Tenant | None) -> dict[str, Any]:
            require_self(tenant, robot_id, "change the meta of")
            return memory.fleet.set_robot_meta(robot_id, meta).to_dict()

        return await run("set_robot_meta", body, robot_id=robot_id)

    @mcp.tool(structured_output=False)
    async def list_robots() -> str:
        """List the registered robots (a robot-scoped connection: its own group's only).

        Returns JSON {"robots": [{robot_id, group_id, name, meta, registered, updated}]}.
        """

        def body(memory: Memory, tenant: Tenant | None) -> dict[str, Any]:
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

        return await run("list_robots", body)

    @mcp.tool(structured_output=False)
    async def list_groups() -> str:
        """List the groups with their robots and self-improve toggles (a robot-scoped
        connection: its own group only).

        Returns JSON {"groups": [{group_id, name, customer, factory, self_improve, robots,
        created, updated}], "global_self_improve": bool}; a group's self_improve null means
        it follows the global toggle.
        """

        def body(memory: Memory, tenant: Tenant | None) -> dict[str, Any]:
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

        return await run("list_groups", body)

    @mcp.tool(structured_output=False)
    async def set_group(robot_id: str, group_id: str | None = None) -> str:
        """Move a registered robot into a group, or ungroup it (group_id null). Admin only.

        The robot's documents and lessons then belong to that group's scope, at once.
        Returns JSON: the robot.
        """

        def body(memory: Memory, tenant: Tenant | None) -> dict[str, Any]:
            require_admin(tenant, "set_group")
            return memory.fleet.set_group(robot_id, group_id).to_dict()

        return await run("set_group", body, robot_id=robot_id, group_id=group_id)

    @mcp.tool(structured_output=False)
    async def upsert_group(
        group_id: str,
        name: str | None = None,
        customer: str | None = None,
        factory: str | None = None,
    ) -> str:
        """Create a group or update its name / customer / factory tags. Admin only.

        An omitted field is kept; "" clears it. Returns JSON: the group.
        """

        def body(memory: Memory, tenant: Tenant | None) -> dict[str, Any]:
            require_admin(tenant, "upsert_group")
            return memory.fleet.upsert_group(group_id, name, customer, factory).to_dict()

        return await run("upsert_group", body, group_id=group_id)

    @mcp.tool(structured_output=False)
    async def delete_group(group_id: str) -> str:
        """Delete an empty group. Admin only.

        A group that still has robots is refused with "conflict" naming them: move them
        with set_group first. Returns JSON {"deleted": group_id}.
        """

        def body(memory: Memory, tenant: Tenant | None) -> dict[str, Any]:
            require_admin(tenant, "delete_group")
            memory.fleet.delete_group(group_id)
            return {"deleted": group_id}

        return await run("delete_group", body, group_id=group_id)

    @mcp.tool(structured_output=False)
    async def set_self_improve(enabled: bool | None, group_id: str | None = None) -> str:
        """Switch self-improvement (recording and recalling lessons) on or off. Admin only.

        Without group_id: the global toggle, which ungrouped robots and groups without
        their own toggle follow. With group_id: that group's toggle; enabled null returns
        the group to following the global one. Off until an operator switches it on.
        Returns JSON {"group_id", "self_improve"}.
        """

        def body(memory: Memory, tenant: Tenant | None) -> dict[str, Any]:
            require_admin(tenant, "set_self_improve")
            return memory.fleet.set_self_improve(enabled, group_id)

        return await run("set_self_improve", body, group_id=group_id, enabled=enabled)
