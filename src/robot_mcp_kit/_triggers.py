"""Task triggers: their declared fields, which a task keeps, which ``progress_above`` are due.

Triggers are dicts with a ``type`` (``docs/contract.md`` §8). A server declares the types
it implements (``known_trigger_types``); the kit checks, when a task starts, that each
trigger is an object with a string ``type`` and that one of a known type carries the fields
its :class:`TriggerType` declares (:func:`check_triggers`), and refuses the start with
:class:`~robot_mcp_kit.InvalidTrigger` otherwise: a body can read ``t["seconds"]`` of an
``eta_below`` without a guard. A task takes at most :data:`MAX_TRIGGERS` triggers, of at
most :data:`MAX_TRIGGERS_JSON_BYTES` together. A type the server does not know is kept,
logged once at WARNING and never fired (:func:`accept_triggers`). The manager evaluates
only ``progress_above`` itself (:func:`progress_triggers_due`).

::

    runtime = TaskRuntime(
        "navigation",
        known_trigger_types=[
            "eta_below",                                   # the contract's, as documented
            TriggerType("dock_free", {"bay": TextField(), "within_s": NumberField(gt=0)}),
        ],
    )
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, TypeGuard

from robot_mcp_kit._exceptions import ConfigurationError, InvalidTrigger
from robot_mcp_kit.log import get_logger

__all__ = [
    "CONTRACT_TRIGGER_TYPES",
    "GENERIC_TRIGGER_TYPES",
    "MAX_TRIGGERS",
    "MAX_TRIGGERS_JSON_BYTES",
    "NumberField",
    "TextField",
    "TriggerField",
    "TriggerRules",
    "TriggerType",
    "accept_triggers",
    "check_triggers",
    "is_number",
    "progress_triggers_due",
    "trigger_key",
    "trigger_rules",
]

_log = get_logger("robot_mcp_kit.tasks")

GENERIC_TRIGGER_TYPES: frozenset[str] = frozenset({"progress_above"})
"""Trigger types the manager evaluates itself; always known."""


MAX_TRIGGERS: Final = 32
"""The most triggers one task takes. A task watches a few conditions; one trigger with
``"repeat": true`` fires each time its condition holds. The bound keeps what one start
can cost small: every progress call evaluates the task's ``progress_above`` triggers (each
due one is an event), and the ``TaskInfo`` carrying them is in every ``get_task`` and
``list_tasks`` answer and every journal write of the task."""

MAX_TRIGGERS_JSON_BYTES: Final = 8 * 1024
"""The most bytes a task's triggers take together as compact JSON (UTF-8): 256 per trigger
at :data:`MAX_TRIGGERS`, where a documented one takes under 60."""

_DOUBLE_MAX: Final = sys.float_info.max


def is_number(value: object) -> TypeGuard[float]:
    """True for a finite number that is not a bool: a float that is not NaN or infinite,
    or an int within a double's range (±1.8e308, what a JSON number is to most readers).

    An int is compared as it is, never converted (a huge one would overflow a float).
    """
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return -_DOUBLE_MAX <= value <= _DOUBLE_MAX
    return isinstance(value, float) and math.isfinite(value)


_REPEAT = "repeat"
"""The field every trigger may carry (``"repeat": true``: fire each time the condition
holds), checked for every type whose fields are checked."""


def _shown(value: object) -> str:
    """``value`` as the planner sent it (JSON, at most 40 characters) and what it is."""
    kinds = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    if value is None:
        return "null"
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if type(value) is int and not -_DOUBLE_MAX <= value <= _DOUBLE_MAX:
        return "an integer beyond ±1.8e308 (no JSON reader holds it as a number)"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    text = json.dumps(value, ensure_ascii=False, default=repr)
    text = text if len(text) <= 40 else text[:37] + "..."
    kind = kinds.get(type(value))
    return text if kind is None else f"{text} ({kind})"


@dataclass(frozen=True)
class NumberField:
    """A trigger field that holds a finite number (an int or a float, never a bool).

    ``gt`` / ``ge`` / ``lt`` / ``le`` bound it (exclusive / inclusive); ``integer`` asks for
    a whole number; ``required=False`` lets the trigger leave it out.
    """

    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    le: float | None = None
    integer: bool = False
    required: bool = True

    def expects(self) -> str:
        """What a valid value is, for a message: ``a finite number > 0``."""
        bounds = [
            f"{word} {limit:g}"
            for word, limit in ((">", self.gt), (">=", self.ge), ("<", self.lt), ("<=", self.le))
            if limit is not None
        ]
        what = "a whole number" if self.integer else "a finite number"
        return " and ".join([f"{what} {bounds[0]}", *bounds[1:]]) if bounds else what

    def accepts(self, value: object) -> bool:
        """True when ``value`` is such a number, within the bounds."""
        if not is_number(value):
            return False
        if self.integer and not (isinstance(value, int) or value.is_integer()):
            return False
        return not (
            (self.gt is not None and not value > self.gt)
            or (self.ge is not None and not value >= self.ge)
            or (self.lt is not None and not value < self.lt)
            or (self.le is not None and not value <= self.le)
        )


@dataclass(frozen=True)
class TextField:
    """A trigger field that holds a string of ``min_length`` (default 1) to ``max_length``
    characters, or one of ``choices`` when given; ``required=False`` lets it be left out."""

    min_length: int = 1
    max_length: int | None = None
    choices: tuple[str, ...] | None = None
    required: bool = True

    def expects(self) -> str:
        """What a valid value is, for a message: ``a non-empty string``."""
        if self.choices is not None:
            return "one of " + ", ".join(json.dumps(c) for c in self.choices)
        if self.max_length is not None:
            return f"a string of {self.min_length} to {self.max_length} characters"
        return (
            "a non-empty string"
            if self.min_length == 1
            else (f"a string of at least {self.min_length} characters")
        )

    def accepts(self, value: object) -> bool:
        """True when ``value`` is such a string."""
        if not isinstance(value, str):
            return False
        if self.choices is not None:
            return value in self.choices
        return len(value) >= self.min_length and (
            self.max_length is None or len(value) <= self.max_length
        )


TriggerField = NumberField | TextField
"""What a :class:`TriggerType` declares of one of its fields."""


@dataclass(frozen=True)
class TriggerType:
    """A trigger type a server implements, with the fields a trigger of it must carry.

    Given in ``known_trigger_types`` (of :class:`~robot_mcp_kit.TaskRuntime`,
    :class:`~robot_mcp_kit.TaskManager` or one ``start``), it makes ``name`` known and has
    the kit refuse, when the task starts, a trigger of it whose fields are not as declared
    (:class:`~robot_mcp_kit.InvalidTrigger`). Fields it does not declare pass as they are;
    ``repeat``, when present, must be true or false.

    Raises:
        ConfigurationError: ``name`` is empty, or a field is called ``type`` or ``repeat``
            (the contract's own), or is not a :data:`TriggerField`.
    """

    name: str
    fields: Mapping[str, TriggerField] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigurationError(f"A trigger type needs a non-empty name, got {self.name!r}.")
        for key, rule in self.fields.items():
            if key in ("type", _REPEAT):
                raise ConfigurationError(
                    f"Trigger type {self.name!r} declares {key!r}, a field every trigger has."
                )
            if not isinstance(rule, NumberField | TextField):
                raise ConfigurationError(
                    f"Trigger type {self.name!r}: field {key!r} must be a NumberField or a "
                    f"TextField, got {type(rule).__name__}."
                )
        object.__setattr__(self, "fields", MappingProxyType(dict(self.fields)))

    def __hash__(self) -> int:
        return hash((self.name, tuple(self.fields.items())))

    def problem(self, trigger: Mapping[str, Any]) -> tuple[str, str] | None:
        """``(field, what is wrong)`` for the first field of ``trigger`` that is not as
        declared (in declaration order, then ``repeat``), or None when all are."""
        for key, rule in self.fields.items():
            if key not in trigger:
                if rule.required:
                    return key, f"is missing; it must be {rule.expects()}"
                continue
            value = trigger[key]
            if not rule.accepts(value):
                shown = _shown(value)
                if value is None and isinstance(rule, NumberField):
                    shown += " (JSON carries NaN and infinity as null)"
                return key, f"must be {rule.expects()}, got {shown}"
        if _REPEAT in trigger and not isinstance(trigger[_REPEAT], bool):
            return _REPEAT, f"must be true or false, got {_shown(trigger[_REPEAT])}"
        return None


CONTRACT_TRIGGER_TYPES: Mapping[str, TriggerType] = MappingProxyType(
    {
        kind.name: kind
        for kind in (
            TriggerType("eta_below", {"seconds": NumberField(gt=0)}),
            TriggerType("zone_entered", {"zone": TextField()}),
            TriggerType("progress_above", {"percent": NumberField(ge=0, le=100)}),
        )
    }
)
"""The trigger types ``docs/contract.md`` §8 documents, with their fields: ``eta_below``
(``seconds``, a number > 0), ``zone_entered`` (``zone``, a non-empty string) and
``progress_above`` (``percent``, a number from 0 to 100). A server that names one of them
in ``known_trigger_types`` gets it checked as documented."""


@dataclass(frozen=True)
class TriggerRules:
    """What a task knows of trigger types: ``known`` names (None: the server declared none,
    so no type is unknown) and the :class:`TriggerType` each checked type is held to."""

    known: frozenset[str] | None
    checked: Mapping[str, TriggerType]


def trigger_rules(known: Collection[str | TriggerType] | None) -> TriggerRules:
    """The rules of a ``known_trigger_types`` value (names and :class:`TriggerType` s).

    A name of :data:`CONTRACT_TRIGGER_TYPES` is checked as documented, a :class:`TriggerType`
    as declared (it wins over the documented one of its name), and ``progress_above`` is
    always known and checked. ``None``: every type is accepted, and the documented ones are
    checked.

    Raises:
        ConfigurationError: an entry is neither a non-empty string nor a TriggerType, or
            two TriggerTypes share a name.
    """
    if known is None:
        return TriggerRules(None, CONTRACT_TRIGGER_TYPES)
    if isinstance(known, str | TriggerType):
        raise ConfigurationError(
            f"known_trigger_types must be a collection of type names, got {known!r}; "
            "wrap it in a list."
        )
    names: set[str] = set(GENERIC_TRIGGER_TYPES)
    checked: dict[str, TriggerType] = {
        name: CONTRACT_TRIGGER_TYPES[name] for name in GENERIC_TRIGGER_TYPES
    }
    declared: set[str] = set()
    for entry in known:
        if isinstance(entry, TriggerType):
            if entry.name in declared:
                raise ConfigurationError(f"Trigger type {entry.name!r} is declared twice.")
            declared.add(entry.name)
            names.add(entry.name)
            checked[entry.name] = entry
        elif isinstance(entry, str) and entry:
            names.add(entry)
            if entry in CONTRACT_TRIGGER_TYPES and entry not in declared:
                checked[entry] = CONTRACT_TRIGGER_TYPES[entry]
        else:
            raise ConfigurationError(
                f"known_trigger_types holds {entry!r}; each entry is a type name or a TriggerType."
            )
    return TriggerRules(frozenset(names), MappingProxyType(checked))


def check_triggers(triggers: list[Any] | None, rules: TriggerRules) -> None:
    """Refuse more than :data:`MAX_TRIGGERS` triggers, then the first trigger that is not
    an object with a string ``type`` or whose known type's fields are not as declared (a
    type that is not known passes: ignored), then triggers over
    :data:`MAX_TRIGGERS_JSON_BYTES` together.

    Raises:
        InvalidTrigger: naming the trigger's index, its type and the field; with ``index``
            None when the list is at fault (too many, too large).
    """
    triggers = triggers or []
    if len(triggers) > MAX_TRIGGERS:
        raise InvalidTrigger(
            f"at most {MAX_TRIGGERS} triggers per task, got {len(triggers)}: keep the "
            'conditions the task needs (one trigger with "repeat": true fires each time its '
            "condition holds).",
            index=None,
            type=None,
            field=None,
        )
    for index, trigger in enumerate(triggers):
        if not isinstance(trigger, dict):
            raise InvalidTrigger(
                f'trigger {index} must be an object with a "type", got {_shown(trigger)}.',
                index=index,
                type=None,
                field=None,
            )
        kind = trigger.get("type")
        if not isinstance(kind, str) or not kind:
            got = "none" if "type" not in trigger else _shown(kind)
            raise InvalidTrigger(
                f'trigger {index} needs a "type", a non-empty string naming the condition; '
                f"got {got}.",
                index=index,
                type=None,
                field="type",
            )
        declared = rules.checked.get(kind)
        if declared is None or (rules.known is not None and kind not in rules.known):
            continue
        wrong = declared.problem(trigger)
        if wrong is not None:
            name, problem = wrong
            raise InvalidTrigger(
                f'trigger {index} ({kind}): "{name}" {problem}.',
                index=index,
                type=kind,
                field=name,
            )
    size = _json_bytes(triggers)
    if size > MAX_TRIGGERS_JSON_BYTES:
        raise InvalidTrigger(
            f"the triggers take {size} bytes as JSON, over the limit of "
            f"{MAX_TRIGGERS_JSON_BYTES} for one task: send shorter values.",
            index=None,
            type=None,
            field=None,
        )


def _json_bytes(triggers: list[Any]) -> int:
    """The size of ``triggers`` as compact JSON (UTF-8); what is no JSON counts as its repr
    (the payload check that follows refuses it)."""
    try:
        text = json.dumps(triggers, ensure_ascii=False, separators=(",", ":"), default=repr)
    except ValueError:  # an int too long to print (Python's digit limit): too large anyway
        return sys.maxsize
    return len(text.encode("utf-8", "surrogatepass"))


def trigger_key(trigger: dict[str, Any]) -> str:
    """The identity of a trigger for at-most-once firing: its canonical JSON.

    A body that copies the dict (or rebuilds it) still hits the same key.
    """
    return json.dumps(trigger, sort_keys=True, default=repr)


def accept_triggers(
    task_id: str, triggers: list[dict[str, Any]] | None, known: frozenset[str] | None
) -> list[dict[str, Any]]:
    """The triggers a new task keeps: copies of the entries, in order.

    Called after :func:`check_triggers`, so each is an object with a string ``type``. One
    of a type not in ``known`` (when ``known`` is not None) is kept but logged once at
    WARNING (``trigger_ignored``), and never fired by the kit.
    """
    accepted: list[dict[str, Any]] = []
    for trigger in triggers or ():
        accepted.append(dict(trigger))
        kind = trigger.get("type")
        if known is not None and kind not in known:
            _log.warning(
                "trigger_ignored",
                task_id=task_id,
                type=kind,
                reason="unknown type",
                known=sorted(known),
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
