"""The three lesson tools (DESIGN §5): recall_params, record_params, list_lessons.

A lesson is a JSON object of parameters a robot learned for a skill (a grasp offset, an
LLM correction), with its success/failure counts and the place it was learned at, kept in
the robot's scope (:class:`~robot_mcp_memory.params.ScopedParams`). Recording and recalling
are gated by the self-improve toggle; listing is not. A robot-scoped connection always acts
as its own robot, whatever ``robot`` says (memory spec §6a). Handlers and :func:`register`
as in :mod:`robot_mcp_memory.tools._processes`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.fastmcp import FastMCP
from mcp.types import CallToolResult

from robot_mcp_memory._policy import acting_robot
from robot_mcp_memory.tools._runner import (
    Answer,
    ToolRunner,
    add_tool,
)

if TYPE_CHECKING:
    from robot_mcp_memory.services import Memory
    from robot_mcp_memory.tenant import Tenant

__all__ = ["list_lessons", "recall_params", "record_params", "register"]


def recall_params(
    memory: Memory, tenant: Tenant | None, *, robot: str, skill: str, place: str | None = None
) -> dict[str, Any]:
    """The ``recall_params`` tool's body (its description is the wrapper's)."""
    return memory.lessons.recall(acting_robot(tenant, robot) or robot, skill, place)


def record_params(
    memory: Memory,
    tenant: Tenant | None,
    *,
    robot: str,
    skill: str,
    params: dict[str, Any] | None = None,
    place: str | None = None,
    success: bool | None = None,
    note: str = "",
    private: bool = False,
) -> dict[str, Any]:
    """The ``record_params`` tool's body (its description is the wrapper's)."""
    return memory.lessons.record(
        acting_robot(tenant, robot) or robot,
        skill,
        params,
        place=place,
        success=success,
        note=note,
        private=private,
    )


def list_lessons(
    memory: Memory, tenant: Tenant | None, *, robot: str | None = None, skill: str | None = None
) -> dict[str, Any]:
    """The ``list_lessons`` tool's body (its description is the wrapper's)."""
    lessons = memory.lessons.list_lessons(acting_robot(tenant, robot), skill)
    return {"lessons": lessons}


def register(mcp: FastMCP, runner: ToolRunner) -> None:
    """Add the three lesson tools to ``mcp``; ``runner`` runs each call."""

    async def _recall_params(
        robot: str, skill: str, place: str | None = None
    ) -> Annotated[CallToolResult, Answer]:
        """Recall the parameters this robot learned for a skill, before performing it.

        Looks in the robot's private lessons, then its group's (or its own when ungrouped):
        a lesson learned at this place first, then a place-less one, then one from another
        place only once it has earned transfer (marked "transferred" with its origin).
        Returns JSON {"lesson": {...}|null, "scope", "match", ...}; with self-improvement
        off, {"lesson": null, "reason": "self_improve_off", "detail"}.
        """
        return await runner.run(
            "recall_params",
            recall_params,
            {"robot": robot, "skill": skill, "place": place},
            robot=robot,
            skill=skill,
            place=place,
        )

    add_tool(mcp, "recall_params", _recall_params)

    async def _record_params(
        robot: str,
        skill: str,
        params: dict[str, Any] | None = None,
        place: str | None = None,
        success: bool | None = None,
        note: str = "",
        private: bool = False,
    ) -> Annotated[CallToolResult, Answer]:
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
        return await runner.run(
            "record_params",
            record_params,
            {
                "robot": robot,
                "skill": skill,
                "params": params,
                "place": place,
                "success": success,
                "note": note,
                "private": private,
            },
            robot=robot,
            skill=skill,
            place=place,
        )

    add_tool(mcp, "record_params", _record_params)

    async def _list_lessons(
        robot: str | None = None, skill: str | None = None
    ) -> Annotated[CallToolResult, Answer]:
        """List stored lessons (not gated by self-improvement).

        Without robot: every lesson (a robot-scoped connection: its own and its group's).
        With robot: that robot's private lessons and its group's. skill narrows to one
        skill at every place. Returns JSON {"lessons": [...]}.
        """
        return await runner.run(
            "list_lessons", list_lessons, {"robot": robot, "skill": skill}, robot=robot, skill=skill
        )

    add_tool(mcp, "list_lessons", _list_lessons)
