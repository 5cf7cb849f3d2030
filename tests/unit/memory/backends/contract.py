"""The repository contract: what every backend's storage answers, written once.

Each test runs on both backends through the ``backend`` fixture (tests/unit/memory/
conftest.py). The rules above the storage (:class:`~robot_mcp_memory.processes.
ProcessService`, :class:`~robot_mcp_memory.fleet.FleetService`) are tested once, on SQLite;
these tests are what lets them stand on PostgreSQL too: the ports
(:class:`~robot_mcp_memory.processes.ProcessRepo`, :class:`~robot_mcp_memory.fleet.
FleetRepo`, the copy rows) asked directly, and, where the rules meet the storage (a find's
scores, a revert, a merge), the same story told to the service on each backend giving the
same answers.

One difference is by design (decision 0028): PostgreSQL's index holds the lexemes of its
own text-search parser, which splits numbers and timestamps (an outcome log's lines)
otherwise than the shared tokenizer; words stem alike. The story below is told in words.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from robot_mcp_memory import DocError
from robot_mcp_memory._exceptions import MissingReference, WriteConflict
from robot_mcp_memory.fleet import FleetRows, Group, Robot
from robot_mcp_memory.processes import (
    COLUMNS,
    HashingEmbedder,
    Lexical,
    ProcessDoc,
    ProcessRepo,
    ProcessService,
    ProcessTx,
    Semantic,
)

NOW = "2026-01-02T03:04:05.000Z"
LATER = "2026-01-02T03:05:00.000Z"


def values(id: str, title: str, body: str, robot: str = "rap-1", **more: Any) -> dict[str, Any]:
    """A new document's row, by column."""
    row: dict[str, Any] = {
        "id": id,
        "title": title,
        "task_pattern": "",
        "tags": "[]",
        "robot": robot,
        "created": NOW,
        "updated": NOW,
        "success_count": 0,
        "failure_count": 0,
        "last_used": None,
        "source_mission_id": None,
        "body": body,
        "shared": False,
    }
    return {**row, **more}


def put(repo: ProcessRepo, id: str, title: str, body: str, **more: Any) -> int:
    """Insert and index a document in one transaction; its key."""
    row = values(id, title, body, **more)
    terms = repo.count_terms(row["title"], row["task_pattern"], row["tags"], row["body"])

    def script(tx: ProcessTx) -> int:
        key = tx.insert(row, resume_life=False)
        assert key is not None
        tx.index(key, terms, None)
        return key

    return repo.write(script)


def lexical(repo: ProcessRepo, words: str, robots: tuple[str, ...] | None = None) -> Lexical:
    """The lexical query of ``words`` (no repairs), over the owners ``robots`` may count."""
    owners = None if robots is None else ("shared", *(f"robot:{r}" for r in robots))
    return Lexical(terms=tuple(words.split()), repairs=(), owners=owners, robots=robots)


@pytest.fixture
def repo(backend: Any) -> ProcessRepo:
    """The process documents' repository of a new, empty store."""
    opened: ProcessRepo = backend.open_backend().processes
    return opened


# --- ProcessRepo: rows --------------------------------------------------------------------


