"""ScopedParams: the lessons (learned parameters) of the fleet, scoped by the registry.

A lesson is a JSON object of parameters for a *skill* (a grasp offset, an LLM correction),
optionally learned at a *place*, with success/failure counts and the last note. Lessons
live in the backend's :class:`~robot_mcp_kit.params.ParamBackend` (on SQLite the kit's
``MEMORY_DATA_DIR/lessons.db``, created by the first lesson actually recorded: never by a
recall or a listing, never while self-improvement is off), each read and written through
the kit's :class:`~robot_mcp_kit.params.ParamStore` (one table, scope as a column).

Scopes (memory spec "Fleet registry + group-scoped learning", DESIGN §5):

- ``robot:<id>`` — a robot's private lessons (``private=True``): never returned to any
  other robot, whatever the grouping;
- the robot's shared scope from the registry's ``resolve`` (:class:`ScopeResolver`):
  ``group:<G>`` (pooled by the group) or ``solo:<robot>`` (an ungrouped robot's own).

Recall order: ``robot:<id>`` then the shared scope; in each, the exact ``(skill, place)``
lesson, then the place-less one; then — only when a place is given — a lesson of that skill
learned at ANOTHER place in those two scopes, once it has earned transfer
(``success_count >= transfer_min_successes`` and ``reliability >=
transfer_min_reliability``), best reliability first, marked ``transferred`` with its
``origin_place``. With no place, only the place-less lesson is looked for.

Recording and recall are gated by the registry's ``resolve`` (the group's toggle, else
the global one): when off they answer with ``reason: "self_improve_off"`` and write nothing.
``list_lessons`` is not gated.

Thread-safe (the registry and the kit backend are); synchronous. Bad arguments raise
:class:`~robot_mcp_memory.fleet.FleetError` (code ``invalid``) and nothing else. See
decision 0007.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any, Protocol

from robot_mcp_kit.params import Lesson, ParamBackend, ParamStore
from robot_mcp_memory._exceptions import FleetError
from robot_mcp_memory._limits import MAX_LESSON_NOTE_BYTES
from robot_mcp_memory.fleet import Resolution
from robot_mcp_memory.fleet.validation import (
    check_bool,
    check_id,
    check_json_object,
    show,
)

__all__ = ["SKILL_PATTERN", "ScopeResolver", "ScopedParams", "lesson_from_dict"]

SKILL_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/ -]{0,99}")
"""A skill or a place, matched against the whole string (no ``@``: the kit's row key is
``skill@place``), with no trailing space."""


_OFF = "self_improve_off"


def _check_name(value: object, field: str) -> str:
    if not isinstance(value, str):
        raise FleetError(
            "invalid", f"{field} must be a string such as 'grasp', got {show(value)}", field=field
        )
    if SKILL_PATTERN.fullmatch(value) is None or value.endswith(" "):
        raise FleetError(
            "invalid",
            f"{field} {show(value)} is not valid: 1 to 100 characters, letters, digits, "
            "space, '.', '_', ':', '/' or '-', starting with a letter or a digit and not "
            "ending with a space ('@' is not allowed)",
            field=field,
        )
    return value


def _check_note(value: object) -> str | None:
    """The note on one line (whitespace collapsed), None when empty or None."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise FleetError("invalid", f"note must be a string, got {show(value)}", field="note")
    text = " ".join(value.split())
    if any(unicodedata.category(c) in ("Cc", "Cs") for c in text):
        raise FleetError(
            "invalid", f"note {show(value)} must not hold control characters", field="note"
        )
    size = len(text.encode("utf-8"))
    if size > MAX_LESSON_NOTE_BYTES:
        raise FleetError(
            "invalid",
            f"note is {size} bytes long; at most {MAX_LESSON_NOTE_BYTES} are allowed",
            field="note",
        )
    return text or None


def _private(robot: str) -> str:
    return f"robot:{robot}"


class ScopeResolver(Protocol):
    """What :class:`ScopedParams` needs of a fleet registry (both backends' registries fit)."""

    def resolve(self, robot_id: str) -> Resolution: ...


