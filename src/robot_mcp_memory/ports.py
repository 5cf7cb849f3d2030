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

    def revisions(self, id: str) -> builtins.list[Revision]: ...

    def get_revision(self, id: str, revision: int) -> ProcessDoc | None: ...

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

    def revert(self, id: str, revision: int) -> Saved | None: ...

    def import_document(self, doc: ProcessDoc, *, suffix: bool = False) -> Imported: ...

    def merge(self, keep_id: str, merge_id: str) -> Merged | None: ...

    def record_outcome(self, id: str, success: bool, note: str = "") -> ProcessDoc | None: ...

    def delete(self, id: str) -> bool: ...

    def reindex(self) -> int: ...

    def close(self) -> None: ...


class FleetPort(Protocol):
    """The fleet registry: robots, groups and the self-improve toggles."""

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
    """The robots' learned parameters (the wire's recall_params, record_params, list_lessons)."""

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
