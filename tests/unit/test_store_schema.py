"""Kinds, table declarations and schemas: what a declaration may and may not say."""

from __future__ import annotations

import pytest

import robot_mcp_kit.store as store_pkg
from robot_mcp_kit.store import Kind, Schema, Table

EVENTS = Table(
    "events", Kind.RECORD, "CREATE TABLE events (id INTEGER PRIMARY KEY, ts REAL)", time_column="ts"
)
DOCS = Table("docs", Kind.DEFINITION, "CREATE TABLE docs (id TEXT PRIMARY KEY, body TEXT)")
DOCS_FTS = Table(
    "docs_fts",
    Kind.DERIVED,
    "CREATE VIRTUAL TABLE docs_fts USING fts5(id UNINDEXED, body)",
    derived_from="docs",
)


def _isort_key(name: str) -> tuple[int, str]:
    # ruff's RUF022 order: SCREAMING_CASE constants, then CamelCase classes, then the rest.
    return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)


def test_all_is_sorted_and_complete():
    """The package re-exports its names in one sorted __all__, each importable."""
    assert list(store_pkg.__all__) == sorted(store_pkg.__all__, key=_isort_key)
    for name in store_pkg.__all__:
        assert hasattr(store_pkg, name)
    for name in ("Kind", "Table", "Schema", "SqliteStore", "MigrationStep", "StoreClosed"):
        assert name in store_pkg.__all__


class TestTable:
    def test_kind_values_are_the_stack_vocabulary(self):
        """The four kinds are spelled as the memory spec spells them."""
        assert [k.value for k in Kind] == ["record", "definition", "belief", "derived"]

    def test_derived_needs_its_source(self):
        """A DERIVED table without derived_from is refused at declaration."""
        with pytest.raises(ValueError, match="derived_from"):
            Table("idx", Kind.DERIVED, "CREATE VIRTUAL TABLE idx USING fts5(x)")

    def test_only_derived_names_a_source(self):
        """derived_from on a non-DERIVED table is refused."""
        with pytest.raises(ValueError, match="only a DERIVED"):
            Table("t", Kind.DEFINITION, "CREATE TABLE t (x)", derived_from="u")

    def test_only_record_has_time_column(self):
        """A time_column on a definition is refused: definitions do not age."""
        with pytest.raises(ValueError, match="only a RECORD"):
            Table("t", Kind.DEFINITION, "CREATE TABLE t (ts REAL)", time_column="ts")

    def test_belief_needs_epoch_column(self):
        """A BELIEF must say which column carries its epoch."""
        with pytest.raises(ValueError, match="epoch_column"):
            Table("b", Kind.BELIEF, "CREATE TABLE b (x)")
        ok = Table("b", Kind.BELIEF, "CREATE TABLE b (x, epoch INTEGER)", epoch_column="epoch")
        assert ok.epoch_column == "epoch"

    @pytest.mark.parametrize("name", ["1abc", "a b", "x;drop", "sqlite_stat1", ""])
    def test_bad_names_are_refused(self, name):
        """Names are plain identifiers and not sqlite's reserved ones."""
        with pytest.raises(ValueError, match="name"):
            Table(name, Kind.DEFINITION, "CREATE TABLE t (x)")

    def test_ddl_must_create_a_table(self):
        """The ddl is one CREATE TABLE statement, not anything else."""
        with pytest.raises(ValueError, match="CREATE TABLE"):
            Table("t", Kind.DEFINITION, "DROP TABLE t")

    def test_virtual_module_is_read_from_ddl(self):
        """is_virtual and module come from the ddl."""
        assert DOCS_FTS.is_virtual
        assert DOCS_FTS.module == "fts5"
        assert not DOCS.is_virtual
        assert DOCS.module is None


class TestSchema:
    def test_pruned_may_name_a_record(self):
        """pruned accepts a declared RECORD."""
        schema = Schema(1, (EVENTS, DOCS), pruned=frozenset({"events"}))
        assert schema.pruned == {"events"}

    @pytest.mark.parametrize("name", ["docs", "docs_fts"])
    def test_pruned_refuses_a_non_record(self, name):
        """Building a Schema whose pruned names a non-record raises."""
        with pytest.raises(ValueError, match="only a RECORD"):
            Schema(1, (EVENTS, DOCS, DOCS_FTS), pruned=frozenset({name}))

    def test_pruned_refuses_an_undeclared_name(self):
        """pruned cannot name a table the schema does not declare."""
        with pytest.raises(ValueError, match="not a declared table"):
            Schema(1, (EVENTS,), pruned=frozenset({"ghost"}))

    def test_not_ours_derives_fts5_shadow_names(self):
        """not_ours() names sqlite's five fts5 shadow tables of each DERIVED fts5 table."""
        schema = Schema(1, (DOCS, DOCS_FTS, EVENTS))
        assert schema.not_ours() == {
            f"docs_fts_{s}" for s in ("data", "idx", "content", "docsize", "config")
        }

    def test_not_ours_is_empty_without_derived(self):
        """No DERIVED declaration, no shadow tables."""
        assert Schema(1, (DOCS, EVENTS)).not_ours() == frozenset()

    def test_derived_source_must_be_declared(self):
        """A DERIVED table's source must be in the schema."""
        with pytest.raises(ValueError, match="not declared"):
            Schema(1, (DOCS_FTS,))

    def test_duplicate_tables_are_refused(self):
        """One name, one declaration."""
        with pytest.raises(ValueError, match="twice"):
            Schema(1, (DOCS, DOCS))

    @pytest.mark.parametrize("version", [0, -1])
    def test_version_starts_at_one(self, version):
        """Versions below 1 are refused."""
        with pytest.raises(ValueError, match=">= 1"):
            Schema(version, (DOCS,))

    def test_migration_keys_are_checked(self):
        """Migration key N means N-1 -> N, so keys run 2..version."""
        with pytest.raises(ValueError, match=r"outside 2\.\.2"):
            Schema(2, (DOCS,), migrations={3: lambda conn: None})

    def test_table_lookup_names_the_declared_tables(self):
        """table() finds declared tables (and store_meta); an unknown name lists them."""
        schema = Schema(1, (DOCS, EVENTS))
        assert schema.table("docs") is DOCS
        assert schema.table("store_meta").kind is Kind.DEFINITION
        with pytest.raises(KeyError, match="docs"):
            schema.table("ghost")

    def test_store_meta_declared_once(self):
        """A schema that declares store_meta itself does not get a second one."""
        meta = Table(
            "store_meta",
            Kind.DEFINITION,
            "CREATE TABLE store_meta (key TEXT PRIMARY KEY, value TEXT)",
        )
        names = [t.name for t in Schema(1, (DOCS, meta)).all_tables()]
        assert names.count("store_meta") == 1
        names = [t.name for t in Schema(1, (DOCS,)).all_tables()]
        assert names.count("store_meta") == 1
