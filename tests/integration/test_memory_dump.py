"""Issue 22, item 2: ``robot-mcp-memory dump DIR`` and ``load DIR`` through the console script.

A real server (SSE) is filled through MCP — groups, robots with meta, documents with
outcomes and notes, a fleet-wide one, lessons — and dumped while it serves. The dump loads
into an empty store and dumps again byte for byte; loading it again skips everything; a
store holding another version of a document refuses the load (naming it) or, with
``--on-conflict suffix``, stores the dump's version under a suffixed id. On PostgreSQL
(``MEMORY_DATABASE_URL``) the same, plus ``backup`` (the dump format from one snapshot)
and ``restore`` (into an empty database only).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from robot_mcp_memory.processes import ProcessDoc
from robot_mcp_memory.services import open_memory
from robot_mcp_memory.settings import Settings

pytestmark = pytest.mark.slow


def cli(
    data_dir: Path, *argv: str, database_url: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_", "MEMORY_"))}
    env["MEMORY_DATA_DIR"] = str(data_dir)
    if database_url is not None:
        env["MEMORY_DATABASE_URL"] = database_url
    return subprocess.run(
        [sys.executable, "-m", "robot_mcp_memory", *argv],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def doc(id: str, title: str, body: str, extra: str = "") -> str:
    return f"---\nid: {id}\ntitle: {title}\n{extra}---\n\n{body}"


async def fill(server, mcp_call) -> dict[str, str]:
    """A store with something of every kind; returns each document's wire markdown."""
    async with server.session() as s:
        await mcp_call(s, "upsert_group", group_id="line-a", name="Line A", customer="ACME")
        await mcp_call(s, "upsert_group", group_id="line-b", factory="Plant 2")
        await mcp_call(s, "set_self_improve", enabled=False, group_id="line-b")
        await mcp_call(s, "set_self_improve", enabled=True)
        await mcp_call(
            s, "register_robot", robot_id="rap-1", group_id="line-a", meta={"arm": "ur5", "n": 1}
        )
        await mcp_call(s, "register_robot", robot_id="rap-2", group_id="line-b", name="Räp zwei")
        await mcp_call(s, "register_robot", robot_id="rap-3")
        await mcp_call(
            s,
            "save_process",
            markdown=doc(
                "fetch-parcel",
                "Fetch the parcel — mailroom",
                "## Steps\n1. Go to the mailroom\n2. Ask for the parcel 📦\n",
                "robot: rap-1\ntags: [delivery, mail]\nsource_mission_id: m-17\n",
            ),
        )
        await mcp_call(s, "record_outcome", id="fetch-parcel", success=True, note="went fine")
        await mcp_call(s, "record_outcome", id="fetch-parcel", success=False)
        await mcp_call(
            s,
            "save_process",
            markdown=doc(
                "safety-rules", "Fleet safety", "## Rules\n- Stop at red\n", "shared: true\n"
            ),
        )
        await mcp_call(
            s, "save_process", markdown=doc("water-plants", "Water plants", "## Steps\n1. Fill\n")
        )
        await mcp_call(
            s,
            "record_params",
            robot="rap-1",
            skill="grasp",
            params={"offset_mm": 3.5},
            place="mailroom",
            success=True,
            note="tight shelf",
        )
        await mcp_call(
            s, "record_params", robot="rap-3", skill="dock", params={"speed": 0.2}, private=True
        )
        markdown = {}
        for id in ("fetch-parcel", "safety-rules", "water-plants"):
            markdown[id] = (await mcp_call(s, "get_process", id=id))["markdown"]
    return markdown