class TestRows:
    def test_an_inserted_document_reads_back_as_given(self, repo: ProcessRepo) -> None:
        """Every column as written; revision 1 of life 1; a key."""
        key = put(repo, "mailroom", "Fetch a parcel", "Go.\n", tags='["mail"]', shared=True)
        with repo.reading() as reads:
            row = reads.row("mailroom")
            assert row is not None
            for column in COLUMNS.split(", "):
                expected = values("mailroom", "Fetch a parcel", "Go.\n", tags='["mail"]')
                expected["shared"] = True
                assert row[column] == expected[column], column
            assert reads.owner("mailroom") == ("rap-1", True)
            assert reads.row("nope") is None
            assert reads.owner("nope") is None
            [state] = reads.states(["mailroom", "nope"])
        assert (state["id"], state["revision"], state["life"]) == ("mailroom", 1, 1)
        assert state["recent_outcomes"] in ("", None)
        assert isinstance(key, int)

    def test_pages_are_by_id_bytewise_and_filtered_by_visibility(self, repo: ProcessRepo) -> None:
        """``rows`` orders ids by their bytes; a robot sees its own and the shared ones."""
        put(repo, "b", "B", "b\n", robot="rap-1")
        put(repo, "B", "B", "b\n", robot="rap-2")
        put(repo, "a", "A", "a\n", robot="rap-3", shared=True)
        put(repo, "é", "E", "e\n", robot="rap-1")
        with repo.reading() as reads:
            every = reads.rows(robots=None, stale=None, limit=10, offset=0)
            assert [r["id"] for r in every] == ["B", "a", "b", "é"]
            mine = reads.rows(robots=["rap-1"], stale=None, limit=10, offset=0)
            assert [r["id"] for r in mine] == ["a", "b", "é"]
            assert [r["id"] for r in reads.rows(robots=[], stale=None, limit=1, offset=0)] == ["a"]
            page = reads.rows(robots=None, stale=None, limit=2, offset=1)
            assert [r["id"] for r in page] == ["a", "b"]
            assert reads.count(robots=None) == 4
            assert reads.count(robots=["rap-2"]) == 2

    def test_a_taken_id_is_not_inserted_twice(self, repo: ProcessRepo) -> None:
        """A second insert of an id answers None (read its row again) and writes nothing."""
        put(repo, "x", "First", "1\n")
        again = repo.write(lambda tx: tx.insert(values("x", "Second", "2\n"), resume_life=False))
        assert again is None
        with repo.reading() as reads:
            row = reads.row("x")
            assert row is not None
            assert row["title"] == "First"

    def test_update_bumps_only_when_asked_and_never_touches_counters(
        self, repo: ProcessRepo
    ) -> None:
        key = put(repo, "x", "First", "1\n", success_count=3)
        repo.write(lambda tx: tx.update(key, {"title": "Second", "updated": LATER}, bump=True))
        repo.write(lambda tx: tx.update(key, {"body": "2\n"}, bump=False))
        row = repo.write(lambda tx: tx.row("x"))
        assert row is not None
        assert (row["title"], row["body"], row["revision"], row["updated"]) == (
            "Second",
            "2\n",
            2,
            LATER,
        )
        assert row["success_count"] == 3
        assert row["key"] == key
        repo.write(lambda tx: tx.set_counters(key, {"failure_count": 2, "last_used": LATER}))
        row = repo.write(lambda tx: tx.row("x"))
        assert row is not None
        assert (row["success_count"], row["failure_count"], row["last_used"]) == (3, 2, LATER)

    def test_rows_in_a_transaction_are_each_locked_row(self, repo: ProcessRepo) -> None:
        """``rows`` answers the existing ones by id, with key, revision and life."""
        put(repo, "a", "A", "a\n")
        put(repo, "b", "B", "b\n")
        rows = repo.write(lambda tx: tx.rows(["b", "a", "zz"]))
        assert sorted(rows) == ["a", "b"]
        assert all({"key", "revision", "life"} <= set(r.keys()) for r in rows.values())

    def test_a_failed_script_writes_nothing(self, repo: ProcessRepo) -> None:
        def script(tx: ProcessTx) -> None:
            tx.insert(values("x", "X", "x\n"), resume_life=False)
            raise RuntimeError("boom")

        with pytest.raises(RuntimeError):
            repo.write(script)
        with repo.reading() as reads:
            assert reads.count(robots=None) == 0

    def test_delete_takes_the_index_entry_and_vectors_with_it(self, repo: ProcessRepo) -> None:
        model = HashingEmbedder(16)
        assert repo.use_vectors(model)
        key = put(repo, "x", "Fetch the parcel", "From the mailroom.\n")
        put(repo, "y", "Water the plant", "In the lobby.\n")
        assert repo.sync_vectors(model, lambda rows: model_pairs(model, rows)) == 2
        repo.write(lambda tx: tx.delete(key))
        with repo.reading() as reads:
            assert reads.row("x") is None
            assert reads.index_terms("x") == []
            assert reads.lexical_top(lexical(repo, "parcel"), 5) == []
            pool, _, _ = reads.semantic_pool(semantic(model, "fetch parcel", top=5))
            assert key not in pool
        assert repo.sync_vectors(model, lambda rows: model_pairs(model, rows)) == 0

    def test_owned_counts_a_robots_documents(self, repo: ProcessRepo) -> None:
        put(repo, "a", "A", "a\n", robot="rap-1")
        put(repo, "b", "B", "b\n", robot="rap-1", shared=True)
        put(repo, "c", "C", "c\n", robot="rap-2")
        assert repo.write(lambda tx: tx.owned("rap-1")) == 2
        assert repo.write(lambda tx: tx.owned("rap-9")) == 0

    def test_a_field_the_store_cannot_hold_is_named_or_refused_as_a_doc_error(
        self, backend: Any
    ) -> None:
        """A NUL character: a store that cannot hold it names the field before writing; a
        store that can keeps it exactly."""
        store = backend.open()
        doc = ProcessDoc(id="nul", title="Fetch it", body="Go\x00now.\n")
        field = store.repo.unstorable(doc)
        if field is None:
            assert store.save(doc).doc.body == "Go\x00now.\n"
        else:
            assert field == "body"
            with pytest.raises(DocError):
                store.save(doc)
            assert store.count() == 0


