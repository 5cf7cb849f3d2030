"""The §6a rules: what each tenant may see and do.

Every rule of the memory spec's §6a table is one function here, so the tools read as
"check, then act" and the table can be checked against one file:

==========================================  ===============================================
tools                                       scoped tenant (robot token)
==========================================  ===============================================
find / get / list processes                 own group + ``shared``; out of scope = absent
                                            (:func:`visible_robots`)
get_process revisions                       the current life of a document it may read,
                                            each revision by the owner it had
                                            (:func:`may_read_revision`); an earlier life
                                            of the id is the admin's (:func:`require_admin`)
save_process                                pinned to itself; never a shared document
                                            (:func:`pin_document`); updates only in its
                                            scope, else the id is suffixed
                                            (:func:`updatable`); a bounded number of
                                            documents per robot
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
    "may_read_revision",
    "own_group",
    "pin_document",
    "require_admin",
    "require_self",
    "updatable",
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


def may_read_revision(visible: frozenset[str] | None, robot: str | None, shared: bool) -> bool:
    """Whether a call may read a kept revision whose own frontmatter said ``robot`` and
    ``shared``: the visibility rule of a document, applied to the owner the revision had,
    not the current document's (a document that changed hands, or a robot regrouped since,
    does not hand its earlier versions to the new readers). ``visible`` is the call's
    :func:`visible_robots` (None: every document, the admin), read from the registry once
    per call. ``robot`` None (an owner not known) is the admin's only (decision 0029).
    """
    if visible is None:
        return True
    if robot is None:
        return False
    return shared or robot in visible


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


def updatable(fleet: FleetPort, tenant: Tenant | None) -> Callable[[Owner], bool] | None:
    """Which existing documents a scoped save may update; None (any) for an unscoped one.

    Asked inside the save's transaction about each row the collision rule meets (the
    registry read joins the transaction, so no concurrent regroup slips between check and
    write, decision 0004). A row outside the tenant's scope, or fleet-wide, is passed over
    like another mission's: the save goes to a suffixed id, and the answer says no more
    than that the id was taken (decision 0022) — never ``forbidden``, which would let a
    robot test guesses of other groups' ids and mission ids.
    """
    if tenant is None or tenant.robot is None:
        return None
    robot = tenant.robot

    def may_update(owner: Owner) -> bool:
        return not owner.shared and owner.robot in fleet.visible_robots(robot)

    return may_update


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
