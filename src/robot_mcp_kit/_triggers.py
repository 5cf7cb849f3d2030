"""Task triggers: the types the manager evaluates itself, and a trigger's identity.

Triggers are opaque dicts with a ``type`` (kit spec §3.2); the manager implements only
``progress_above`` (see :mod:`robot_mcp_kit.tasks`).
"""

from __future__ import annotations

import json
import math
from typing import Any, TypeGuard

__all__ = ["GENERIC_TRIGGER_TYPES"]

GENERIC_TRIGGER_TYPES: frozenset[str] = frozenset({"progress_above"})
"""Trigger types the manager evaluates itself; always known."""


def _is_number(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _trigger_key(trigger: dict[str, Any]) -> str:
    # Identity of a trigger for at-most-once: its canonical JSON, so a body that copies the
    # dict (or rebuilds it) still hits the same key.
    return json.dumps(trigger, sort_keys=True, default=repr)