# --- ProcessRepo: revisions and lives -----------------------------------------------------


def keep(repo: ProcessRepo, id: str, reason: str, replaced: str = NOW) -> None:
    """Keep the current version of ``id`` (its markdown a marker of title and revision)."""

    def script(tx: ProcessTx) -> None:
        row = tx.row(id)
        assert row is not None
        tx.keep_revision(row, f"{row['title']} r{row['revision']}", reason, replaced)

    repo.write(script)


class TestRevisions:
    def test_kept_revisions_read_back_newest_first(self, repo: ProcessRepo) -> None:
        key = put(repo, "x", "T", "1\n")
        for title, when in (("T0", "2026-01-01T00:00:01.000Z"), ("T1", "2026-01-01T00:00:02.000Z")):
            keep(repo, "x", "save", when)
            bump(repo, key, title)
        with repo.reading() as reads:
            kept = reads.revisions("x", None)
            assert [(r["revision"], r["reason"], r["life"]) for r in kept] == [
                (2, "save", 1),
                (1, "save", 1),
            ]
            assert (kept[0]["robot"], bool(kept[0]["shared"])) == ("rap-1", False)
            assert reads.revision_markdown("x", 1, None) == "T r1"
            assert reads.revision_markdown("x", 9, None) is None
            current = reads.current_at("x", 3, None)
            assert current is not None
            assert current["title"] == "T1"
            assert reads.current_at("x", 2, None) is None
        assert repo.write(lambda tx: tx.kept("x", 2, 1))["markdown"] == "T0 r2"
        assert repo.write(lambda tx: tx.kept("x", 2, 2)) is None

    def test_keeping_a_number_twice_replaces_it(self, repo: ProcessRepo) -> None:
        put(repo, "x", "T", "1\n")
        keep(repo, "x", "save")
        repo.write(lambda tx: tx.update(repo_key(repo, "x"), {"title": "U"}, bump=False))
        keep(repo, "x", "note")
        with repo.reading() as reads:
            [kept] = reads.revisions("x", None)
            assert kept["reason"] == "note"
            assert reads.revision_markdown("x", 1, None) == "U r1"

    def test_pruning_keeps_the_newest(self, repo: ProcessRepo) -> None:
        key = put(repo, "x", "T", "1\n")
        for n in range(5):
            keep(repo, "x", "save", f"2026-01-01T00:00:0{n}.000Z")
            bump(repo, key, f"T{n}")
        repo.write(lambda tx: tx.prune_revisions("x", 2))
        with repo.reading() as reads:
            assert [r["revision"] for r in reads.revisions("x", None)] == [5, 4]

    def test_a_new_life_after_a_delete_and_a_resumed_one_after_a_revert(
        self, repo: ProcessRepo
    ) -> None:
        """Deleted and saved again: life 2, revision 1, the first life's revisions apart.
        Inserted with ``resume_life``: the latest life, after its kept revisions."""
        key = put(repo, "x", "Old", "1\n")
        keep(repo, "x", "save")
        repo.write(lambda tx: tx.update(key, {"title": "Old2"}, bump=True))
        keep(repo, "x", "delete")
        repo.write(lambda tx: tx.delete(key))
        assert repo.write(lambda tx: tx.latest_life("x")) == 1
        put(repo, "x", "New", "2\n")
        with repo.reading() as reads:
            row = reads.row("x")
            assert row is not None
            [state] = reads.states(["x"])
            assert (state["life"], state["revision"]) == (2, 1)
            assert reads.lives("x") == [1, 2]
            assert reads.revisions("x", None) == []
            assert [r["revision"] for r in reads.revisions("x", 1)] == [2, 1]
            assert reads.revision_markdown("x", 2, 1) == "Old2 r2"
        keep(repo, "x", "delete")
        repo.write(lambda tx: tx.delete(repo_key(repo, "x")))
        resumed = repo.write(lambda tx: tx.insert(values("x", "Back", "3\n"), resume_life=True))
        assert resumed is not None
        with repo.reading() as reads:
            [state] = reads.states(["x"])
            assert (state["life"], state["revision"]) == (2, 2)
        assert repo.write(lambda tx: tx.latest_life("never")) == 0

    def test_a_merged_away_documents_markdown_is_kept_until_pruned(self, repo: ProcessRepo) -> None:
        put(repo, "gone", "Gone", "g\n")
        keep(repo, "gone", "merged", "2026-01-01T00:00:09.000Z")
        markdown = repo.write(lambda tx: tx.merged_markdown("gone", 1, "2026-01-01T00:00:09.000Z"))
        assert markdown == "Gone r1"
        assert repo.write(lambda tx: tx.merged_markdown("gone", 1, NOW)) is None


