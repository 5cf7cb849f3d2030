"""Task trigger rules: which triggers a task keeps, which ``progress_above`` are due, identity.

Triggers are opaque dicts with a ``type`` (kit spec §3.2); the manager implements only
``progress_above`` (see :mod:`robot_mcp_kit.tasks`). The rules are functions over plain
data; the manager and the :class:`~robot_mcp_kit.tasks.TaskContext` call them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Iterator
from typing import Any, TypeGuard

from robot_mcp_kit.log import get_logger

__all__ = [
    "GENERIC_TRIGGER_TYPES",
    "accept_triggers",
    "is_number",
    "progress_triggers_due",
    "trigger_key",
]

_log = get_logger("robot_mcp_kit.tasks")

GENERIC_TRIGGER_TYPES: frozenset[str] = frozenset({"progress_above"})
"""Trigger types the manager evaluates itself; always known."""


def is_number(value: object) -> TypeGuard[float]:
    """True for a finite int or float that is not a bool."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def trigger_key(trigger: dict[str, Any]) -> str:
    """The identity of a trigger for at-most-once firing: its canonical JSON.

    A body that copies the dict (or rebuilds it) still hits the same key.
    """
    return json.dumps(trigger, sort_keys=True, default=repr)


def accept_triggers(
    task_id: str,
    triggers: list[dict[str, Any]] | None,
    known: frozenset[str] | Collection[str] | None,
) -> list[dict[str, Any]]:
    """The triggers a new task keeps: copies of the dict entries, in order.

    Entries that are not dicts are dropped; malformed ones (no string ``type``, a
    ``progress_above`` without a numeric ``percent``) and, when ``known`` is not None,
    those of an unknown type are kept but logged once at WARNING (``trigger_ignored``).
    """
    if not triggers:
        return []
    accepted: list[dict[str, Any]] = []
    for trigger in triggers:
        if not isinstance(trigger, dict):
            _log.warning(
                "trigger_ignored",
                task_id=task_id,
                trigger=trigger,
                reason="a trigger must be a dict with a 'type'",
            )
            continue
        accepted.append(dict(trigger))
        kind = trigger.get("type")
        if not isinstance(kind, str):
            _log.warning(
                "trigger_ignored",
                task_id=task_id,
                trigger=trigger,
                reason="it has no string 'type'",
            )
        elif kind == "progress_above":
            if not is_number(trigger.get("percent")):
                _log.warning(
                    "trigger_ignored",
                    task_id=task_id,
                    trigger=trigger,
                    reason="'percent' must be a number",
                )
        elif known is not None and kind not in known:
            _log.warning(
                "trigger_ignored",
                task_id=task_id,
                type=kind,
                reason="unknown type",
                known=sorted(set(known) | GENERIC_TRIGGER_TYPES),
            )
    return accepted


def progress_triggers_due(
    triggers: list[dict[str, Any]], payload: dict[str, Any]
) -> Iterator[dict[str, Any]]:
    """The ``progress_above`` triggers a progress ``payload`` reaches, in order.

    Due when ``payload["percent"]`` is a number ``>= trigger["percent"]``; none when the
    payload has no numeric ``percent``.
    """
    percent = payload.get("percent")
    if not is_number(percent):
        return
    for trigger in triggers:
        if trigger.get("type") != "progress_above":
            continue
        threshold = trigger.get("percent")
        if is_number(threshold) and percent >= threshold:
            yield trigger
