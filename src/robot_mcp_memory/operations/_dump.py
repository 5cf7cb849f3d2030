"""``dump`` and ``load``: the store as files a person can read, diff and review.

A dump directory holds:

==========================  =================================================================
``processes/<id>.md``       every document as its exact markdown (the wire rendering:
                            ``get_process``'s ``markdown``, counters and timestamps included)
``fleet/groups.json``       the groups (ids, labels, ``self_improve``, timestamps), by id
``fleet/robots.json``       the registered robots (group, name, ``meta``, timestamps), by id
``fleet/settings.json``     the fleet settings (``global_self_improve``)
``lessons.json``            every lesson of every scope (params, counters, note, timestamps)
``manifest.json``           the format, the schema version, the counts and each file's sha256
==========================  =================================================================

JSON files are ``indent=1``, keys sorted, UTF-8, one trailing newline; nothing in a dump
depends on when it was taken, so ``dump → load (into an empty store) → dump`` is
byte-identical. Both go through the ports only (:class:`~robot_mcp_memory.services.Memory`),
so they work on any backend; the CLI dumps from the storage's snapshot
(:func:`memory_to_dump`). Where the storage has no files of its own to copy (a database
server), the same format is ``backup``'s (:func:`backup_database`) and ``restore`` loads it
into an empty database (:func:`restore_database`).

Load merge rules (:func:`load_memory`), per item, against what the store already holds:

- absent: inserted exactly as dumped (timestamps, counters, revisions start at 1);
- the same id with the same content: skipped;
- the same id with other content (for the fleet settings: another value, in a store that
  is not empty; an empty store takes the dump's): a conflict. ``on_conflict="refuse"`` (the default)
  refuses the whole load before writing anything, naming every conflict;
  ``on_conflict="suffix"`` stores a conflicting *document* under the save rule's next
  free id (``-2``, ``-3``…, as ``save_process`` does) and keeps the store's robot, group,
  setting or lesson (those have no second id), reporting each.

Every file is checked against the manifest, and every document and lesson parsed, before
the first write: a damaged or hand-broken dump is refused whole. A dump is read as a
directory of its own files only: a manifest naming anything but ``processes/<id>.md`` and
the four JSON files (an absolute path, ``..``) is refused before any file is opened, and so
is a symbolic link or a special file anywhere in the directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from robot_mcp_memory._exceptions import DocError, FleetError, OperationRefused
from robot_mcp_memory._limits import MAX_LIMIT
from robot_mcp_memory.backends import INDEX_SCHEMA_VERSION, open_storage
from robot_mcp_memory.fleet import Group, Robot
from robot_mcp_memory.fleet.validation import (
    check_bool,
    check_id,
    check_json_object,
    check_label,
    show,
)
from robot_mcp_memory.params import lesson_from_dict
from robot_mcp_memory.processes import SLUG_PATTERN, ProcessDoc
from robot_mcp_memory.services import Memory, memory_over, open_memory
from robot_mcp_memory.settings import SearchMode, Settings

__all__ = [
    "DUMP_MANIFEST",
    "DumpReport",
    "backup_database",
    "dump_memory",
    "load_memory",
    "memory_to_dump",
    "restore_database",
]

DUMP_MANIFEST = "manifest.json"
"""The manifest inside a dump directory."""

_FORMAT = "robot-mcp-memory dump 1"
_PROCESSES = "processes"
_GROUPS = "fleet/groups.json"
_ROBOTS = "fleet/robots.json"
_SETTINGS = "fleet/settings.json"
_LESSONS = "lessons.json"
_FIXED_FILES = frozenset({_GROUPS, _ROBOTS, _SETTINGS, _LESSONS})

Progress = Callable[[str], None]
OnConflict = Literal["refuse", "suffix"]


def _silent(_: str) -> None:
    pass


@dataclass
class DumpReport:
    """What a dump or a load did: ``counts`` per kind (documents, groups, robots,
    lessons); for a load, ``actions`` counts ``inserted``/``skipped``/``suffixed``/
    ``kept`` and ``conflicts`` names each conflict in one line."""

    directory: Path
    counts: dict[str, int] = field(default_factory=dict)
    actions: dict[str, int] = field(default_factory=dict)
    conflicts: list[str] = field(default_factory=list)


def _json_text(value: Any) -> str:
    return json.dumps(value, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def _write(path: Path, text: str) -> str:
    """Write ``text`` to ``path`` (UTF-8); return its sha256."""
    data = text.encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        f.write(data)
    return hashlib.sha256(data).hexdigest()


def _all_documents(memory: Memory) -> Iterator[ProcessDoc]:
    offset = 0
    while True:
        page = memory.processes.list(MAX_LIMIT, offset)
        if not page:
            return
        yield from page
        offset += MAX_LIMIT


def dump_memory(memory: Memory, dest: Path, *, progress: Progress = _silent) -> DumpReport:
    """Write every document, the registry, the settings and the lessons of ``memory`` into
    the new directory ``dest``, with a manifest. Reads through the ports only.

    Raises:
        OperationRefused: ``dest`` exists and is not an empty directory, or it cannot be
            written (a directory this call created is removed again).
    """
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise OperationRefused(
            f"the dump destination {dest} already exists and is not an empty directory; "
            "name a new directory",
            path=str(dest),
        )
    created = not dest.exists()
    report = DumpReport(directory=dest)
    files: dict[str, str] = {}
    try:
        dest.mkdir(parents=True, exist_ok=True)
        documents = 0
        for doc in _all_documents(memory):
            files[f"{_PROCESSES}/{doc.id}.md"] = _write(
                dest / _PROCESSES / f"{doc.id}.md", doc.render()
            )
            documents += 1
        stored = memory.processes.count()
        progress(f"processes: {documents} documents written as markdown")
        if stored != documents:
            progress(f"processes: {stored - documents} damaged row(s) left out (see the log)")
        groups = [_group_dict(g) for g in memory.fleet.list_groups()]
        robots = [r.to_dict() for r in memory.fleet.list_robots()]
        settings = {"global_self_improve": memory.fleet.global_self_improve()}
        lessons = [_lesson_dict(lesson) for lesson in memory.lessons.list_lessons()]
        for name, value in (
            (_GROUPS, groups),
            (_ROBOTS, robots),
            (_SETTINGS, settings),
            (_LESSONS, lessons),
        ):
            files[name] = _write(dest / name, _json_text(value))
        progress(f"fleet: {len(groups)} groups, {len(robots)} robots; {len(lessons)} lessons")
        report.counts = {
            "documents": documents,
            "groups": len(groups),
            "robots": len(robots),
            "lessons": len(lessons),
        }
        manifest = {
            "format": _FORMAT,
            "schema_version": INDEX_SCHEMA_VERSION,
            "counts": report.counts,
            "files": files,
        }
        _write(dest / DUMP_MANIFEST, _json_text(manifest))
    except OSError as exc:
        if created:
            shutil.rmtree(dest, ignore_errors=True)
        raise OperationRefused(
            f"the dump into {dest} failed ({exc.strerror or exc}); check free space and "
            "permissions, then run it again",
            path=str(dest),
        ) from exc
    return report


def _group_dict(group: Group) -> dict[str, Any]:
    data = group.to_dict()
    data.pop("robots")  # derived from the robots' group_id
    return data


def _lesson_dict(lesson: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in lesson.items() if k != "reliability"}  # derived


@dataclass
class _Dump:
    """A dump read and checked, before anything is written."""

    documents: list[ProcessDoc]
    groups: list[Group]
    robots: list[Robot]
    settings: dict[str, Any]
    lessons: list[dict[str, Any]]


def _read_dump(src: Path) -> _Dump:
    manifest_path = src / DUMP_MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise OperationRefused(
            f"{src} is not a dump made by 'robot-mcp-memory dump': {manifest_path} is missing "
            "or unreadable",
            path=str(src),
        ) from exc
    if not isinstance(manifest, dict) or manifest.get("format") != _FORMAT:
        raise OperationRefused(
            f"{manifest_path} is not a dump manifest this version reads", path=str(src)
        )
    files = manifest.get("files")
    if not isinstance(files, dict):
        raise OperationRefused(f"{manifest_path} lists no files", path=str(src))
    contents = _read_files(src, manifest_path, files)
    documents = []
    for name in sorted(contents):
        if not name.startswith(f"{_PROCESSES}/"):
            continue
        try:
            doc = ProcessDoc.parse(contents[name].decode("utf-8"))
        except UnicodeDecodeError:
            raise OperationRefused(f"{src / name} is not UTF-8 text") from None
        except DocError as exc:
            raise OperationRefused(f"{src / name} is not a valid document: {exc}") from None
        if f"{_PROCESSES}/{doc.id}.md" != name:
            raise OperationRefused(f"{src / name} holds the document {doc.id!r}, not its name")
        documents.append(doc)
    try:
        groups = [Group(**g, robots=()) for g in _json_file(src, _GROUPS, contents)]
        robots = [Robot(**r) for r in _json_file(src, _ROBOTS, contents)]
    except TypeError as exc:
        raise OperationRefused(f"the fleet files of {src} do not have the dump's fields") from exc
    settings = _json_file(src, _SETTINGS, contents)
    lessons = _json_file(src, _LESSONS, contents)
    if (
        not isinstance(settings, dict)
        or not isinstance(settings.get("global_self_improve", False), bool)
        or not isinstance(lessons, list)
    ):
        raise OperationRefused(f"{src}'s settings or lessons file is not what a dump writes")
    checks: list[tuple[str, str, list[Any], Callable[[Any], object]]] = [
        (_GROUPS, "group", groups, _check_group),
        (_ROBOTS, "robot", robots, _check_robot),
        (_LESSONS, "lesson", lessons, lesson_from_dict),
    ]
    for name, kind, entries, check in checks:
        for number, entry in enumerate(entries, start=1):
            try:
                check(entry)
            except FleetError as exc:
                raise OperationRefused(
                    f"{src / name} entry {number} is not a {kind} a dump writes: {exc.detail}",
                    path=str(src / name),
                ) from None
    return _Dump(documents, groups, robots, settings, lessons)


def _check_group(group: Group) -> None:
    """The fields of a dumped group, as the registry would store them.

    Raises:
        FleetError: ``invalid``, naming the field.
    """
    check_id(group.group_id, "group_id")
    for label in ("name", "customer", "factory"):
        value = getattr(group, label)
        if value is not None:
            check_label(value, label)
    if group.self_improve is not None:
        check_bool(group.self_improve, "self_improve")
    _check_stamps(group.created, group.updated)


def _check_robot(robot: Robot) -> None:
    """The fields of a dumped robot, as the registry would store them.

    Raises:
        FleetError: ``invalid``, naming the field.
    """
    check_id(robot.robot_id, "robot_id")
    if robot.group_id is not None:
        check_id(robot.group_id, "group_id")
    if robot.name is not None:
        check_label(robot.name, "name")
    check_json_object(robot.meta, "meta")
    _check_stamps(robot.registered, robot.updated)


def _check_stamps(*stamps: object) -> None:
    for stamp in stamps:
        if not isinstance(stamp, str):
            raise FleetError(
                "invalid", f"a timestamp must be a string, got {show(stamp)}", field="timestamp"
            )


def _is_dump_file(name: str) -> bool:
    """True for a name a dump's manifest may list: one of the fixed JSON files, or
    ``processes/<id>.md`` with a document id (a slug: nothing that leaves the dump)."""
    if name in _FIXED_FILES:
        return True
    folder, _, file = name.partition("/")
    return (
        folder == _PROCESSES
        and file.endswith(".md")
        and SLUG_PATTERN.fullmatch(file[: -len(".md")]) is not None
    )


def _read_files(src: Path, manifest_path: Path, files: dict[str, Any]) -> dict[str, bytes]:
    """The bytes of every file the manifest lists, each checked against its sha256.

    Before any listed file is opened: every name must be one a dump writes (so nothing
    outside ``src`` is read or hashed: no existence or content oracle), nothing under
    ``src`` may be a symbolic link or other than a regular file or directory, and no file
    may be missing from the manifest. Files are opened without following a link and read
    once (what is parsed is what was hashed).
    """
    bad = sorted(name for name in files if not _is_dump_file(name))
    if bad:
        raise OperationRefused(
            f"{manifest_path} names {', '.join(repr(n) for n in bad[:5])}, not a file a dump "
            "holds (processes/<id>.md, fleet/groups.json, fleet/robots.json, "
            "fleet/settings.json, lessons.json); load reads only the dump's own files: "
            "dump again",
            path=str(manifest_path),
        )
    on_disk = set()
    for folder, dirs, names in os.walk(src):
        for entry in sorted(dirs + names):
            path = Path(folder) / entry
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                raise OperationRefused(
                    f"{path} is a symbolic link; load follows no link out of a dump: put "
                    "the file itself there, or dump again",
                    path=str(path),
                )
            if stat.S_ISREG(mode):
                on_disk.add(path.relative_to(src).as_posix())
            elif not stat.S_ISDIR(mode):
                raise OperationRefused(
                    f"{path} is not a regular file; a dump holds only files and folders",
                    path=str(path),
                )
    on_disk.discard(DUMP_MANIFEST)
    extra = sorted(on_disk - set(files))
    if extra:
        raise OperationRefused(
            f"{src} holds files its manifest does not list ({', '.join(extra[:5])}); a dump "
            "is loaded as it was written: remove them or dump again",
            path=str(src),
        )
    contents = {}
    for name, digest in sorted(files.items()):
        path = src / name
        try:
            data = _read_regular(path)
        except OSError as exc:
            raise OperationRefused(
                f"the dump lacks {path} (listed in its manifest)", path=str(path)
            ) from exc
        if hashlib.sha256(data).hexdigest() != digest:
            raise OperationRefused(
                f"{path} does not match its sha256 in the manifest: it was changed after the "
                "dump. Load refuses a dump that is not as written",
                path=str(path),
            )
        contents[name] = data
    return contents


def _read_regular(path: Path) -> bytes:
    """The bytes of the regular file ``path``, opened without following a final link.

    Raises:
        OSError: missing, a link (``ELOOP``) or not a regular file.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise OSError(f"{path} is not a regular file")
        return f.read()