def bump(repo: ProcessRepo, key: int, title: str) -> None:
    """A new revision of the document ``key``, titled ``title``."""
    repo.write(lambda tx: tx.update(key, {"title": title}, bump=True))


def repo_key(repo: ProcessRepo, id: str) -> int:
    row = repo.write(lambda tx: tx.row(id))
    assert row is not None
    return int(row["key"])


# --- ProcessRepo: outcomes ----------------------------------------------------------------


class TestOutcomes:
    def test_an_outcome_counts_atomically_and_a_note_sees_the_locked_row(
        self, repo: ProcessRepo
    ) -> None:
        put(repo, "x", "T", "1\n")
        seen: list[str] = []
        repo.count_outcome("x", True, NOW)
        repo.count_outcome("x", False, LATER, note=lambda tx, row: seen.append(str(row["id"])))
        repo.flush()
        assert seen == ["x"]
        with repo.reading() as reads:
            row = reads.row("x")
            assert row is not None
            assert (row["success_count"], row["failure_count"], row["last_used"]) == (1, 1, LATER)
            [state] = reads.states(["x"])
        assert state["last_success"] == NOW
        assert state["recent_outcomes"].endswith("sf") or "s" in state["recent_outcomes"]
        assert repo.count_outcome("nope", True, NOW) is None

    def test_concurrent_outcomes_are_all_counted(self, backend: Any) -> None:
        """Two openers of one storage (two replicas on PostgreSQL) count every outcome."""
        first, second = backend.open_backend().processes, backend.open_backend().processes
        put(first, "x", "T", "1\n")
        for n in range(10):
            (first if n % 2 else second).count_outcome("x", True, NOW)
        first.flush()
        second.flush()
        with first.reading() as reads:
            row = reads.row("x")
            assert row is not None
            assert row["success_count"] == 10