async def test_dump_load_dump_is_byte_identical_and_load_merges_by_the_rules(
    spawn, mcp_call, tmp_path
):
    server = spawn(transport="sse")
    markdown = await fill(server, mcp_call)

    first = tmp_path / "dump-1"
    done = cli(server.data_dir, "dump", str(first))  # while the server serves
    assert done.returncode == 0, done.stderr
    assert "dump done: 3 documents, 2 groups, 3 robots, 2 lessons" in done.stdout
    for id, text in markdown.items():
        assert (first / "processes" / f"{id}.md").read_text(encoding="utf-8") == text
    manifest = json.loads((first / "manifest.json").read_text())
    assert manifest["schema_version"] == 6
    assert manifest["counts"] == {"documents": 3, "groups": 2, "robots": 3, "lessons": 2}
    assert set(manifest["files"]) == set(files(first)) - {"manifest.json"}
    robots = json.loads((first / "fleet" / "robots.json").read_text())
    assert robots[0]["meta"] == {"arm": "ur5", "n": 1}

    # Load into an empty store, dump again: byte-identical.
    fresh = tmp_path / "fresh"
    loaded = cli(fresh, "load", str(first))
    assert loaded.returncode == 0, loaded.stderr
    assert "10 inserted" in loaded.stdout
    second = tmp_path / "dump-2"
    assert cli(fresh, "dump", str(second)).returncode == 0
    assert files(second) == files(first)

    # Loading the same dump again skips everything.
    again = cli(fresh, "load", str(first))
    assert again.returncode == 0, again.stderr
    assert "10 skipped" in again.stdout
    assert "0 conflict(s)" in again.stdout

    # Another version of a document in the store: refused whole, then suffixed on request.
    memory = open_memory(Settings(data_dir=fresh, search="lexical"))
    try:
        changed = ProcessDoc.parse(markdown["water-plants"])
        changed.body = "## Steps\n1. Fill the can twice\n"
        memory.processes.save(changed)
    finally:
        memory.close()
    refused = cli(fresh, "load", str(first))
    assert refused.returncode == 2
    assert "process 'water-plants' differs" in refused.stderr
    assert "nothing was loaded" in refused.stderr
    suffixed = cli(fresh, "load", str(first), "--on-conflict", "suffix")
    assert suffixed.returncode == 0, suffixed.stderr
    assert "stored as 'water-plants-2'" in suffixed.stdout
    assert "1 suffixed" in suffixed.stdout
    memory = open_memory(Settings(data_dir=fresh, search="lexical"))
    try:
        kept = memory.processes.get("water-plants")
        copy = memory.processes.get("water-plants-2")
        assert kept is not None
        assert "twice" in kept.body
        assert copy is not None
        assert copy.body == ProcessDoc.parse(markdown["water-plants"]).body
    finally:
        memory.close()

    # load refuses the directory a running server holds.
    busy = cli(server.data_dir, "load", str(first))
    assert busy.returncode == 2
    assert "in use" in busy.stderr


def test_load_refuses_a_changed_dump_and_dump_refuses_a_used_directory(tmp_path):
    data = tmp_path / "data"
    memory = open_memory(Settings(data_dir=data, search="lexical"))
    try:
        memory.processes.save(ProcessDoc.parse(doc("fetch", "Fetch", "## Steps\n1. Go\n")))
    finally:
        memory.close()
    out = tmp_path / "d"
    assert cli(data, "dump", str(out)).returncode == 0
    again = cli(data, "dump", str(out))
    assert again.returncode == 2
    assert "not an empty directory" in again.stderr
    path = out / "processes" / "fetch.md"
    path.write_text(path.read_text() + "tampered\n")
    target = tmp_path / "target"
    refused = cli(target, "load", str(out))
    assert refused.returncode == 2
    assert "does not match its sha256" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert not (target / "index.db").exists() or _no_documents(target)


def _no_documents(data_dir: Path) -> bool:
    memory = open_memory(Settings(data_dir=data_dir, search="lexical"))
    try:
        return memory.processes.count() == 0
    finally:
        memory.close()


