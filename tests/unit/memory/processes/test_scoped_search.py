"""Scoped search counts only what the caller may read (issue 18, findings 2, 4, 5, 6).

FTS5's bm25 and its vocabulary span the whole index; a call narrowed to some robots'
documents gets bm25 over those documents only (per-owner statistics) and typo repair from
their vocabulary only. These tests hold the statistics to FTS5 (over everything the two
must agree), to a recount from scratch (after any sequence of writes), and hold a scoped
caller's every observable answer identical whether or not other groups hold documents with
its words.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from robot_mcp_memory._exceptions import DocTooLarge
from robot_mcp_memory._limits import MAX_DOC_TERMS
from robot_mcp_memory.backends import storage_at
from robot_mcp_memory.backends.sqlite._terms import rebuild_term_index
from robot_mcp_memory.processes import HashingEmbedder, Owner, ProcessDoc, ProcessService
from robot_mcp_memory.processes._typos import TypoRepair

# A small seeded vocabulary: robot errands with shared and group-specific words.
VERBS = ["fetch", "bring", "deliver", "inspect", "clean", "water", "carry", "load", "scan"]
THINGS = ["parcel", "package", "mug", "coffee", "pallet", "toner", "plant", "badge", "tray"]
PLACES = ["mailroom", "kitchen", "dock", "lab", "lobby", "warehouse", "office", "garage"]
FILLER = ["then", "carefully", "door", "shelf", "left", "right", "open", "close", "wait"]


def corpus_doc(rng: random.Random, i: int, robot: str, shared: bool = False) -> ProcessDoc:
    verb, thing, place = rng.choice(VERBS), rng.choice(THINGS), rng.choice(PLACES)
    words = [rng.choice(VERBS + THINGS + PLACES + FILLER) for _ in range(rng.randint(5, 60))]
    return ProcessDoc(
        id=f"{verb}-{thing}-{i}",
        title=f"{verb.capitalize()} the {thing} from the {place}",
        task_pattern=f"{verb} ... {thing} ... {place}",
        tags=[place, rng.choice(["delivery", "care", "lab"])],
        robot=robot,
        shared=shared,
        success_count=rng.randint(0, 9),
        failure_count=rng.randint(0, 4),
        source_mission_id=f"m-{i}",
        body="## Steps\n1. " + " ".join(words) + "\n",
    )


QUERIES = [
    "bring me the parcel from the mailroom",
    "fetch a coffee mug in the kitchen",
    "load the pallet at the dock then wait",
    "inspect the lab badge scanner",
    "water the office plant carefully",
    "carry the toner to the warehouse",
    "clean the lobby door, then the shelf on the left",
]


@pytest.fixture
def store(sqlite_backend: Any) -> ProcessService:
    """The store under test."""
    docs: ProcessService = sqlite_backend.open()
    return docs


def fill(store: ProcessService, n: int, robots: list[str], seed: int = 7) -> None:
    rng = random.Random(seed)
    for i in range(n):
        store.save(corpus_doc(rng, i, rng.choice(robots), shared=rng.random() < 0.1))


def answer(found: Any) -> list[tuple[str, float, float]]:
    return [(f.doc.id, f.score, f.bm25) for f in found]


class TestAgreesWithFts5:
    def test_over_every_robot_the_scoped_bm25_is_fts5s(self, store: ProcessService) -> None:
        """Narrowed to every robot there is, the per-owner bm25 ranks and scores exactly as
        FTS5's bm25 over the whole index (the unscoped path)."""
        robots = ["rap-1", "rap-2", "rap-3", "rap-4"]
        fill(store, 300, robots)
        for query in [*QUERIES, "pakage from the malroom"]:  # typo repair on both paths
            everything = store.find(query, k=50)
            narrowed = store.find(query, k=50, robots=robots)
            assert [f.doc.id for f in narrowed] == [f.doc.id for f in everything], query
            for a, b in zip(narrowed, everything, strict=True):
                assert a.bm25 == pytest.approx(b.bm25, rel=1e-9), (query, a.doc.id)
                assert a.score == pytest.approx(b.score, rel=1e-9), (query, a.doc.id)

    def test_a_narrowed_call_counts_only_its_documents(self, store: ProcessService) -> None:
        """With other robots' documents holding the query's words, a narrowed call's scores
        differ from FTS5's (the statistics are its own), and every result is visible."""
        fill(store, 200, ["rap-1", "rap-2", "rap-3"])
        narrowed = store.find(QUERIES[0], k=50, robots=["rap-1"])
        assert narrowed
        assert all(f.doc.robot == "rap-1" or f.doc.shared for f in narrowed)
        everything = {f.doc.id: f.bm25 for f in store.find(QUERIES[0], k=50)}
        assert any(f.bm25 != pytest.approx(everything.get(f.doc.id, -1.0)) for f in narrowed)