# --- ProcessRepo: finding -----------------------------------------------------------------


def model_pairs(model: HashingEmbedder, rows: list[Any]) -> list[Any]:
    texts = [f"{r['title']}\n{r['body']}" for r in rows]
    vectors = model.embed(texts)
    return [(v, v) for v in vectors]


def semantic(model: HashingEmbedder, text: str, top: int, robots: Any = None) -> Semantic:
    return Semantic(model=model, vector=model.embed([text])[0], robots=robots, top=top, also=())


class TestFinding:
    def test_the_lexical_top_ranks_by_relevance_and_keeps_to_the_caller(
        self, repo: ProcessRepo
    ) -> None:
        put(repo, "mine", "Fetch the parcel", "Parcel parcel from the mailroom.\n")
        put(repo, "shared", "Fetch a parcel", "Once.\n", robot="rap-3", shared=True)
        put(repo, "theirs", "Fetch the parcel", "Parcel parcel parcel.\n", robot="rap-2")
        put(repo, "other", "Water the plant", "Lobby.\n")
        with repo.reading() as reads:
            stems = reads.stems(["parcels", "mailroom"])
            assert len(stems) == 2
            assert all(stems)
            every = reads.lexical_top(lexical(repo, "parcel"), 5)
            assert {s.row["id"] for s in every} == {"mine", "shared", "theirs"}
            assert all(s.relevance > 0 and s.score > 0 for s in every)
            assert [s.score for s in every] == sorted((s.score for s in every), reverse=True)
            mine = reads.lexical_top(lexical(repo, "parcel", ("rap-1",)), 5)
            assert {s.row["id"] for s in mine} == {"mine", "shared"}
            pool = reads.lexical_pool(lexical(repo, "parcel", ("rap-1",)), 5)
            keys = set(pool)
            assert len(keys) == 2
            assert set(reads.reliabilities(keys | {999999}, ["rap-1"])) == keys
            rows = reads.rows_of(keys | {999999}, ["rap-1"])
            assert {r["id"] for r in rows.values()} == {"mine", "shared"}
            frequency = reads.document_frequency(
                [t for tokens in reads.stems(["parcel"]) for t in tokens], None
            )
            assert list(frequency.values()) == [3]
            narrowed = reads.document_frequency(list(frequency), ["robot:rap-1"])
            assert list(narrowed.values()) == [1]

    def test_near_copies_are_held_by_their_terms(self, repo: ProcessRepo) -> None:
        put(repo, "a", "Fetch the parcel", "From the mailroom to the desk.\n")
        put(repo, "b", "Fetch the parcel", "From the mailroom to the lab.\n")
        put(repo, "c", "Water the plant", "In the lobby.\n", robot="rap-2")
        with repo.reading() as reads:
            terms = reads.index_terms("a")
            assert terms
            assert reads.index_terms("nope") == []
            held = reads.holding(terms, None, 3, "a")
            assert held == [("b", "Fetch the parcel")]
            assert reads.holding(terms, ["robot:rap-1"], 3, "a") == [("b", "Fetch the parcel")]
            assert reads.holding(terms, ["robot:rap-2"], 3, "a") == []
            freqs = reads.term_frequencies(["a", "b"])
        assert set(freqs) == {"a", "b"}
        counted = repo.count_terms("Fetch the parcel", "", "[]", "From the mailroom to the desk.\n")
        assert freqs["a"] == pytest.approx(counted.freq)

    def test_the_semantic_pool_is_by_cosine_within_the_visible(self, repo: ProcessRepo) -> None:
        model = HashingEmbedder(32)
        assert repo.use_vectors(model)
        put(repo, "parcel", "Fetch the parcel", "Mailroom.\n")
        put(repo, "plant", "Water the plant", "Lobby.\n", robot="rap-2")
        assert repo.sync_vectors(model, lambda rows: model_pairs(model, rows)) == 2
        with repo.reading() as reads:
            pool, low, high = reads.semantic_pool(semantic(model, "Fetch the parcel", top=2))
            assert len(pool) == 2
            assert low <= min(pool.values()) <= max(pool.values()) <= high
            best = max(pool, key=lambda k: pool[k])
            assert reads.rows_of([best], None)[best]["id"] == "parcel"
            mine, _, _ = reads.semantic_pool(semantic(model, "plant", top=5, robots=("rap-1",)))
            assert {reads.rows_of([k], None)[k]["id"] for k in mine} == {"parcel"}
        # Another model's vectors are dropped and made again; a rebuild drops them all.
        other = HashingEmbedder(16)
        assert repo.use_vectors(other)
        assert repo.sync_vectors(other, lambda rows: model_pairs(other, rows)) == 2
        assert repo.rebuild_index() == 2
        assert repo.sync_vectors(other, lambda rows: model_pairs(other, rows)) == 2