async def test_on_postgresql_dump_load_dump_is_byte_identical_and_backup_restores(
    spawn, mcp_call, tmp_path, pg_new_database
):
    source = pg_new_database()
    server = spawn(env={"MEMORY_DATABASE_URL": source})
    markdown = await fill(server, mcp_call)
    here = tmp_path / "cli-data"  # MEMORY_DATA_DIR of the commands: not used by PostgreSQL

    first = tmp_path / "dump-1"
    done = cli(here, "dump", str(first), database_url=source)  # while the replica serves
    assert done.returncode == 0, done.stderr
    assert "dump done: 3 documents, 2 groups, 3 robots, 2 lessons" in done.stdout
    assert "one snapshot" in done.stdout
    for id, text in markdown.items():
        assert (first / "processes" / f"{id}.md").read_text(encoding="utf-8") == text

    empty = pg_new_database()
    # The test server trusts its socket: a password in the URL is accepted and ignored.
    with_password = empty.replace("postgres:@", "postgres:s3cret-pw@", 1)
    assert with_password != empty
    loaded = cli(here, "load", str(first), database_url=with_password)
    assert loaded.returncode == 0, loaded.stderr
    assert "10 inserted" in loaded.stdout
    # The last line names the database it loaded into, never the URL's password.
    database = empty.split("?")[0].rsplit("/", 1)[1]
    assert "load done into the PostgreSQL database postgres@" in loaded.stdout
    assert f"/{database}: 10 inserted" in loaded.stdout
    assert "s3cret" not in loaded.stdout + loaded.stderr
    assert str(here) not in loaded.stdout
    second = tmp_path / "dump-2"
    assert cli(here, "dump", str(second), database_url=empty).returncode == 0
    assert files(second) == files(first)
    again = cli(here, "load", str(first), database_url=empty)
    assert "10 skipped" in again.stdout, again.stderr

    # backup: the same export, from one snapshot, while the replica serves.
    backup = tmp_path / "backup"
    taken = cli(here, "backup", str(backup), database_url=source)
    assert taken.returncode == 0, taken.stderr
    assert files(backup) == files(first)
    # restore refuses a database that holds a store, and --force, writing nothing...
    refused = cli(here, "restore", str(backup), database_url=empty)
    assert refused.returncode == 2
    assert "empty database only" in refused.stderr
    assert "Traceback" not in refused.stderr
    forced = cli(here, "restore", str(backup), "--force", database_url=empty)
    assert forced.returncode == 2
    assert "not moved aside" in forced.stderr
    # ... and fills an empty one with what was backed up.
    target = pg_new_database()
    restored = cli(here, "restore", str(backup), database_url=target)
    assert restored.returncode == 0, restored.stderr
    assert "10 inserted" in restored.stdout
    assert "restore done into the PostgreSQL database postgres@" in restored.stdout
    third = tmp_path / "dump-3"
    assert cli(here, "dump", str(third), database_url=target).returncode == 0
    assert files(third) == files(first)
    assert not here.exists()  # nothing of the store, and no lock, in MEMORY_DATA_DIR


# --- issue 32, finding 7: hostile dump directories -------------------------------------


def _dump_of_one_document(tmp_path: Path) -> tuple[Path, Path]:
    """A store holding one document (its data dir) and a dump of it (its directory)."""
    data = tmp_path / "data"
    memory = open_memory(Settings(data_dir=data, search="lexical"))
    try:
        memory.processes.save(ProcessDoc.parse(doc("fetch", "Fetch", "## Steps\n1. Go\n")))
    finally:
        memory.close()
    dumped = tmp_path / "dump"
    done = cli(data, "dump", str(dumped))
    assert done.returncode == 0, done.stderr
    shutil.copytree(dumped, tmp_path / "pristine")  # what the store holds, as a dump
    return data, dumped


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _list_in_manifest(dumped: Path, name: str, digest: str) -> None:
    manifest = json.loads((dumped / "manifest.json").read_text())
    manifest["files"][name] = digest
    (dumped / "manifest.json").write_text(json.dumps(manifest))


def _refused_untouched(data: Path, dumped: Path, needle: str) -> str:
    """Load ``dumped`` into ``data`` (which holds one document): refused in one line
    naming ``needle``, exit 2, and the store holds what it held (a dump of it is the
    pristine one)."""
    done = cli(data, "load", str(dumped))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert needle in done.stderr
    assert "load done" not in done.stdout
    after = dumped.parent / f"after-{len(list(dumped.parent.glob('after-*')))}"
    assert cli(data, "dump", str(after)).returncode == 0
    assert files(after) == files(dumped.parent / "pristine")
    memory = open_memory(Settings(data_dir=data, search="lexical"))
    try:
        assert [d.id for d in memory.processes.list(10, 0)] == ["fetch"]
    finally:
        memory.close()
    return done.stderr


