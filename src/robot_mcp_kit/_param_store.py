"""Lessons and one scope's view of them: :class:`Lesson`, its row key, :class:`ParamStore`.

Also the contract a backend meets (:class:`ParamBackend`).

A *lesson* is a JSON object of parameters (a grasp offset, an LLM correction) plus how it
fared — success and failure counts — the place it was learned at, the robot that taught
it, and when it was created and last updated. :class:`ParamStore` is one scope's view
(``group:<G>``, ``solo:<robot>``, ``robot:<id>`` in the memory server); the backend holds
every scope.

Keys: one lesson per ``(scope, key, place)``. The row's ``key`` column is
``lesson_key(key, place)`` — ``key`` alone for a place-less lesson, ``key@place``
otherwise — so the ``(scope, key)`` primary key holds one lesson per place.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from robot_mcp_kit._exceptions import ConfigurationError
from robot_mcp_kit.models import format_ts, reliability, utc_now

__all__ = ["PLACE_SEP", "Lesson", "ParamBackend", "ParamStore", "lesson_key"]

PLACE_SEP = "@"


def lesson_key(key: str, place: str | None = None) -> str:
    """The row key of the lesson ``key`` learned at ``place`` (``key`` if place-less)."""
    return key if place is None else f"{key}{PLACE_SEP}{place}"


@dataclass(frozen=True)
class Lesson:
    """One stored lesson. ``key`` is the caller's key (e.g. a skill), without the place.

    ``note`` is the last note recorded with it (a free-text remark; None if never given).
    """

    scope: str
    key: str
    params: dict[str, Any]
    success_count: int = 0
    failure_count: int = 0
    place: str | None = None
    robot: str | None = None
    created: str = ""
    updated: str = ""
    note: str | None = None

    @property
    def reliability(self) -> float:
        """Laplace-smoothed success rate, :func:`robot_mcp_kit.reliability`; 0.5 with none."""
        return reliability(self.success_count, self.failure_count)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field plus ``reliability``."""
        return {
            "scope": self.scope,
            "key": self.key,
            "params": self.params,
            "success_count": self.success_count,
            "failure_count": self.failure_count,
            "place": self.place,
            "robot": self.robot,
            "created": self.created,
            "updated": self.updated,
            "note": self.note,
            "reliability": self.reliability,
        }


class ParamBackend(Protocol):
    """Where lessons live, for every scope. Implementations are thread-safe."""

    def get(self, scope: str, key: str, place: str | None) -> Lesson | None: ...

    def lessons(self, scope: str | None = None, key: str | None = None) -> list[Lesson]: ...

    def record(
        self,
        scope: str,
        key: str,
        *,
        params: Mapping[str, Any] | None,
        place: str | None,
        robot: str | None,
        success: bool | None,
        now: str,
        note: str | None = None,
    ) -> Lesson: ...

    def delete(self, scope: str, key: str, place: str | None) -> bool: ...

    def scopes(self) -> list[str]: ...

    def close(self) -> None: ...


class ParamStore:
    """One scope's lessons over a :class:`ParamBackend`.

    Args:
        backend: where lessons live (shared by every scope's ``ParamStore``).
        scope: this store's scope, e.g. ``group:line-3``.
    """

    def __init__(self, backend: ParamBackend, scope: str) -> None:
        if not scope:
            raise ConfigurationError("a ParamStore needs a non-empty scope")
        self.backend = backend
        self.scope = scope

    def get(self, key: str, *, place: str | None = None) -> Lesson | None:
        """The lesson ``key`` learned at ``place`` (None: the place-less one), or None."""
        return self.backend.get(self.scope, key, place)

    def lessons(self, key: str | None = None) -> list[Lesson]:
        """Every lesson in this scope, or every place's lesson for ``key``."""
        return self.backend.lessons(self.scope, key)

    def record(
        self,
        key: str,
        params: Mapping[str, Any] | None = None,
        *,
        place: str | None = None,
        robot: str | None = None,
        success: bool | None = None,
        note: str | None = None,
    ) -> Lesson:
        """Store ``params`` for ``(key, place)`` and/or count an outcome; return the lesson.

        New lesson: needs ``params``; counts start at the given outcome. Existing lesson:
        ``params`` (if given) replace the old ones, counts are kept and bumped by
        ``success``, ``robot`` and ``note`` are replaced if given (the last note is kept),
        ``created`` is kept, ``updated`` bumped.

        Raises:
            LessonNotFound: ``params`` is None and there is no such lesson (a ``KeyError``).
            InvalidLessonParams: ``params`` is not a JSON object (a ``ValueError`` and a
                ``TypeError``).
        """
        return self.backend.record(
            self.scope,
            key,
            params=params,
            place=place,
            robot=robot,
            success=success,
            now=format_ts(utc_now()),
            note=note,
        )

    def delete(self, key: str, *, place: str | None = None) -> bool:
        """Remove one lesson; True if it existed."""
        return self.backend.delete(self.scope, key, place)

    def __repr__(self) -> str:
        return f"<ParamStore scope={self.scope!r} backend={type(self.backend).__name__}>"