def _json_file(src: Path, name: str, contents: dict[str, bytes]) -> Any:
    try:
        return json.loads(contents[name].decode("utf-8"))
    except (KeyError, ValueError) as exc:
        raise OperationRefused(f"{src / name} is missing or not JSON", path=str(src)) from exc


def load_memory(
    memory: Memory,
    src: Path,
    *,
    on_conflict: OnConflict = "refuse",
    progress: Progress = _silent,
) -> DumpReport:
    """Load the dump in ``src`` into ``memory`` by the module's merge rules; through the
    ports only. The caller holds the store exclusively (the CLI takes the data dir's lock).

    Raises:
        OperationRefused: the dump is damaged or not a dump; with ``on_conflict="refuse"``,
            any conflict (the message names each). Nothing was written then.
    """
    dump = _read_dump(src)
    progress(
        f"checked {src}: {len(dump.documents)} documents, {len(dump.groups)} groups, "
        f"{len(dump.robots)} robots, {len(dump.lessons)} lessons (sha256 ok)"
    )
    dumped_groups = {g.group_id for g in dump.groups}
    for robot in dump.robots:
        gid = robot.group_id
        if gid is not None and gid not in dumped_groups and memory.fleet.get_group(gid) is None:
            raise OperationRefused(
                f"the dump's robot {robot.robot_id!r} is in group {gid!r}, which neither the "
                "dump nor the store holds; nothing was loaded. Dump again, or create the "
                "group first"
            )
    empty = _is_empty(memory)
    conflicts = _conflicts(memory, dump, empty=empty)
    if conflicts and on_conflict == "refuse":
        shown = "; ".join(conflicts[:10]) + ("; …" if len(conflicts) > 10 else "")
        raise OperationRefused(
            f"the store already holds {len(conflicts)} item(s) that differ from the dump "
            f"({shown}); nothing was loaded. Load into an empty store, or pass "
            "--on-conflict suffix to store conflicting documents under suffixed ids and keep "
            "the store's registry entries and lessons"
        )
    report = DumpReport(directory=src, conflicts=list(conflicts))
    tally = report.actions

    def count(action: str) -> None:
        tally[action] = tally.get(action, 0) + 1

    try:
        for group in dump.groups:
            action = memory.fleet.import_group(group)
            count("kept" if action == "conflict" else action)
        for robot in dump.robots:
            action = memory.fleet.import_robot(robot)
            count("kept" if action == "conflict" else action)
        wanted = dump.settings.get("global_self_improve")
        if isinstance(wanted, bool) and memory.fleet.global_self_improve() != wanted:
            if empty:  # a fresh store takes the dump's settings
                memory.fleet.set_self_improve(wanted)
            else:
                count("kept")
        for lesson in dump.lessons:
            action = memory.lessons.import_lesson(lesson)
            count("kept" if action == "conflict" else action)
        for doc in dump.documents:
            imported = memory.processes.import_document(doc, suffix=True)
            count(imported.action)
            if imported.action == "suffixed":
                progress(f"process {doc.id!r} conflicts: stored as {imported.id!r}")
    except FleetError as exc:
        raise OperationRefused(
            f"the dump's registry or lessons are not valid here: {exc.detail}; what came "
            "before it was loaded (load again after fixing: loaded items are skipped)"
        ) from exc
    report.counts = {
        "documents": len(dump.documents),
        "groups": len(dump.groups),
        "robots": len(dump.robots),
        "lessons": len(dump.lessons),
    }
    for line in conflicts:
        progress(f"conflict: {line}")
    return report


