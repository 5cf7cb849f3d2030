"""The ports: what the tools, the policy and the services need of each stored concept.

Each port is a :class:`typing.Protocol` listing exactly the calls its callers make; the
SQLite classes are the adapters (:class:`~robot_mcp_memory.store.ProcessStore`,
:class:`~robot_mcp_memory.fleet.FleetRegistry`, :class:`~robot_mcp_memory.params.ScopedParams`),
matched structurally. Another backend (PostgreSQL) adds adapters that satisfy these and
changes only :func:`robot_mcp_memory.services.open_memory`.

Every port's methods are blocking: the tool runner calls them in a worker thread.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Collection
from typing import Any, Protocol

from robot_mcp_memory.documents import (
    Owner,
    ProcessDoc,
)
from robot_mcp_memory.fleet import (
    Group,
    Robot,
)
from robot_mcp_memory.search import Found
from robot_mcp_memory.store import (
    DocState,
    Imported,
    Merged,
    NearDuplicate,
    Revision,
    Saved,
)

__all__ = ["FleetPort", "LessonsPort", "ProcessesPort"]


class ProcessesPort(Protocol):
    """The process documents and their search index (memory spec §5's process tools).

    Revisions (issue 22): every change of a document's content (a save with other content,
    ``revert``, ``merge``, ``delete``) keeps the version it replaces, rendered to markdown
    with its counters, under the document's revision number at the time, and the row's
    revision goes up by one; a backend keeps at least the newest ``revisions_keep`` of each
    document (also after the document was deleted) and may drop older ones. A save with
    the same content and an outcome (counters, note) are not new revisions.

    Lives (decision 0029): an id freed by a delete or a merge and written again (a save, a
    load) starts a new life, numbered one past the id's highest, whose revisions start at 1;
    each kept revision carries its life and its owner then (``robot``, ``shared``). The
    latest life of an id is its row's, or, after a delete, the deleted one's.

    What each issue-22 call must do on any backend:

    - ``states(ids)``: per existing id, its revision, its last ``STALE_WINDOW`` outcomes
      (``"s"``/``"f"``, oldest first, updated with every counted outcome),
      ``last_success`` and its life; missing ids are absent.
    - ``list(..., stale=True|False)``: only the documents that are (are not) stale by
      :class:`~robot_mcp_memory.store.DocState`'s rule, in id order like the rest.
    - ``lives(id)``: the lives of ``id`` with a row or a kept revision, oldest first.
    - ``revisions(id, life=)``: the kept earlier versions of that life (None: the latest),
      newest first, also of a deleted id, each with its life and owner.
    - ``get_revision(id, n, life=)``: that version of that life (None: the latest) as it
      was (counters of then); the current one for the current number; None when not kept.
    - ``near_duplicates(id, robots=)``: stored documents within ``robots`` (as ``find``
      filters) that are near-copies of ``id``, most similar first, never ``id`` itself.
    - ``save(..., expected_revision=n)``: where the caller may update the row with this
      id, update it in place only if it is at revision ``n`` (any mission), else raise
      :class:`~robot_mcp_memory.store.RevisionConflict` with the current revision (None:
      the id does not exist; 0 asks for a new id); a row the caller may not update is
      passed over as without it. Writes nothing on a conflict.
    - ``revert(id, n, life=)``: make kept version ``n`` of that life (None: the latest)
      current as a new revision (counters kept, a merge's counts taken off again; a deleted
      id re-created in its latest life); None when not kept.
    - ``merge(keep, gone)``: in one transaction, add ``gone``'s counters to ``keep``, append
      its outcome-log lines, keep both prior versions as revisions, delete ``gone``; None
      when either is unknown.
    - ``import_document(doc, suffix=)``: store exactly as given (timestamps, counters);
      ``skipped`` when the same rendering is there, ``conflict`` (nothing written) or,
      with ``suffix``, ``suffixed`` under the save rule's next free id.
    """

    def get(self, id: str) -> ProcessDoc | None: ...

    def owner(self, id: str) -> Owner | None: ...

    def find(
        self, query: str, k: int = 3, *, robots: Collection[str] | None = None
    ) -> list[Found]: ...

    def list(
        self,
        limit: int = 50,
        offset: int = 0,
        *,
        robots: Collection[str] | None = None,
        stale: bool | None = None,
    ) -> list[ProcessDoc]: ...

    def count(self, *, robots: Collection[str] | None = None) -> int: ...

    def states(self, ids: Collection[str]) -> dict[str, DocState]: ...

    def lives(self, id: str) -> builtins.list[int]: ...

    def revisions(self, id: str, *, life: int | None = None) -> builtins.list[Revision]: ...

    def get_revision(
        self, id: str, revision: int, *, life: int | None = None
    ) -> ProcessDoc | None: ...

    def near_duplicates(
        self, id: str, *, robots: Collection[str] | None = None
    ) -> builtins.list[NearDuplicate]: ...

    def save(
        self,
        doc: ProcessDoc,
        *,
        may_update: Callable[[Owner], bool] | None = None,
        max_robot_documents: int | None = None,
        expected_revision: int | None = None,
    ) -> Saved: ...

    def revert(self, id: str, revision: int, *, life: int | None = None) -> Saved | None: ...

    def import_document(self, doc: ProcessDoc, *, suffix: bool = False) -> Imported: ...

    def merge(self, keep_id: str, merge_id: str) -> Merged | None: ...

    def record_outcome(self, id: str, success: bool, note: str = "") -> ProcessDoc | None: ...

    def delete(self, id: str) -> bool: ...

    def reindex(self) -> int: ...

    def close(self) -> None: ...


class FleetPort(Protocol):
    """The fleet registry: robots, groups and the self-improve toggles.

    ``import_group`` / ``import_robot`` (for ``load``) store the record exactly as given
    (timestamps included; a robot's group must exist) and answer ``"inserted"``,
    ``"skipped"`` (the same record is there; a group's robots aside) or ``"conflict"``
    (another record under that id; nothing written).
    """

    def visible_robots(self, robot_id: str) -> frozenset[str]: ...

    def group_of(self, robot_id: str) -> str | None: ...

    def get_robot(self, robot_id: str) -> Robot | None: ...

    def list_robots(self, group_id: str | None = None) -> list[Robot]: ...

    def get_group(self, group_id: str) -> Group | None: ...

    def list_groups(self) -> list[Group]: ...

    def global_self_improve(self) -> bool: ...

    def register_robot(
        self,
        robot_id: str,
        name: str | None = None,
        group_id: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> Robot: ...

    def set_robot_meta(self, robot_id: str, meta: dict[str, Any]) -> Robot: ...

    def set_group(self, robot_id: str, group_id: str | None) -> Robot: ...

    def upsert_group(
        self,
        group_id: str,
        name: str | None = None,
        customer: str | None = None,
        factory: str | None = None,
    ) -> Group: ...

    def delete_group(self, group_id: str) -> Group: ...

    def set_self_improve(
        self, enabled: bool | None, group_id: str | None = None
    ) -> dict[str, Any]: ...

    def import_group(self, group: Group) -> str: ...

    def import_robot(self, robot: Robot) -> str: ...


class LessonsPort(Protocol):
    """The robots' learned parameters (the wire's recall_params, record_params, list_lessons).

    ``import_lesson`` (for ``load``) stores a ``list_lessons`` dict exactly, ungated, and
    answers ``"inserted"``, ``"skipped"`` or ``"conflict"`` like the fleet's imports.
    """

    def recall(self, robot: str, skill: str, place: str | None = None) -> dict[str, Any]: ...

    def record(
        self,
        robot: str,
        skill: str,
        params: dict[str, Any] | None,
        place: str | None = None,
        success: bool | None = None,
        note: str = "",
        private: bool = False,
    ) -> dict[str, Any]: ...

    def list_lessons(
        self, robot: str | None = None, skill: str | None = None
    ) -> list[dict[str, Any]]: ...

    def import_lesson(self, lesson: dict[str, Any]) -> str: ...

    def close(self) -> None: ...
