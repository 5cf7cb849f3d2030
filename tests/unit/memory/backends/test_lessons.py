"""The lesson store: ParamStore over SqliteBackend, the memory server's PostgreSQL
backend (PgParamBackend) and the MemoryBackend fake."""

from __future__ import annotations

import sqlite3

import pytest

import robot_mcp_kit.params as params_mod
from robot_mcp_kit.params import (
    Lesson,
    LessonNotFound,
    MemoryBackend,
    ParamStore,
    SqliteBackend,
    lesson_key,
)


@pytest.fixture(params=["sqlite", "memory", "postgres"])
def backend(request, tmp_path):
    if request.param != "postgres":
        b = SqliteBackend(tmp_path / "lessons.db") if request.param == "sqlite" else MemoryBackend()
        yield b
        b.close()
        return
    from robot_mcp_memory.backends.postgres._database import PgDatabase
    from robot_mcp_memory.backends.postgres._lessons import PgParamBackend
    from robot_mcp_memory.backends.postgres._schema import SCHEMA

    db = PgDatabase(request.getfixturevalue("pg_url"))
    db.open(SCHEMA)
    yield PgParamBackend(db)
    db.close()


def test_all_is_sorted():
    """params re-exports its names in one sorted __all__."""
    names = list(params_mod.__all__)
    key = lambda n: (0 if n.isupper() else 1 if n[:1].isupper() else 2, n)  # noqa: E731
    assert names == sorted(names, key=key)


class TestLessons:
    def test_record_then_recall(self, backend):
        """A recorded lesson comes back with its params, place, robot and timestamps."""
        store = ParamStore(backend, "group:line-3")
        made = store.record("grasp", {"dz": 0.01}, place="table-1", robot="rap-1", success=True)
        got = store.get("grasp", place="table-1")
        assert got == made
        assert got.params == {"dz": 0.01}
        assert (got.success_count, got.failure_count) == (1, 0)
        assert (got.place, got.robot, got.scope) == ("table-1", "rap-1", "group:line-3")
        assert got.created.endswith("Z")
        assert got.updated == got.created

    def test_outcomes_accumulate_and_params_update(self, backend):
        """Counts are kept and bumped; new params replace old; created is kept."""
        store = ParamStore(backend, "solo:rap-2")
        first = store.record("grasp", {"dz": 0.01})
        store.record("grasp", success=True)
        store.record("grasp", success=False)
        last = store.record("grasp", {"dz": 0.02}, success=True, robot="rap-2")
        assert last.params == {"dz": 0.02}
        assert (last.success_count, last.failure_count) == (2, 1)
        assert last.created == first.created
        assert last.updated >= first.updated
        assert last.reliability == pytest.approx(3 / 5)

    def test_one_lesson_per_place(self, backend):
        """The same key at two places (and place-less) is three lessons."""
        store = ParamStore(backend, "group:g")
        store.record("grasp", {"a": 1})
        store.record("grasp", {"a": 2}, place="p1")
        store.record("grasp", {"a": 3}, place="p2")
        store.record("push", {"b": 1})
        assert store.get("grasp").params == {"a": 1}
        assert store.get("grasp", place="p2").params == {"a": 3}
        assert sorted(str(x.place) for x in store.lessons("grasp")) == ["None", "p1", "p2"]
        assert len(store.lessons()) == 4

    def test_scopes_are_isolated(self, backend):
        """A lesson in one scope is invisible from another."""
        ParamStore(backend, "group:a").record("grasp", {"x": 1})
        assert ParamStore(backend, "group:b").get("grasp") is None
        assert backend.scopes() == ["group:a"]

    def test_outcome_without_lesson_is_a_key_error(self, backend):
        """Counting an outcome for a lesson that does not exist says so."""
        with pytest.raises(KeyError, match="no lesson 'grasp'"):
            ParamStore(backend, "group:a").record("grasp", success=True)

    def test_params_must_be_a_json_object(self, backend):
        """Params are a JSON object; anything else is refused before storing."""
        store = ParamStore(backend, "group:a")
        with pytest.raises(TypeError):
            store.record("grasp", [1, 2])  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="JSON"):
            store.record("grasp", {"x": float("nan")})
        assert store.get("grasp") is None

    def test_delete(self, backend):
        """delete removes one lesson and reports whether it existed."""
        store = ParamStore(backend, "group:a")
        store.record("grasp", {"x": 1}, place="p")
        assert store.delete("grasp", place="p") is True
        assert store.delete("grasp", place="p") is False
        assert store.get("grasp", place="p") is None