def _is_empty(memory: Memory) -> bool:
    """True when the store holds no document, group, robot or lesson."""
    return (
        memory.processes.count() == 0
        and not memory.fleet.list_groups()
        and not memory.fleet.list_robots()
        and not memory.lessons.list_lessons()
    )


def _conflicts(memory: Memory, dump: _Dump, *, empty: bool) -> list[str]:
    """One line per item of the dump that the store holds with other content (the
    settings of a store that is not empty included)."""
    lines = []
    wanted = dump.settings.get("global_self_improve")
    if not empty and isinstance(wanted, bool) and memory.fleet.global_self_improve() != wanted:
        lines.append(f"setting global_self_improve is {not wanted}, the dump's {wanted}")
    for group in dump.groups:
        stored = memory.fleet.get_group(group.group_id)
        if stored is not None and _group_dict(stored) != _group_dict(group):
            lines.append(f"group {group.group_id!r} differs")
    for robot in dump.robots:
        stored_robot = memory.fleet.get_robot(robot.robot_id)
        if stored_robot is not None and stored_robot != robot:
            lines.append(f"robot {robot.robot_id!r} differs")
    stored_lessons = {
        (lesson["scope"], lesson["key"], lesson["place"]): _lesson_dict(lesson)
        for lesson in memory.lessons.list_lessons()
    }
    for lesson in dump.lessons:
        key = (lesson.get("scope"), lesson.get("key"), lesson.get("place"))
        if key in stored_lessons and stored_lessons[key] != lesson:
            lines.append(f"lesson {key[1]!r} of {key[0]!r} differs")
    for doc in dump.documents:
        stored_doc = memory.processes.get(doc.id)
        if stored_doc is not None and stored_doc.render() != doc.render():
            lines.append(f"process {doc.id!r} differs")
    return lines