# --- the same story, the same answers -----------------------------------------------------


def story(store: ProcessService) -> list[Any]:
    """Saves, collisions, outcomes, a merge, a revert, deletes and finds: what they answer."""
    rng = random.Random(33)
    places = ["mailroom", "kitchen", "dock", "lab", "lobby"]
    things = ["parcel", "mug", "toner", "badge", "plant"]
    seen: list[Any] = []
    for i in range(40):
        place, thing = rng.choice(places), rng.choice(things)
        saved = store.save(
            ProcessDoc(
                id=f"fetch-{thing}",
                title=f"Fetch the {thing}",
                body=f"Go to the {place}.\nBring the {thing} back from the {place}.\n",
                robot=rng.choice(["rap-1", "rap-2"]),
                shared=rng.random() < 0.2,
                source_mission_id=rng.choice(["m-1", "m-2"]),
            )
        )
        seen.append((saved.doc.id, saved.created, saved.revision, saved.renamed_from))
        if i % 7 == 3:  # no note: see the module docstring
            store.record_outcome(saved.doc.id, i % 2 == 0)
    ids = [d.id for d in store.list(limit=100)]
    seen.append(ids)
    merged = store.merge(ids[0], ids[1])
    seen.append(None if merged is None else (merged.kept.doc.id, merged.merged_revision))
    seen.append(store.revert(ids[0], 1) is not None)
    store.delete(ids[2])
    seen.append([(r.revision, r.reason) for r in store.revisions(ids[0])])
    store.repo.flush()
    for query in ("fetch the parcel", "mailroom toner", "plant lobby", "badge dock lab"):
        for robots in (None, ["rap-1"], []):
            found = store.find(query, k=10, robots=robots)
            seen.append([(f.doc.id, round(f.score, 9), round(f.bm25, 9)) for f in found])
    seen.append([(n.id, round(n.similarity, 9)) for n in store.near_duplicates(ids[3])])
    seen.append(store.reindex())
    seen.append([(f.doc.id, round(f.score, 9)) for f in store.find("fetch the parcel", k=10)])
    return seen


def test_the_same_story_reads_the_same_on_both_backends(
    sqlite_backend: Any, postgres_backend: Any
) -> None:
    """The service over each backend answers a story of writes and finds identically:
    the statistics, scores, collisions, lives and revisions are the storage's, and agree."""
    told = [
        story(b.open(robot_id="rap-1", revisions_keep=3))
        for b in (sqlite_backend, postgres_backend)
    ]
    for step, (on_sqlite, on_postgres) in enumerate(zip(*told, strict=True)):
        assert on_sqlite == on_postgres, step


