"""Scripted faults: a sequence of answers read from a file (``fake-rvc --faults FILE``).

For an author testing a server's retries by hand: the file lists the answers fake_rvc
gives, in order, before it answers normally again. YAML (JSON is YAML too)::

    # faults.yaml
    faults:
      - status: 500                     # the next post: 500
      - status: 429                     # then 429 with Retry-After: 2
        retry_after_s: 2
      - delay_s: 3                      # then a slow answer (processed normally)
      - drop: true                      # then the connection dropped, no answer
      - status: 503                     # then three 503s, for posts of navigation only
        count: 3
        server: navigation

A bare list (without ``faults:``) is read the same. Each entry takes the fields of
:class:`~fake_rvc.Fault`: ``status``, ``retry_after_s``, ``delay_s``, ``drop``, ``count``
(how many posts it answers, default 1), ``server`` (default ``"*"``, any server) and
``task_id``. The faults queue up per server in the file's order, a server's own ahead of
the ``"*"`` ones (see :mod:`fake_rvc._faults`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fake_rvc._exceptions import FaultError
from fake_rvc._faults import ANY_SERVER, Fault

__all__ = ["FAULT_FIELDS", "load_faults", "parse_faults"]

FAULT_FIELDS = frozenset(
    {"status", "retry_after_s", "delay_s", "drop", "count", "server", "task_id"}
)
"""The keys an entry of a fault script may have."""

_MAX_ENTRIES = 10_000


def load_faults(path: Path) -> list[Fault]:
    """Read a fault script (see the module docstring).

    Raises:
        FaultError: (a ``ValueError``) the file cannot be read, is not YAML, or an entry
            is not a fault; the message names the file and the entry.
    """
    import yaml

    try:
        data: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise FaultError(f"cannot read the fault script {str(path)!r}: {exc.strerror}.") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise FaultError(f"the fault script {str(path)!r} is not valid YAML: {first}.") from None
    return parse_faults(data, source=f"the fault script {str(path)!r}")


def parse_faults(data: Any, *, source: str = "the fault script") -> list[Fault]:
    """The faults of a parsed script: ``{"faults": [...]}`` or a bare list of entries.

    Raises:
        FaultError: the shape is wrong, or an entry is not a valid fault.
    """
    entries = data.get("faults") if isinstance(data, dict) and set(data) == {"faults"} else data
    if not isinstance(entries, list) or not entries:
        raise FaultError(
            f"{source} must be a non-empty list of faults, or 'faults:' with one "
            "(e.g. faults: [{status: 500}, {status: 429, retry_after_s: 2}, {drop: true}])."
        )
    if len(entries) > _MAX_ENTRIES:
        raise FaultError(f"{source} has {len(entries)} entries; at most {_MAX_ENTRIES}.")
    faults = []
    for number, entry in enumerate(entries, start=1):
        where = f"{source}, entry {number}"
        if not isinstance(entry, dict):
            raise FaultError(f"{where} must be a mapping such as {{status: 500}}, got {entry!r}.")
        unknown = sorted(str(k) for k in entry if k not in FAULT_FIELDS)
        if unknown:
            raise FaultError(
                f"{where} has unknown key(s) {', '.join(unknown)}; the keys are "
                f"{', '.join(sorted(FAULT_FIELDS))}."
            )
        try:
            faults.append(_fault(entry))
        except (FaultError, TypeError, ValueError) as exc:
            raise FaultError(f"{where}: {exc}") from None
    return faults


def _fault(entry: dict[str, Any]) -> Fault:
    status, delay, count = entry.get("status"), entry.get("delay_s"), entry.get("count", 1)
    drop, server, retry = entry.get("drop", False), entry.get("server", ANY_SERVER), None
    if status is not None and type(status) is not int:
        raise FaultError(f"status must be a whole number, got {status!r}.")
    if delay is not None and (isinstance(delay, bool) or not isinstance(delay, int | float)):
        raise FaultError(f"delay_s must be a number of seconds, got {delay!r}.")
    if type(count) is not int:
        raise FaultError(f"count must be a whole number, got {count!r}.")
    if not isinstance(drop, bool):
        raise FaultError(f"drop must be true or false, got {drop!r}.")
    if not isinstance(server, str):
        raise FaultError(f"server must be a server name or '*', got {server!r}.")
    if "retry_after_s" in entry:
        retry = entry["retry_after_s"]
    task_id = entry.get("task_id")
    if task_id is not None and not isinstance(task_id, str):
        raise FaultError(f"task_id must be a task id, got {task_id!r}.")
    return Fault(
        server=server,
        status=status,
        delay_s=None if delay is None else float(delay),
        drop=drop,
        remaining=count,
        task_id=task_id,
        retry_after_s=retry,
    )