@contextmanager
def memory_to_dump(settings: Settings, *, progress: Progress = _silent) -> Iterator[Memory]:
    """The services ``dump`` and a database's ``backup`` read, as of one moment: the
    storage's snapshot (:meth:`Storage.snapshot <robot_mcp_memory.backends.Storage.snapshot>`:
    a consistent copy of a data directory, or one exported ``REPEATABLE READ READ ONLY``
    snapshot of a database), opened lexically (no model is loaded), safe while servers
    serve."""
    lexical = settings.model_copy(update={"search": SearchMode.LEXICAL})
    with open_storage(settings).snapshot(progress=progress) as backend:
        memory = memory_over(lexical, backend, None, owns_backend=False)
        try:
            yield memory
        finally:
            memory.close()


def backup_database(settings: Settings, dest: Path, *, progress: Progress = _silent) -> DumpReport:
    """``backup DEST`` on PostgreSQL: the consistent logical export, in the dump format
    (documents as markdown, registry, settings, lessons, ``manifest.json`` with each
    file's sha256) read from ONE snapshot (:func:`memory_to_dump`); safe while replicas
    serve. Revisions, recent outcomes and the search index are not exported (a restore
    starts every document at revision 1 and rebuilds the index as it inserts).

    Raises:
        OperationRefused: as :func:`dump_memory`.
    """
    with memory_to_dump(settings, progress=progress) as memory:
        return dump_memory(memory, dest, progress=progress)


