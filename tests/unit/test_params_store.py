"""The lesson store: ParamStore over SqliteBackend (and the MemoryBackend fake)."""

from __future__ import annotations

import sqlite3

import pytest

import robot_mcp_kit.params as params_mod
from robot_mcp_kit.params import MemoryBackend, ParamStore, SqliteBackend, lesson_key


@pytest.fixture(params=["sqlite", "memory"])
def backend(request, tmp_path):
    b = SqliteBackend(tmp_path / "lessons.db") if request.param == "sqlite" else MemoryBackend()
    yield b
    b.close()


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