class TestTheCallerAloneDecides:
    """Everything a narrowed call observes depends only on documents it may read."""

    PROBES = (
        *QUERIES,
        "zebra giraffe okapi",  # words only the other group holds (below)
        "zebrra girafe",  # misspelt: repaired only from the caller's own words
        "bring the zebra parcel",
        "pakage malroom",
    )

    def observe(self, store: ProcessService) -> list[Any]:
        return [answer(store.find(q, k=50, robots=["rap-1"])) for q in self.PROBES]

    @pytest.mark.parametrize("hybrid", [False, True])
    def test_other_groups_documents_change_nothing(self, sqlite_backend: Any, hybrid: bool) -> None:
        """Scores, order, matches and repairs of rap-1 are identical before and after
        another robot saves documents full of the probed words (and words of its own)."""
        embedder = HashingEmbedder() if hybrid else None
        store = sqlite_backend.open(embedder=embedder)
        try:
            fill(store, 60, ["rap-1"], seed=3)
            before = self.observe(store)
            rng = random.Random(11)
            for i in range(150):
                doc = corpus_doc(rng, 1000 + i, "rap-9")
                doc.body += "zebra giraffe okapi parcel mailroom package " * rng.randint(1, 5)
                store.save(doc)
            assert self.observe(store) == before
            # ... and rap-9's own view did change, so the probe could have seen something.
            assert store.find("zebra giraffe", robots=["rap-9"])
        finally:
            store.close()

    def test_a_word_only_another_robot_holds_is_not_repaired(self, store: ProcessService) -> None:
        """Typo repair reads only the caller's vocabulary (finding 5)."""
        store.save(
            ProcessDoc(id="okapi-care", title="Feed the okapi", body="Hay.\n", robot="rap-9")
        )
        store.save(ProcessDoc(id="mug", title="Fetch a mug", body="Kitchen.\n", robot="rap-1"))
        with store.repo.reading() as reads:  # the repair as a narrowed call runs it
            typos = TypoRepair(reads, reads)
            assert typos.repair(["okpai"], ["shared", "robot:rap-1"]) == []
            repaired = typos.repair(["okpai"], ["shared", "robot:rap-9"])
            assert [r.term for r in repaired] == ["okapi"]
        assert store.find("okpai", robots=["rap-1"]) == []
        assert [f.doc.id for f in store.find("okpai", robots=["rap-9"])] == ["okapi-care"]


class TestStatisticsFollowWrites:
    """SQLite's statistics tables (the contract, backends/contract.py, holds both backends
    to the same scores after any writes)."""

    def snapshot(self, store: Any) -> dict[str, list[tuple[Any, ...]]]:
        tables = {
            "processes_postings": "owner, term, doc_rowid, freq",
            "processes_owner_terms": "term, owner, docs",
            "processes_lengths": "doc_rowid, owner, tokens, terms",
        }
        return {
            t: sorted(tuple(r) for r in store.repo.store.query(f"SELECT {cols} FROM {t}"))  # noqa: S608
            for t, cols in tables.items()
        }

    def test_any_sequence_of_writes_equals_a_recount(self, store: ProcessService) -> None:
        """Saves, updates that move a document between owners, notes and deletes leave the
        statistics exactly as a recount from the rows would."""
        rng = random.Random(5)
        ids: list[str] = []
        for step in range(300):
            roll = rng.random()
            if roll < 0.5 or not ids:
                doc = corpus_doc(rng, rng.randint(0, 40), rng.choice(["rap-1", "rap-2"]))
                doc.shared = rng.random() < 0.2
                ids.append(store.save(doc).doc.id)
            elif roll < 0.7:
                store.record_outcome(rng.choice(ids), rng.random() < 0.5, f"note {step} shelf")
            else:
                victim = ids.pop(rng.randrange(len(ids)))
                store.delete(victim)
        kept = self.snapshot(store)
        with store.repo.store.transaction() as conn:
            rebuild_term_index(conn, store.repo.tokenizer)
        assert self.snapshot(store) == kept
        assert kept["processes_owner_terms"]  # the sequence left documents to compare

    def test_reindex_rebuilds_them(self, store: ProcessService) -> None:
        """reindex() recounts the statistics with the index."""
        fill(store, 30, ["rap-1"])
        kept = self.snapshot(store)
        with store.repo.store.transaction() as conn:
            conn.execute("DELETE FROM processes_postings")
        assert store.find("parcel mailroom", robots=["rap-1"]) == []
        assert store.reindex() == 30
        assert self.snapshot(store) == kept

    def test_opening_a_file_counts_documents_it_lacks(self, tmp_path: Path) -> None:
        """A row without statistics (a file just migrated) is counted when the store opens;
        statistics of a row that is gone are dropped."""
        store = ProcessService(storage_at(str(tmp_path)).open().processes)
        fill(store, 20, ["rap-1"])
        kept = self.snapshot(store)
        store.close()
        conn = sqlite3.connect(tmp_path / "index.db")
        conn.execute("DELETE FROM processes_lengths WHERE doc_rowid % 2 = 0")
        conn.execute("DELETE FROM processes_postings WHERE doc_rowid % 2 = 0")
        conn.execute("DELETE FROM processes_owner_terms")
        conn.execute(
            "INSERT INTO processes_owner_terms SELECT term, owner, count(*) "
            "FROM processes_postings GROUP BY term, owner"
        )
        conn.execute("INSERT INTO processes_lengths VALUES (99999, 'robot:gone', 3, '[\"ghost\"]')")
        conn.execute("INSERT INTO processes_postings VALUES ('robot:gone', 'ghost', 99999, 1.0)")
        conn.execute("INSERT INTO processes_owner_terms VALUES ('ghost', 'robot:gone', 1)")
        conn.commit()
        conn.close()
        store = ProcessService(storage_at(str(tmp_path)).open().processes)
        try:
            assert self.snapshot(store) == kept
        finally:
            store.close()