class ScopedParams:
    """The fleet's lessons, each in the scope the registry resolves for its robot.

    Args:
        fleet: the registry scopes and the self-improve gate are resolved through, on every
            call (regrouping a robot moves where its next lesson goes at once).
        lessons: where lessons live (the opened backend's
            :attr:`~robot_mcp_memory.backends.Backend.lessons`).
        transfer_min_successes, transfer_min_reliability: what a lesson learned at one
            place must have earned before it is offered at another.
    """

    def __init__(
        self,
        fleet: ScopeResolver,
        lessons: ParamBackend,
        *,
        transfer_min_successes: int = 3,
        transfer_min_reliability: float = 0.75,
    ) -> None:
        self.fleet = fleet
        self.transfer_min_successes = transfer_min_successes
        self.transfer_min_reliability = transfer_min_reliability
        self._backend = lessons

    def _store(self, scope: str) -> ParamStore:
        return ParamStore(self._backend, scope)

    def _gate(self, robot: object) -> Resolution:
        return self.fleet.resolve(check_id(robot, "robot"))

    @staticmethod
    def _off(res: Resolution) -> str:
        return (
            f"self-improvement is off for {res.robot_id} (decided by the {res.where} toggle); "
            "an operator switches it on with set_self_improve"
        )

    # --- writes -----------------------------------------------------------------------

    def record(
        self,
        robot: str,
        skill: str,
        params: dict[str, Any] | None,
        place: str | None = None,
        success: bool | None = None,
        note: str = "",
        private: bool = False,
    ) -> dict[str, Any]:
        """Record (or update) the lesson ``(skill, place)`` of ``robot`` and/or count an outcome.

        The scope is ``robot:<robot>`` when ``private``, else the robot's shared scope. New
        ``params`` replace the stored ones; ``params=None`` counts ``success`` on an
        existing lesson only. A non-empty ``note`` replaces the lesson's note.

        Returns:
            ``{"recorded": True, "scope": ..., "lesson": {...}}``, or — self-improvement
            off, nothing written — ``{"recorded": False, "reason": "self_improve_off",
            "scope": <the scope it would use>, "where": <the deciding toggle>, "detail"}``.

        Raises:
            FleetError: ``invalid`` for a bad argument, or ``params=None`` for a lesson that
                does not exist.
        """
        skill = _check_name(skill, "skill")
        if place is not None:
            place = _check_name(place, "place")
        if params is not None:
            check_json_object(params, "params")
        if success is not None:
            check_bool(success, "success")
        note_text = _check_note(note)
        check_bool(private, "private")
        res = self._gate(robot)
        scope = _private(res.robot_id) if private else res.scope
        if not res.self_improve:
            return {
                "recorded": False,
                "reason": _OFF,
                "scope": scope,
                "where": res.where,
                "detail": self._off(res),
            }
        store = self._store(scope)
        if params is None and store.get(skill, place=place) is None:
            raise self._no_lesson(scope, skill, place)
        try:
            lesson = store.record(
                skill, params, place=place, robot=res.robot_id, success=success, note=note_text
            )
        except KeyError:  # pragma: no cover - checked just above; nothing deletes lessons
            raise self._no_lesson(scope, skill, place) from None
        return {"recorded": True, "scope": scope, "lesson": lesson.to_dict()}

    @staticmethod
    def _no_lesson(scope: str, skill: str, place: str | None) -> FleetError:
        where = f" at place {place!r}" if place is not None else " (place-less)"
        return FleetError(
            "invalid",
            f"there is no lesson {skill!r}{where} in scope {scope!r} to count an outcome "
            "for; record it with params first",
            field="params",
        )

    # --- reads ------------------------------------------------------------------------

    def recall(self, robot: str, skill: str, place: str | None = None) -> dict[str, Any]:
        """The lesson ``robot`` should use for ``skill`` at ``place`` (module docstring order).

        Returns:
            ``{"lesson": {...lesson, "transferred": bool, "origin_place": str | None},
            "scope": <where it was found>, "match": "exact" | "placeless" | "transferred"}``;
            with no lesson ``{"lesson": None, "scope": None, "match": None, "reason":
            "no_lesson"}``; self-improvement off: ``reason: "self_improve_off"`` (plus
            ``where`` and ``detail``) and no lesson, the file untouched.

        Raises:
            FleetError: ``invalid`` for a bad argument.
        """
        skill = _check_name(skill, "skill")
        if place is not None:
            place = _check_name(place, "place")
        res = self._gate(robot)
        if not res.self_improve:
            return {
                "lesson": None,
                "scope": None,
                "match": None,
                "reason": _OFF,
                "where": res.where,
                "detail": self._off(res),
            }
        scopes = (_private(res.robot_id), res.scope)
        for scope in scopes:
            store = self._store(scope)
            exact = store.get(skill, place=place)
            if exact is not None:
                return _found(exact, scope, "exact")
            if place is not None:
                placeless = store.get(skill)
                if placeless is not None:
                    return _found(placeless, scope, "placeless")
        if place is not None:
            earned = [
                (rank, lesson)
                for rank, scope in enumerate(scopes)
                for lesson in self._store(scope).lessons(skill)
                if lesson.place is not None and lesson.place != place and self._earned(lesson)
            ]
            if earned:
                earned.sort(
                    key=lambda item: (
                        -item[1].reliability,
                        -item[1].success_count,
                        item[0],
                        item[1].place or "",
                    )
                )
                _, best = earned[0]
                return _found(best, best.scope, "transferred")
        return {"lesson": None, "scope": None, "match": None, "reason": "no_lesson"}

    def _earned(self, lesson: Lesson) -> bool:
        return (
            lesson.success_count >= self.transfer_min_successes
            and lesson.reliability >= self.transfer_min_reliability
        )

    def list_lessons(
        self, robot: str | None = None, skill: str | None = None
    ) -> list[dict[str, Any]]:
        """Lessons as dicts, ordered by scope then skill/place. Not gated.

        ``robot=None``: every lesson of every scope. With a robot: its ``robot:<id>``
        lessons and its shared scope's — never another robot's private ones. ``skill``
        narrows to that skill (every place).
        """
        if skill is not None:
            skill = _check_name(skill, "skill")
        if robot is None:
            lessons = self._backend.lessons(None, skill)
        else:
            res = self.fleet.resolve(check_id(robot, "robot"))
            lessons = [
                lesson
                for scope in sorted({_private(res.robot_id), res.scope})
                for lesson in self._store(scope).lessons(skill)
            ]
        return [lesson.to_dict() for lesson in lessons]

    def import_lesson(self, lesson: dict[str, Any]) -> str:
        """Put a lesson (a :meth:`list_lessons` dict) in exactly as given, for ``load``.

        Not gated (an operator's restore of what was recorded). Returns ``"inserted"``,
        ``"skipped"`` (the same lesson is there) or ``"conflict"`` (a lesson of that
        scope, skill and place differs; nothing written).

        Raises:
            FleetError: ``invalid`` when a field is missing or of the wrong type.
        """
        given = lesson_from_dict(lesson)
        stored = self._backend.get(given.scope, given.key, given.place)
        if stored is not None:
            return "skipped" if stored == given else "conflict"
        self._backend.update(given.scope, given.key, given.place, lambda _: given)
        return "inserted"

    # --- lifecycle --------------------------------------------------------------------

    @property
    def backend(self) -> ParamBackend:
        """Where the lessons live (the copy command reads and writes them whole)."""
        return self._backend

    def close(self) -> None:
        """Close the backend (the lessons file, if it was ever opened). Idempotent."""
        self._backend.close()

    def __repr__(self) -> str:
        return f"<ScopedParams {self._backend!r}>"


