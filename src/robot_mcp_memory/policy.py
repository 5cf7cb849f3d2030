"""The §6a rules: what each tenant may see and do.

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
record_outcome, delete_process              in scope only; never delete a shared document;
                                            no outcome note on a shared document (the
                                            outcome still counts; :func:`may_add_note`)
register_robot, set_robot_meta              only itself, never into another group
                                            (:func:`require_self`)
list_robots, list_groups                    its own group only (:func:`own_group`)
set_group, upsert/delete_group,             ``forbidden`` (:func:`require_admin`)
set_self_improve, reindex
recall/record_params, list_lessons          always as its own robot (:func:`acting_robot`)
==========================================  ===============================================

An unscoped tenant (the admin token, stdio, an open server) may do everything; a ``robot``
argument on its reads narrows them to what that robot would see.

The rules speak domain types — :class:`~robot_mcp_memory.tenant.Tenant`, the registry port
(:class:`~robot_mcp_memory.ports.FleetPort`), :class:`~robot_mcp_memory.documents.Owner`,
:class:`~robot_mcp_memory.documents.ProcessDoc` — and refuse by raising
:class:`~robot_mcp_memory.ToolFailure`; how a refusal becomes an answer is
:func:`robot_mcp_memory.tools.answer_for`'s.
"""

from __future__ import annotations

from collections.abc import Callable

from robot_mcp_memory._exceptions import (
    ToolFailure,
    quote,
)
from robot_mcp_memory.documents import (
    Owner,
    ProcessDoc,
)
from robot_mcp_memory.ports import (
    FleetPort,
    ProcessesPort,
)
from robot_mcp_memory.tenant import Tenant

__all__ = [
    "acting_robot",
    "check_text",
    "may_add_note",
    "own_group",
    "pin_document",
    "require_admin",
    "require_self",
    "update_guard",
    "visible_owner",
    "visible_robots",
]


def check_text(field: str, text: str | None) -> None:
    """Refuse a lone surrogate (valid in JSON, not storable or searchable as UTF-8)."""
    if text is None:
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolFailure.invalid(
            field,
            f"{field} contains a lone surrogate code point at character {exc.start}; "
            "send valid Unicode text",
        ) from None


def visible_robots(
    fleet: FleetPort, robot: str | None, tenant: Tenant | None
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
        raise ToolFailure.forbidden(
            f"{what} is fleet administration; this connection is scoped to "
            f"robot {tenant.robot!r} and only the admin token may do it"
        )


def require_self(tenant: Tenant | None, robot_id: str, what: str) -> None:
    """A scoped tenant may change only its own registry entry."""
    if tenant is not None and tenant.robot is not None and robot_id != tenant.robot:
        raise ToolFailure.forbidden(
            f"this connection is scoped to robot {tenant.robot!r}; it may not {what} "
            f"robot {quote(robot_id)}"
        )


def acting_robot(tenant: Tenant | None, robot: str | None) -> str | None:
    """Lessons act as the tenant's own robot whatever ``robot`` says; else as given."""
    if tenant is not None and tenant.robot is not None:
        return tenant.robot
    return robot


def own_group(fleet: FleetPort, tenant: Tenant | None) -> tuple[bool, str | None]:
    """``(scoped, group)``: for a scoped tenant, its group (None when ungrouped)."""
    if tenant is None or tenant.robot is None:
        return False, None
    return True, fleet.group_of(tenant.robot)


def may_add_note(tenant: Tenant | None, owner: Owner) -> bool:
    """Whether ``record_outcome``'s note may go into the text of ``owner``'s document.

    A fleet-wide (``shared``) document is read by every group, so a note appended to it
    would let one robot write into every other group's missions; only an unscoped caller
    (the admin) adds notes there. A scoped robot's outcome still counts (the counters are
    what reliability learns from); its note is left out and the answer says so.
    """
    return tenant is None or not tenant.scoped or not owner.shared


def pin_document(doc: ProcessDoc, tenant: Tenant) -> ProcessDoc:
    """A scoped tenant saves as itself: ``robot: unknown`` becomes its id; others refused."""
    assert tenant.robot is not None
    if doc.shared:
        raise ToolFailure.forbidden(
            "a scoped robot may not save a fleet-wide (shared: true) document"
        )
    if doc.robot == "unknown":
        return doc.model_copy(update={"robot": tenant.robot})
    if doc.robot != tenant.robot:
        raise ToolFailure.forbidden(
            f"this connection is scoped to robot {tenant.robot!r}; "
            f"it may not save a document of robot {quote(doc.robot)}"
        )
    return doc


def update_guard(fleet: FleetPort, tenant: Tenant | None) -> Callable[[Owner], None] | None:
    """The check a scoped save runs on the document it is about to update, inside its
    transaction.

    The collision rule may move a save from ``id`` to ``id-2``, ``id-3``…; whichever
    document is finally updated must be in the tenant's scope and not fleet-wide, checked on
    the save's own connection (the registry read joins the transaction), so no concurrent
    regroup or rename slips between check and write (decision 0004).
    """
    if tenant is None or tenant.robot is None:
        return None
    robot = tenant.robot

    def guard(owner: Owner) -> None:
        if owner.shared or owner.robot not in fleet.visible_robots(robot):
            raise ToolFailure.forbidden(
                f"process {quote(owner.id)} belongs to another scope; choose another id"
            )

    return guard


def visible_owner(
    processes: ProcessesPort, fleet: FleetPort, id: str, tenant: Tenant | None
) -> Owner:
    """Who owns ``id`` if it exists and ``tenant`` may see it; out of scope reads as absent
    (``not_found``, the same answer as a missing process)."""
    check_text("id", id)
    owner = processes.owner(id)
    if owner is None:
        raise ToolFailure.not_found(id)
    robots = visible_robots(fleet, None, tenant)
    if robots is not None and not owner.shared and owner.robot not in robots:
        raise ToolFailure.not_found(id)
    return owner