class TestWhatOneRobotCanAdd:
    def test_a_document_of_too_many_distinct_words_is_refused(self, store: ProcessService) -> None:
        """Past MAX_DOC_TERMS distinct words the save is too_large and writes nothing."""
        words = " ".join(f"w{i:05d}x" for i in range(MAX_DOC_TERMS + 1))
        with pytest.raises(DocTooLarge) as info:
            store.save(ProcessDoc(id="noise", title="Noise", body=words + "\n"))
        assert info.value.unit == "distinct words"
        assert info.value.size > MAX_DOC_TERMS
        assert str(MAX_DOC_TERMS) in str(info.value)
        assert store.count() == 0
        assert store.repo.store.counts()["processes_owner_terms"] == 0

    def test_a_robot_owns_at_most_its_share_of_documents(self, store: ProcessService) -> None:
        """A new document past max_robot_documents is refused naming the setting; an update
        of an existing one and another robot's save still go through."""
        for i in range(3):
            store.save(
                ProcessDoc(id=f"d{i}", title="T", body="b\n", robot="rap-1"), max_robot_documents=3
            )
        with pytest.raises(DocTooLarge) as info:
            store.save(
                ProcessDoc(id="d3", title="T", body="b\n", robot="rap-1"), max_robot_documents=3
            )
        assert info.value.field == "documents"
        assert "MEMORY_ROBOT_MAX_DOCUMENTS" in str(info.value)
        updated = store.save(
            ProcessDoc(id="d0", title="T2", body="b\n", robot="rap-1"), max_robot_documents=3
        )
        assert not updated.created
        store.save(ProcessDoc(id="d9", title="T", body="b\n", robot="rap-2"), max_robot_documents=3)
        assert store.count() == 4


class TestIdsCannotBeSquatted:
    """Finding 6: another group can always save its document, and learns only "taken"."""

    def foreign(self, owner: Owner) -> bool:
        return owner.robot == "rap-2"  # rap-2 may update only its own documents

    @pytest.mark.parametrize("incoming", ["m-1", "m-2", None])
    def test_an_id_another_group_holds_is_suffixed_whatever_its_mission(
        self, store: ProcessService, incoming: str | None
    ) -> None:
        """rap-2's answer is the same whether or not rap-1's document has the mission id it
        sends (so no guess of it can be tested), and rap-1's document is untouched."""
        answers = []
        for held in ("m-1", "m-2"):
            store.delete("fetch-x")
            store.delete("fetch-x-2")
            if True:
                store.save(
                    ProcessDoc(
                        id="fetch-x", title="A", body="a\n", robot="rap-1", source_mission_id=held
                    )
                )
                saved = store.save(
                    ProcessDoc(
                        id="fetch-x",
                        title="B",
                        body="b\n",
                        robot="rap-2",
                        source_mission_id=incoming,
                    ),
                    may_update=self.foreign,
                )
                answers.append((saved.doc.id, saved.renamed_from, saved.created))
                original = store.get("fetch-x")
                assert original is not None
                assert (original.title, original.robot) == ("A", "rap-1")
        assert answers == [("fetch-x-2", "fetch-x", True)] * 2

    def test_a_whole_family_of_ids_cannot_be_filled(self, store: ProcessService) -> None:
        """With id, id-2 … id-99 all held by another robot, the save still succeeds, under a
        random suffix."""
        for n in range(1, 100):
            id = "fetch-x" if n == 1 else f"fetch-x-{n}"
            store.save(ProcessDoc(id=id, title="A", body="a\n", robot="rap-1"))
        saved = store.save(
            ProcessDoc(id="fetch-x", title="B", body="b\n", robot="rap-2"), may_update=self.foreign
        )
        assert saved.created
        assert saved.renamed_from == "fetch-x"
        assert saved.doc.id.startswith("fetch-x-")
        assert len(saved.doc.id) == len("fetch-x-") + 6
        assert store.get(saved.doc.id) is not None