def lesson_from_dict(lesson: object) -> Lesson:
    """The lesson a :meth:`ScopedParams.list_lessons` dict describes, its fields checked
    (what ``load`` reads from a dump's ``lessons.json`` before writing anything).

    Raises:
        FleetError: ``invalid`` (field ``lesson``) when ``lesson`` is not an object, a
            field is missing or of the wrong type, or ``params`` is not a JSON object.
    """
    if not isinstance(lesson, dict):
        raise FleetError(
            "invalid", f"a lesson must be a JSON object, got {show(lesson)}", field="lesson"
        )
    try:
        given = Lesson(
            scope=str(lesson["scope"]),
            key=_check_name(lesson["key"], "skill"),
            params=dict(lesson["params"]),
            success_count=int(lesson["success_count"]),
            failure_count=int(lesson["failure_count"]),
            place=None if lesson["place"] is None else _check_name(lesson["place"], "place"),
            robot=lesson["robot"],
            created=str(lesson["created"]),
            updated=str(lesson["updated"]),
            note=lesson["note"],
        )
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, FleetError):
            raise
        raise FleetError(
            "invalid",
            f"a lesson must have scope, key, params, success_count, failure_count, place, "
            f"robot, created, updated and note ({type(exc).__name__} on {show(lesson)})",
            field="lesson",
        ) from None
    check_json_object(given.params, "params")
    return given


def _found(lesson: Lesson, scope: str, match: str) -> dict[str, Any]:
    transferred = match == "transferred"
    return {
        "lesson": {
            **lesson.to_dict(),
            "transferred": transferred,
            "origin_place": lesson.place if transferred else None,
        },
        "scope": scope,
        "match": match,
    }
