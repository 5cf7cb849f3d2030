"""``backup`` and ``restore`` of a SQLite store: consistent copies while the server serves.

A backup is a directory holding a copy of each SQLite file the server writes
(:data:`STORE_FILES`: ``index.db``, and ``lessons.db`` once a lesson was recorded) and a
``backup.json`` manifest (each file's sha256, size, schema version and row counts, and
when it was taken). Each file is copied with SQLite's online backup API from a read-only
connection in ONE step: the copy is the database as of one committed transaction, WAL
content included, taken while the server keeps reading and writing (readers never block
the writer in WAL mode). The copy is checked (``PRAGMA integrity_check``) and switched to
rollback-journal mode, so it is one self-contained file; it is written as ``<name>.partial``
and renamed when whole, and a failed backup removes what it made. ``index.db`` and
``lessons.db`` are two databases, each copied at its own point: a lesson recorded between
the two copies is in the backup's ``lessons.db`` or not, never half.

Copying ``index.db`` with ``cp`` while the server runs is NOT a backup: the newest
commits live in ``index.db-wal`` until a checkpoint (such a copy can hold no robots and no
processes at all).

``restore SRC`` puts a backup back into ``MEMORY_DATA_DIR``: it refuses while a server
holds the directory (:class:`~._lock.DataDirLock`), checks every file
against the manifest and with ``integrity_check`` before touching anything, moves a store
already there aside (``<name>.before-restore-<time>``, only with ``force``), and renames
each file into place, then opens ``index.db`` once (a backup of an older schema version
migrates forward here).

These are the SQLite storage's own copies (:attr:`SqliteStorage.files
<robot_mcp_memory.backends.sqlite.SqliteStorage.files>`). A store on a database server has
none: its ``backup`` and ``restore`` are the dump format of
:mod:`robot_mcp_memory.operations`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from robot_mcp_kit.models import format_ts, utc_now
from robot_mcp_memory._exceptions import OperationRefused
from robot_mcp_memory.backends._ports import BackupReport
from robot_mcp_memory.backends.sqlite._lock import DataDirLock
from robot_mcp_memory.backends.sqlite._schema import INDEX_FILENAME, open_index

__all__ = [
    "BACKUP_MANIFEST",
    "LESSONS_FILENAME",
    "STORE_FILES",
    "backup_store",
    "restore_store",
]

LESSONS_FILENAME = "lessons.db"
"""The lessons file inside ``MEMORY_DATA_DIR``, created by the first recorded lesson."""

STORE_FILES = (INDEX_FILENAME, LESSONS_FILENAME)
"""The SQLite files a memory server writes in ``MEMORY_DATA_DIR`` (its lock file aside)."""

BACKUP_MANIFEST = "backup.json"
"""The manifest inside a backup directory."""

_FORMAT = "robot-mcp-memory backup 1"

Progress = Callable[[str], None]


def _silent(_: str) -> None:
    pass


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _describe(path: Path) -> dict[str, Any]:
    """The manifest entry of a finished copy: checked, hashed, counted."""
    with sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True) as conn:
        check = [str(r[0]) for r in conn.execute("PRAGMA integrity_check").fetchall()]
        if check != ["ok"]:
            raise OperationRefused(
                f"{path} failed SQLite's integrity check ({'; '.join(check[:3])}); it is not "
                "a usable copy",
                path=str(path),
            )
        tables = [
            str(r[0])
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE "
                "'CREATE VIRTUAL%' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '%_fts_%' "
                "ORDER BY name"
            )
        ]
        counts = {
            t: int(conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0])  # noqa: S608
            for t in tables
        }
        version = None
        if "store_meta" in tables:
            row = conn.execute(
                "SELECT value FROM store_meta WHERE key = 'schema_version'"
            ).fetchone()
            version = int(row[0]) if row is not None else None
    conn.close()
    return {
        "sha256": _sha256(path),
        "bytes": path.stat().st_size,
        "schema_version": version,
        "counts": counts,
    }


def _copy_live(source: Path, target: Path) -> None:
    """Copy the database ``source`` to ``target`` with the online backup API, in one step."""
    src = sqlite3.connect(f"{source.as_uri()}?mode=ro", uri=True, timeout=30)
    try:
        dst = sqlite3.connect(target)
        try:
            # pages=-1 (the default): the whole database in one step, under one read
            # transaction of the source, so the copy is one committed state of it.
            src.backup(dst)
            dst.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
        finally:
            dst.close()
    finally:
        src.close()


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync(path: Path) -> None:
    with path.open("rb") as f:
        os.fsync(f.fileno())


def backup_store(data_dir: Path, dest: Path, *, progress: Progress = _silent) -> BackupReport:
    """Copy the store of ``data_dir`` into the new directory ``dest``; safe while it serves.

    ``dest`` must not exist or be an empty directory. Never writes to ``data_dir``.

    Raises:
        OperationRefused: no ``index.db`` in ``data_dir``; ``dest`` exists and is not an
            empty directory; a copy failed its integrity check; the disk is full. Nothing
            is left in ``dest`` then (a directory this call created is removed).
    """
    index = data_dir / INDEX_FILENAME
    if not index.is_file():
        raise OperationRefused(
            f"there is no {INDEX_FILENAME} in {data_dir}; set MEMORY_DATA_DIR to the "
            "directory the server uses",
            path=str(data_dir),
        )
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise OperationRefused(
            f"the backup destination {dest} already exists and is not an empty directory; "
            "name a new directory (a backup never overwrites one)",
            path=str(dest),
        )
    created_dest = not dest.exists()
    report = BackupReport(directory=dest)
    made: list[Path] = []
    try:
        dest.mkdir(parents=True, exist_ok=True)
        for name in STORE_FILES:
            source = data_dir / name
            if not source.is_file():
                progress(f"{name}: not present (nothing recorded yet), skipped")
                continue
            partial = dest / f"{name}.partial"
            made.append(partial)
            progress(f"{name}: copying from {source}")
            _copy_live(source, partial)
            entry = _describe(partial)
            _fsync(partial)
            final = dest / name
            made.append(final)
            partial.rename(final)
            report.files[name] = entry
            rows = ", ".join(f"{t} {n}" for t, n in entry["counts"].items() if n)
            progress(
                f"{name}: {entry['bytes']} bytes, schema v{entry['schema_version']}, "
                f"integrity ok ({rows or 'empty'})"
            )
        manifest = dest / BACKUP_MANIFEST
        made.append(manifest)
        text = json.dumps(
            {"format": _FORMAT, "taken": format_ts(utc_now()), "files": report.files},
            indent=1,
            sort_keys=True,
        )
        with manifest.open("w", encoding="utf-8") as f:
            f.write(text + "\n")
            f.flush()
            os.fsync(f.fileno())
        _fsync_dir(dest)
    except BaseException as exc:
        for path in made:
            path.unlink(missing_ok=True)
        if created_dest:
            with contextlib.suppress(OSError):
                dest.rmdir()
        if isinstance(exc, sqlite3.Error | OSError):
            raise OperationRefused(
                f"the backup into {dest} failed ({type(exc).__name__}: {exc}); nothing was "
                "kept there. Check free space and permissions, then run it again",
                path=str(dest),
            ) from exc
        raise
    return report


def _read_manifest(src: Path) -> dict[str, Any]:
    manifest = src / BACKUP_MANIFEST
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise OperationRefused(
            f"{src} is not a backup made by 'robot-mcp-memory backup': {manifest} is missing "
            "or unreadable",
            path=str(src),
        ) from exc
    if not isinstance(data, dict) or data.get("format") != _FORMAT:
        raise OperationRefused(
            f"{manifest} is not a manifest this version reads (format {data.get('format')!r}"
            if isinstance(data, dict)
            else f"{manifest} is not a backup manifest",
            path=str(manifest),
        )
    files = data.get("files")
    if not isinstance(files, dict) or INDEX_FILENAME not in files:
        raise OperationRefused(
            f"{manifest} lists no {INDEX_FILENAME}; the backup is incomplete", path=str(src)
        )
    return data


def restore_store(
    src: Path,
    data_dir: Path,
    *,
    force: bool = False,
    progress: Progress = _silent,
) -> BackupReport:
    """Put the backup in ``src`` back into ``data_dir``.

    Refuses, changing nothing, when: a server holds ``data_dir`` (:class:`StoreInUse`);
    ``src`` is not a whole backup (a file missing or a symbolic link, its sha256 or
    integrity check wrong);
    ``data_dir`` already holds a store and ``force`` is False. With ``force``, the files
    already there are renamed ``<name>.before-restore-<time>`` (kept, never deleted).

    Raises:
        OperationRefused: see above (``StoreInUse`` for the lock).
    """
    data = _read_manifest(src)
    files: dict[str, dict[str, Any]] = data["files"]
    for name, entry in files.items():
        if name not in STORE_FILES:
            raise OperationRefused(f"the manifest names an unknown file {name!r}", path=str(src))
        path = src / name
        if path.is_symlink():
            raise OperationRefused(
                f"{path} is a symbolic link; restore follows no link out of a backup: put "
                "the file itself there, or take the backup again",
                path=str(path),
            )
        if not path.is_file():
            raise OperationRefused(f"the backup lacks {path}; it is incomplete", path=str(src))
        digest = _sha256(path)
        if digest != entry.get("sha256"):
            raise OperationRefused(
                f"{path} does not match its manifest (sha256 {digest[:12]}…, expected "
                f"{str(entry.get('sha256'))[:12]}…): the backup was changed or damaged",
                path=str(path),
            )
        _describe(path)  # integrity
        progress(f"{name}: checked (sha256 and integrity ok)")
    lock = DataDirLock(
        data_dir,
        remedy="Stop the server first (systemctl stop robot-mcp-memory, or docker stop), "
        "then run restore again.",
    )
    with lock:
        present = [
            data_dir / f"{name}{suffix}"
            for name in STORE_FILES
            for suffix in ("", "-wal", "-shm")
            if (data_dir / f"{name}{suffix}").exists()
        ]
        if present and not force:
            raise OperationRefused(
                f"{data_dir} already holds a store ({', '.join(p.name for p in present)}); "
                "pass --force to move it aside (renamed *.before-restore-<time>, kept) and "
                "restore over it",
                path=str(data_dir),
            )
        report = BackupReport(directory=data_dir, files=files)
        stamp = format_ts(utc_now()).replace(":", "").replace("-", "")
        for path in present:
            aside = path.with_name(f"{path.name}.before-restore-{stamp}")
            path.rename(aside)
            report.moved_aside.append(aside.name)
            progress(f"{path.name}: moved aside to {aside.name}")
        for name in files:
            staging = data_dir / f"{name}.restoring"
            with (src / name).open("rb") as reader, staging.open("wb") as writer:
                while chunk := reader.read(1 << 20):
                    writer.write(chunk)
                writer.flush()
                os.fsync(writer.fileno())
            staging.rename(data_dir / name)
            progress(f"{name}: restored")
        _fsync_dir(data_dir)
        store = open_index(data_dir)  # checks the schema; migrates an older backup forward
        counts = store.counts()
        store.close()
        progress(
            f"{INDEX_FILENAME}: opens at schema v{store.schema.version} "
            f"({counts.get('processes', 0)} processes, {counts.get('fleet_robots', 0)} robots)"
        )
    return report
