"""The tool answers' errors and the §6a rules: what each tenant may see and do.

Every rule of the memory spec's §6a table is one function here, so the tools read as
"check, then act" and the table can be checked against one file:

==========================================  ===============================================
tools                                       scoped tenant (robot token)
==========================================  ===============================================
find / get / list processes                 own group + ``shared``; out of scope = absent
                                            (:func:`visible_robots`)
save_process                                pinned to itself; never a foreign or shared
                                            document (:func:`pin_document`,
                                            :func:`update_guard`)
record_outcome, delete_process              in scope only; never delete a shared document
register_robot, set_robot_meta              only itself, never into another group
                                            (:func:`require_self`)
list_robots, list_groups                    its own group only (:func:`own_group`)
set_group, upsert/delete_group,             ``forbidden`` (:func:`require_admin`)
set_self_improve, reindex
recall/record_params, list_lessons          always as its own robot (:func:`acting_robot`)
==========================================  ===============================================

An unscoped tenant (the admin token, stdio, an open server) may do everything; a ``robot``
argument on its reads narrows them to what that robot would see.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from robot_mcp_memory._exceptions import ToolFailure
from robot_mcp_memory.docmodel import ProcessDoc
from robot_mcp_memory.fleet import FleetRegistry
from robot_mcp_memory.tenancy import Tenant

__all__ = [
    "ToolFailure",
    "acting_robot",
    "check_text",
    "forbidden",
    "not_found",
    "own_group",
    "pin_document",
    "quote",
    "require_admin",
    "require_self",
    "too_large",
    "update_guard",
    "visible_robots",
]


def quote(text: str) -> str:
    """``text`` quoted for a message: repr, cut to 80 characters."""
    shown = repr(text)
    return shown if len(shown) <= 80 else shown[:77] + "..."


def forbidden(detail: str) -> ToolFailure:
    return ToolFailure("forbidden", detail)


def not_found(id: str) -> ToolFailure:
    """The answer for a process that is missing *or out of the caller's scope* (the same)."""
    return ToolFailure("not_found", f"no process with id {quote(id)}")


def too_large(field: str, size: int, limit: int) -> ToolFailure:
    """The one ``too_large`` answer: the field, the size the client sent and the limit."""
    return ToolFailure(
        "too_large",
        f"the {field} is {size} bytes; the limit is {limit} bytes",
        field=field,
        size=size,
        limit=limit,
    )


def check_text(field: str, text: str | None) -> None:
    """Refuse a lone surrogate (valid in JSON, not storable or searchable as UTF-8)."""
    if text is None:
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolFailure(
            "invalid",
            f"{field} contains a lone surrogate code point at character {exc.start}; "
            "send valid Unicode text",
            field=field,
        ) from None


def visible_robots(
    fleet: FleetRegistry, robot: str | None, tenant: Tenant | None
) -> frozenset[str] | None:
    """The ``robot`` values whose documents a call may see; None means every document.

    Shared documents are visible on top (the store adds them). A scoped tenant sees its
    group's robots' documents (its own alone when ungrouped) whatever ``robot`` says; an
    unscoped call sees everything, or what ``robot`` would see. Resolved through the
    registry on every call, so regrouping a robot changes what it sees at once.
    """
    if tenant is not None and tenant.robot is not None:
        return fleet.visible_robots(tenant.robot)
    if robot is None:
        return None
    return fleet.visible_robots(robot)


def require_admin(tenant: Tenant | None, what: str) -> None:
    """Fleet administration: refused to a scoped tenant."""
    if tenant is not None and tenant.scoped:
        raise forbidden(
            f"{what} is fleet administration; this connection is scoped to "
            f"robot {tenant.robot!r} and only the admin token may do it"
        )


def require_self(tenant: Tenant | None, robot_id: str, what: str) -> None:
    """A scoped tenant may change only its own registry entry."""
    if tenant is not None and tenant.robot is not None and robot_id != tenant.robot:
        raise forbidden(
            f"this connection is scoped to robot {tenant.robot!r}; it may not {what} "
            f"robot {quote(robot_id)}"
        )


def acting_robot(tenant: Tenant | None, robot: str | None) -> str | None:
    """Lessons act as the tenant's own robot whatever ``robot`` says; else as given."""
    if tenant is not None and tenant.robot is not None:
        return tenant.robot
    return robot


def own_group(fleet: FleetRegistry, tenant: Tenant | None) -> tuple[bool, str | None]:
    """``(scoped, group)``: for a scoped tenant, its group (None when ungrouped)."""
    if tenant is None or tenant.robot is None:
        return False, None
    return True, fleet.group_of(tenant.robot)


def pin_document(doc: ProcessDoc, tenant: Tenant) -> ProcessDoc:
    """A scoped tenant saves as itself: ``robot: unknown`` becomes its id; others refused."""
    assert tenant.robot is not None
    if doc.shared:
        raise forbidden("a scoped robot may not save a fleet-wide (shared: true) document")
    if doc.robot == "unknown":
        return doc.model_copy(update={"robot": tenant.robot})
    if doc.robot != tenant.robot:
        raise forbidden(
            f"this connection is scoped to robot {tenant.robot!r}; "
            f"it may not save a document of robot {quote(doc.robot)}"
        )
    return doc


def update_guard(
    fleet: FleetRegistry, tenant: Tenant | None
) -> Callable[[sqlite3.Row], None] | None:
    """The check a scoped save runs on the row it is about to update, inside its transaction.

    The collision rule may move a save from ``id`` to ``id-2``, ``id-3``…; whichever row is
    finally updated must be in the tenant's scope and not fleet-wide, checked on the save's
    own connection (the registry read joins the transaction), so no concurrent regroup or
    rename slips between check and write (closes the gap of decision 0004).
    """
    if tenant is None or tenant.robot is None:
        return None
    robot = tenant.robot

    def guard(row: sqlite3.Row) -> None:
        if bool(row["shared"]) or row["robot"] not in fleet.visible_robots(robot):
            raise forbidden(
                f"process {quote(str(row['id']))} belongs to another scope; choose another id"
            )

    return guard