# --- FleetRepo ----------------------------------------------------------------------------


@pytest.fixture
def registry(backend: Any) -> Any:
    """The fleet registry's repository of a new, empty store."""
    return backend.open_backend().fleet


class TestRegistry:
    def test_robots_and_groups_read_back_as_saved(self, registry: Any) -> None:
        group = registry.save_group("g1", {"name": "Lab", "customer": "acme"}, NOW)
        assert (group.group_id, group.name, group.customer, group.factory) == (
            "g1",
            "Lab",
            "acme",
            None,
        )
        assert group.self_improve is None
        assert group.robots == ()
        robot, new = registry.save_robot(
            "r1", name="One", rename=True, group_id="g1", meta='{"a":1}', now=NOW
        )
        assert new
        assert (robot.robot_id, robot.group_id, robot.name, robot.meta) == (
            "r1",
            "g1",
            "One",
            {"a": 1},
        )
        again, new = registry.save_robot(
            "r1", name=None, rename=False, group_id=None, meta=None, now=LATER
        )
        assert not new
        assert (again.name, again.group_id, again.updated) == ("One", "g1", LATER)
        registry.save_robot("r0", name=None, rename=False, group_id=None, meta=None, now=NOW)
        assert [r.robot_id for r in registry.robots()] == ["r0", "r1"]
        assert [r.robot_id for r in registry.robots("g1")] == ["r1"]
        assert registry.group("g1").robots == ("r1",)
        assert [g.group_id for g in registry.groups()] == ["g1"]
        assert registry.robot("nope") is None
        assert registry.group("nope") is None
        assert registry.group_members_of("r1") == ["r1"]
        assert registry.group_members_of("r0") == []

    def test_labels_absent_are_kept_and_none_clears(self, registry: Any) -> None:
        registry.save_group("g1", {"name": "Lab", "customer": "acme"}, NOW)
        group = registry.save_group("g1", {"customer": None, "factory": "F"}, LATER)
        assert (group.name, group.customer, group.factory, group.updated) == (
            "Lab",
            None,
            "F",
            LATER,
        )

    def test_a_missing_group_is_a_missing_reference_and_writes_nothing(self, registry: Any) -> None:
        with pytest.raises(MissingReference):
            registry.save_robot("r1", name=None, rename=False, group_id="nope", meta=None, now=NOW)
        assert registry.robot("r1") is None
        registry.save_robot("r1", name=None, rename=False, group_id=None, meta=None, now=NOW)
        with pytest.raises(MissingReference):
            registry.move_robot("r1", "nope", NOW)
        assert registry.robot("r1").group_id is None

    def test_moves_meta_placement_and_settings(self, registry: Any) -> None:
        registry.save_group("g1", {}, NOW)
        registry.save_robot("r1", name=None, rename=False, group_id=None, meta=None, now=NOW)
        before, moved = registry.move_robot("r1", "g1", LATER)
        assert (before, moved.group_id, moved.updated) == (None, "g1", LATER)
        assert registry.move_robot("nope", None, NOW) is None
        assert registry.set_meta("r1", '{"b":2}', LATER).meta == {"b": 2}
        assert registry.set_meta("nope", "{}", NOW) is None
        assert registry.set_group_self_improve("g1", False, LATER)
        assert not registry.set_group_self_improve("nope", True, LATER)
        assert registry.setting("toggle") is None
        registry.put_setting("toggle", "on")
        registry.put_setting("toggle", "off")
        assert registry.setting("toggle") == "off"
        placement = registry.placement("r1", "toggle")
        assert (
            placement.group_id,
            placement.group_self_improve,
            placement.global_self_improve,
        ) == (
            "g1",
            False,
            "off",
        )
        unknown = registry.placement("nope", "toggle")
        assert (unknown.group_id, unknown.group_self_improve) == (None, None)

    def test_a_refused_delete_deletes_nothing(self, registry: Any) -> None:
        registry.save_group("g1", {}, NOW)
        registry.save_robot("r1", name=None, rename=False, group_id="g1", meta=None, now=NOW)

        def refuse(group: Group) -> None:
            assert group.robots == ("r1",)
            raise ValueError("not empty")

        with pytest.raises(ValueError, match="not empty"):
            registry.delete_group("g1", refuse)
        assert registry.group("g1") is not None
        registry.move_robot("r1", None, NOW)
        assert registry.delete_group("g1", lambda group: None).group_id == "g1"
        assert registry.group("g1") is None
        assert registry.delete_group("g1", lambda group: None) is None

    def test_exact_inserts_answer_what_holds_the_id(self, registry: Any) -> None:
        group = Group("g1", "Lab", None, None, True, NOW, NOW)
        assert registry.insert_group(group) is None
        assert registry.insert_group(Group("g1", "Other", None, None, None, LATER, LATER)) == group
        robot = Robot("r1", "g1", "One", {"a": 1}, NOW, NOW)
        assert registry.insert_robot(robot, '{"a":1}') is None
        assert registry.insert_robot(Robot("r1", None, None, {}, LATER, LATER), "{}") == robot
        with pytest.raises(MissingReference):
            registry.insert_robot(Robot("r2", "nope", None, {}, NOW, NOW), "{}")

    def test_rows_out_and_in_and_a_second_import_conflicts(self, backend: Any) -> None:
        """The whole registry moves exactly; into a registry holding a row it is a
        WriteConflict, and nothing of it is written."""
        source = backend.open_backend().fleet
        source.save_group("g1", {"name": "Lab"}, NOW)
        source.save_robot("r1", name="One", rename=True, group_id="g1", meta='{"a":1}', now=NOW)
        source.put_setting("toggle", "on")
        rows = source.export_rows()
        assert isinstance(rows, FleetRows)
        assert (len(rows.groups), len(rows.robots), rows.settings) == (1, 1, (("toggle", "on"),))
        with pytest.raises(WriteConflict):
            source.import_rows(rows)
        assert source.export_rows() == rows