def restore_database(
    settings: Settings, src: Path, *, force: bool = False, progress: Progress = _silent
) -> DumpReport:
    """``restore SRC`` on PostgreSQL: load the export ``src`` (made by ``backup`` or
    ``dump``) into the EMPTY database of ``settings``; checked whole (manifest, sha256,
    every document) before the first write.

    Raises:
        OperationRefused: ``src`` is not a whole export; the database already holds
            documents, robots, groups or lessons (nothing is written: restore into a new
            database, or merge with ``load``); ``force`` (a database is never moved aside).
    """
    if force:
        raise OperationRefused(
            "restore --force moves SQLite files aside; a PostgreSQL database is not moved "
            "aside or overwritten. Create an empty database (createdb), point "
            "MEMORY_DATABASE_URL at it and run restore without --force, or merge with "
            "'robot-mcp-memory load --on-conflict suffix'"
        )
    _read_dump(src)  # refuse a damaged export before connecting
    memory = open_memory(settings.model_copy(update={"search": SearchMode.LEXICAL}))
    try:
        if not _is_empty(memory):
            raise OperationRefused(
                "the PostgreSQL database already holds a store "
                f"({memory.processes.count()} documents, {len(memory.fleet.list_robots())} "
                f"robots, {len(memory.fleet.list_groups())} groups); restore loads into an "
                "empty database only. Create one (createdb), point MEMORY_DATABASE_URL at it "
                "and restore again, or merge into this one with 'robot-mcp-memory load "
                "--on-conflict suffix'"
            )
        return load_memory(memory, src, progress=progress)
    finally:
        memory.close()
