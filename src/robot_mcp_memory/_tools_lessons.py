"""The three lesson tools (DESIGN §5): recall_params, record_params, list_lessons.

A lesson is a JSON object of parameters a robot learned for a skill (a grasp offset, an
LLM correction), with its success/failure counts and the place it was learned at, kept in
the robot's scope (:class:`~robot_mcp_memory.params.ScopedParams`). Recording and recalling
are gated by the self-improve toggle; listing is not. A robot-scoped connection always acts
as its own robot, whatever ``robot`` says (memory spec §6a).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp.server.fastmcp import FastMCP

from robot_mcp_memory.policy import acting_robot
from robot_mcp_memory.tenancy import Tenant

if TYPE_CHECKING:
    from robot_mcp_memory.server import Memory, Run

__all__ = ["register_lesson_tools"]


def register_lesson_tools(mcp: FastMCP, run: Run) -> None:
    """Add the three lesson tools to ``mcp``; ``run`` executes each call's body."""

    @mcp.tool(structured_output=False)
    async def recall_params(robot: str, skill: str, place: str | None = None) -> str:
        """Recall the parameters this robot learned for a skill, before performing it.

        Looks in the robot's private lessons, then its group's (or its own when ungrouped):
        a lesson learned at this place first, then a place-less one, then one from another
        place only once it has earned transfer (marked "transferred" with its origin).
        Returns JSON {"lesson": {...}|null, "scope", "match", ...}; with self-improvement
        off, {"lesson": null, "reason": "self_improve_off", "detail"}.
        """

        def body(memory: Memory, tenant: Tenant | None) -> dict[str, Any]:
            return memory.lessons.recall(acting_robot(tenant, robot) or robot, skill, place)

        return await run("recall_params", body, robot=robot, skill=skill, place=place)

    @mcp.tool(structured_output=False)
    async def record_params(
        robot: str,
        skill: str,
        params: dict[str, Any] | None = None,
        place: str | None = None,
        success: bool | None = None,
        note: str = "",
        private: bool = False,
    ) -> str:
        """Record what a robot learned for a skill (and/or how the last attempt went).

        Args:
            robot: the robot that learned it.
            skill: the skill, e.g. "grasp.mug".
            params: a JSON object of parameters; omit it to only count an outcome.
            place: where it was learned; lessons stay at their place until they earn
                transfer.
            success: the outcome of the attempt that used it, if known.
            note: a short note kept with the lesson.
            private: keep it in the robot's private scope (never shared with its group).

        Returns JSON {"recorded": true, "scope", "lesson"}; with self-improvement off,
        {"recorded": false, "reason": "self_improve_off", "detail"} and nothing is stored.
        """

        def body(memory: Memory, tenant: Tenant | None) -> dict[str, Any]:
            return memory.lessons.record(
                acting_robot(tenant, robot) or robot,
                skill,
                params,
                place=place,
                success=success,
                note=note,
                private=private,
            )

        return await run("record_params", body, robot=robot, skill=skill, place=place)

    @mcp.tool(structured_output=False)
    async def list_lessons(robot: str | None = None, skill: str | None = None) -> str:
        """List stored lessons (not gated by self-improvement).

        Without robot: every lesson (a robot-scoped connection: its own and its group's).
        With robot: that robot's private lessons and its group's. skill narrows to one
        skill at every place. Returns JSON {"lessons": [...]}.
        """

        def body(memory: Memory, tenant: Tenant | None) -> dict[str, Any]:
            lessons = memory.lessons.list_lessons(acting_robot(tenant, robot), skill)
            return {"lessons": lessons}

        return await run("list_lessons", body, robot=robot, skill=skill)