@pytest.mark.parametrize("where", ["absolute", "dotdot"])
def test_load_refuses_a_manifest_naming_a_file_outside_the_dump(tmp_path, where):
    """A manifest naming ``/abs/path`` or ``../x`` is refused before that file is read:
    the answer is the same whether the file exists and whatever its digest (no existence
    or content oracle)."""
    data, dumped = _dump_of_one_document(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"hunter2\n")
    name = str(secret) if where == "absolute" else "../secret.txt"
    answers = []
    for digest in (_sha256(b"hunter2\n"), _sha256(b"a guess\n")):
        _list_in_manifest(dumped, name, digest)
        answers.append(_refused_untouched(data, dumped, "not a file a dump holds"))
    secret.unlink()
    answers.append(_refused_untouched(data, dumped, "not a file a dump holds"))
    assert len(set(answers)) == 1


def test_load_refuses_a_document_that_is_a_symlink_out_of_the_dump(tmp_path):
    """A ``processes/<id>.md`` that links to a document outside the dump (its digest
    right) is refused, not followed."""
    data, dumped = _dump_of_one_document(tmp_path)
    outside = tmp_path / "elsewhere.md"
    text = doc("stolen", "Stolen", "## Steps\n1. Read another's file\n").encode()
    outside.write_bytes(text)
    (dumped / "processes" / "stolen.md").symlink_to(outside)
    _list_in_manifest(dumped, "processes/stolen.md", _sha256(text))
    _refused_untouched(data, dumped, "is a symbolic link")


def test_load_refuses_a_folder_that_is_a_symlink_out_of_the_dump(tmp_path):
    """``processes/`` itself linking to a folder outside the dump is refused."""
    data, dumped = _dump_of_one_document(tmp_path)
    (dumped / "processes").rename(tmp_path / "moved")
    (dumped / "processes").symlink_to(tmp_path / "moved", target_is_directory=True)
    _refused_untouched(data, dumped, "is a symbolic link")


_STAMP = "2026-01-02T03:04:05.000Z"
_GROUP = {
    "group_id": "line-a",
    "name": None,
    "customer": None,
    "factory": None,
    "self_improve": None,
    "created": _STAMP,
    "updated": _STAMP,
}
_ROBOT = {
    "robot_id": "rap-1",
    "group_id": "line-a",
    "name": None,
    "meta": {},
    "registered": _STAMP,
    "updated": _STAMP,
}
_BROKEN_FILES = {
    "lessons-not-objects": (
        {"lessons.json": [1, "x"]},
        "lessons.json entry 1 is not a lesson a dump writes: a lesson must be a JSON object",
    ),
    "lesson-without-fields": (
        {"lessons.json": [{"scope": "solo:a"}]},
        "lessons.json entry 1 is not a lesson a dump writes",
    ),
    "group-id-not-a-string": (
        {"fleet/groups.json": [{**_GROUP, "group_id": ["x"]}]},
        "groups.json entry 1 is not a group a dump writes: group_id must be a string",
    ),
    # The group is valid and comes first: nothing of it may be written before the refusal.
    "robot-meta-not-an-object": (
        {"fleet/groups.json": [_GROUP], "fleet/robots.json": [{**_ROBOT, "meta": "x"}]},
        "robots.json entry 1 is not a robot a dump writes: meta must be a JSON object",
    ),
    "robot-in-no-group": (
        {"fleet/groups.json": [_GROUP], "fleet/robots.json": [{**_ROBOT, "group_id": "nope"}]},
        "which neither the dump nor the store holds",
    ),
    "setting-not-a-bool": (
        {"fleet/settings.json": {"global_self_improve": "yes"}},
        "settings or lessons file is not what a dump writes",
    ),
}


@pytest.mark.parametrize("case", sorted(_BROKEN_FILES))
def test_load_refuses_registry_settings_and_lessons_a_dump_does_not_write(tmp_path, case):
    """Entries of the JSON files that are not what a dump writes (digests right) are one
    line naming the file and entry, exit 2, before anything is written."""
    data, dumped = _dump_of_one_document(tmp_path)
    replaced, needle = _BROKEN_FILES[case]
    for name, value in replaced.items():
        text = (json.dumps(value) + "\n").encode()
        (dumped / name).write_bytes(text)
        _list_in_manifest(dumped, name, _sha256(text))
    _refused_untouched(data, dumped, needle)