class TestSqliteBackend:
    def test_no_file_until_first_write(self, tmp_path):
        """Reads on a fresh backend answer 'nothing' and create no file."""
        path = tmp_path / "data" / "lessons.db"
        backend = SqliteBackend(path)
        store = ParamStore(backend, "group:a")
        assert store.get("grasp") is None
        assert store.lessons() == []
        assert store.delete("grasp") is False
        assert backend.scopes() == []
        with pytest.raises(KeyError):
            store.record("grasp", success=True)
        assert not path.exists()
        assert not path.parent.exists()
        store.record("grasp", {"x": 1})
        assert path.exists()
        backend.close()

    def test_one_table_keyed_scope_and_key(self, tmp_path):
        """Every scope lives in one params table with a (scope, key) primary key."""
        path = tmp_path / "lessons.db"
        backend = SqliteBackend(path)
        ParamStore(backend, "group:a").record("grasp", {"x": 1}, place="p")
        ParamStore(backend, "robot:r1").record("grasp", {"x": 2})
        backend.close()
        conn = sqlite3.connect(path)
        try:
            tables = {
                r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type='table'")
            }
            assert tables == {"params", "store_meta"}
            pk = [
                r[1]
                for r in sorted(conn.execute("PRAGMA table_info(params)"), key=lambda r: r[5])
                if r[5]
            ]
            assert pk == ["scope", "key"]
            rows = conn.execute(
                "SELECT scope, key, value_json FROM params ORDER BY scope"
            ).fetchall()
            assert rows == [
                ("group:a", lesson_key("grasp", "p"), '{"x": 1}'),
                ("robot:r1", "grasp", '{"x": 2}'),
            ]
        finally:
            conn.close()

    def test_lessons_survive_reopen(self, tmp_path):
        """A new backend on the same file sees what the old one stored."""
        path = tmp_path / "lessons.db"
        first = SqliteBackend(path)
        ParamStore(first, "group:a").record("grasp", {"x": 1}, success=False)
        first.close()
        second = SqliteBackend(path)
        lesson = ParamStore(second, "group:a").get("grasp")
        assert lesson is not None
        assert lesson.failure_count == 1
        second.close()


class TestNote:
    def test_last_note_is_kept(self, backend):
        """A note is stored with the lesson; a later note replaces it; None keeps it."""
        store = ParamStore(backend, "group:a")
        first = store.record("grasp", {"x": 1}, note="slid on the lid")
        assert first.note == "slid on the lid"
        assert store.record("grasp", success=True).note == "slid on the lid"
        last = store.record("grasp", success=False, note="worked after regrip")
        assert last.note == "worked after regrip"
        assert store.get("grasp").note == "worked after regrip"
        assert last.to_dict()["note"] == "worked after regrip"

    def test_no_note_is_none(self, backend):
        """A lesson recorded without a note has note None (and says so in to_dict)."""
        lesson = ParamStore(backend, "group:a").record("grasp", {"x": 1})
        assert lesson.note is None
        assert lesson.to_dict()["note"] is None


V1_PARAMS_DDL = """CREATE TABLE params (
    scope TEXT NOT NULL, key TEXT NOT NULL, value_json TEXT NOT NULL,
    success_count INTEGER NOT NULL DEFAULT 0, failure_count INTEGER NOT NULL DEFAULT 0,
    place TEXT, robot TEXT, created TEXT NOT NULL, updated TEXT NOT NULL,
    PRIMARY KEY (scope, key))"""


def test_v1_lessons_file_migrates_and_keeps_its_lessons(tmp_path):
    """A lessons.db of schema version 1 (no note column) opens at version 2: its lessons are
    all there with note None, and a note can be recorded on them."""
    from robot_mcp_kit.store import Kind, Schema, SqliteStore, Table

    assert params_mod.PARAMS_SCHEMA.version == 2
    path = tmp_path / "lessons.db"
    v1 = Schema(1, (Table("params", Kind.DEFINITION, V1_PARAMS_DDL),))
    with SqliteStore(path, v1) as old:
        old.execute(
            "INSERT INTO params VALUES ('group:a', 'grasp@t1', '{\"dz\": 1}', 3, 1, 't1', "
            "'rap-1', '2026-01-01T00:00:00.000Z', '2026-01-02T00:00:00.000Z')"
        )
    backend = SqliteBackend(path)
    try:
        lesson = ParamStore(backend, "group:a").get("grasp", place="t1")
        assert lesson is not None
        assert (lesson.params, lesson.success_count, lesson.failure_count) == ({"dz": 1}, 3, 1)
        assert (lesson.place, lesson.robot, lesson.note) == ("t1", "rap-1", None)
        noted = ParamStore(backend, "group:a").record("grasp", place="t1", note="hi")
        assert noted.note == "hi"
        assert noted.success_count == 3
    finally:
        backend.close()
    conn = sqlite3.connect(path)
    try:
        version = conn.execute("SELECT value FROM store_meta WHERE key='schema_version'")
        assert version.fetchone()[0] == "2"
    finally:
        conn.close()


class TestBackendUpdate:
    """The backends' one write: ``update(scope, key, place, rule)``."""

    def test_rule_sees_the_current_lesson_and_its_result_is_stored(self, backend):
        """The rule gets None, then what it stored last; ``get`` returns its result."""
        seen = []

        def bump(old):
            seen.append(old)
            count = 0 if old is None else old.success_count + 1
            return Lesson("group:a", "k", {"n": count}, success_count=count, place="p")

        backend.update("group:a", "k", "p", bump)
        stored = backend.update("group:a", "k", "p", bump)
        assert seen[0] is None
        assert seen[-1] is not None
        assert seen[-1].success_count == 0
        assert backend.get("group:a", "k", "p") == stored
        assert stored.success_count == 1

    def test_a_refusing_rule_stores_nothing(self, backend):
        """If the rule raises, the error propagates and nothing is stored."""

        def refuse(old):
            raise LessonNotFound("no")

        with pytest.raises(LessonNotFound):
            backend.update("group:a", "k", None, refuse)
        assert backend.lessons() == []
        assert backend.scopes() == []

    def test_sqlite_refused_first_write_creates_no_file(self, tmp_path):
        path = tmp_path / "lessons.db"
        backend = SqliteBackend(path)

        def refuse(old):
            raise LessonNotFound("no")

        with pytest.raises(LessonNotFound):
            backend.update("group:a", "k", None, refuse)
        assert not path.exists()