# --- the copy rows ------------------------------------------------------------------------


def test_process_rows_move_out_and_in_whole(backend: Any) -> None:
    """Both process tables, every column, out of one store and into an empty one of the
    same backend, read back equal (a boolean as 0 or 1); the store indexes them."""
    source = backend.open_backend()
    put(source.processes, "b", "Fetch the parcel", "Mailroom.\n", shared=True)
    put(source.processes, "a", "Water the plant", "Lobby.\n", robot="rap-2")
    keep(source.processes, "b", "save")
    rows = source.copy_rows().processes
    assert rows.count_process_rows() == 2
    assert set(COLUMNS.split(", ")) <= set(rows.columns("processes"))
    assert "key" not in rows.columns("processes")
    exported = {t: rows.export_table(t) for t in ("processes", "processes_revisions")}
    assert sorted(r["id"] for r in exported["processes"]) == ["a", "b"]
    assert {r["id"]: r["shared"] for r in exported["processes"]} == {"a": 0, "b": 1}
    assert [(r["doc_id"], r["revision"]) for r in exported["processes_revisions"]] == [("b", 1)]
    with pytest.raises(ValueError, match="not one of"):
        rows.columns("fleet_robots")
    target = backend.elsewhere().open_backend()
    copied = target.copy_rows().processes
    assert copied.columns("processes") == rows.columns("processes")
    assert copied.import_tables(exported) == 2
    for table, expected in exported.items():
        assert sorted(copied.export_table(table), key=str) == sorted(expected, key=str)
    with target.processes.reading() as reads:
        found = reads.lexical_top(lexical(target.processes, "parcel"), 5)
        assert {s.row["id"] for s in found} == {"b"}
