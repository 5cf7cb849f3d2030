"""Search (issue 11): robot-aware words, typo repair, vectors as a derived table, fusion,
visibility of the semantic path, MEMORY_SEARCH and the missing-model fallback."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mcp.shared.memory import create_connected_server_and_client_session

from robot_mcp_kit import reliability
from robot_mcp_memory import services
from robot_mcp_memory._exceptions import EmbedderUnavailable, SettingsError
from robot_mcp_memory.backends._processes import RELIABILITY_SQL
from robot_mcp_memory.backends.sqlite._vectors import VectorIndex, from_blob, to_blob
from robot_mcp_memory.processes import (
    FunctionEmbedder,
    HashingEmbedder,
    ProcessDoc,
    ProcessService,
    load_default_embedder,
)
from robot_mcp_memory.processes._embedding import DEFAULT_MODEL, normalise
from robot_mcp_memory.processes._typos import MAX_REPAIRED_WORDS, Repair, TypoRepair
from robot_mcp_memory.processes._words import ACTION_WORDS, STOPWORDS, search_terms
from robot_mcp_memory.server import build_server
from robot_mcp_memory.settings import (
    SearchMode,
    Settings,
    load_settings,
)


def make_doc(id: str, title: str, body: str = "## Steps\n1. do it\n", **fields) -> ProcessDoc:
    return ProcessDoc(id=id, title=title, body=body, **fields)


@pytest.fixture
def lexical(sqlite_backend: Any) -> ProcessService:
    """A lexical store."""
    store: ProcessService = sqlite_backend.open()
    return store


@pytest.fixture
def hybrid(sqlite_backend: Any) -> ProcessService:
    """A hybrid store (the hashing embedder)."""
    store: ProcessService = sqlite_backend.open(embedder=HashingEmbedder())
    return store


def vector_rows(store: Any) -> list[tuple[str, int, int, int, bytes]]:
    """``(model, dim, head length, doc length, doc)`` of each stored vector pair."""
    return [
        (r["model"], r["dim"], len(r["head"]) // 4, len(r["doc"]) // 4, r["doc"])
        for r in store.repo.store.query("SELECT model, dim, head, doc FROM processes_vectors")
    ]


def repair(store: Any, words: list[str]) -> list[Repair]:
    """Typo repair of ``words`` over the whole vocabulary, as the store's search runs it."""
    with store.repo.reading() as reads:
        return TypoRepair(reads, reads).repair(words, None)


def drop_vectors(store: Any) -> None:
    store.repo.store.execute("DELETE FROM processes_vectors")


def ids(found) -> list[str]:
    return [f.doc.id for f in found]


class TestRobotAwareWords:
    def test_action_words_are_never_stopwords(self) -> None:
        """DESIGN §5's small words are content: none of them is a stopword."""
        assert ACTION_WORDS.isdisjoint(STOPWORDS)
        assert {"on", "off", "up", "down", "in", "out", "into", "onto", "over", "under"} <= (
            ACTION_WORDS
        )
        assert {"above", "below", "left", "right", "open", "close", "before", "after"} <= (
            ACTION_WORDS
        )
        assert {"not", "no"} <= ACTION_WORDS

    def test_terms_keep_the_action_words(self) -> None:
        """'turn on the light' searches 'on'; 'the' is still dropped."""
        assert search_terms("turn on the light") == ["turn", "on", "light", "turnon", "onlight"]

    @pytest.mark.parametrize(
        ("query", "expected"),
        [
            ("use the switch to turn on the light bulb", "light-on"),
            ("turn off the light", "light-off"),
            ("turn on the led", "led-on"),
            ("turn the led off", "led-off"),
            ("put the box down", "box-down"),
            ("pick the box up", "box-up"),
        ],
    )
    def test_opposite_actions_rank_the_right_one_first(
        self, lexical: ProcessService, query: str, expected: str
    ) -> None:
        """Issue 11's regression: the turn-off process no longer wins 'turn on'."""
        lexical.save(make_doc("light-on", "Turn on the light", "Flip the switch on.\n"))
        lexical.save(make_doc("light-off", "Turn off the light", "Flip the switch off.\n"))
        lexical.save(make_doc("led-on", "Turn on the status led", "Press the led button on.\n"))
        lexical.save(make_doc("led-off", "Turn off the status led", "Press the led off.\n"))
        lexical.save(make_doc("box-up", "Pick up the box", "Lift the box up.\n"))
        lexical.save(make_doc("box-down", "Put down the box", "Lower the box down.\n"))
        assert ids(lexical.find(query, k=2))[0] == expected


class TestTypoRepair:
    @pytest.fixture
    def docs(self, lexical: ProcessService) -> ProcessService:
        lexical.save(
            make_doc(
                "fetch-package-mailroom",
                "Fetch a package from the mailroom",
                "Go to the mailroom and ask for the package.\n",
            )
        )
        lexical.save(make_doc("water-plants", "Water the office plants", "Fill the can.\n"))
        lexical.save(make_doc("deliver-coffee", "Deliver a coffee", "Brew and carry it.\n"))
        return lexical

    def test_misspelt_words_find_the_process(self, docs: ProcessService) -> None:
        """Issue 11's example: 'pakage waiting at mailrom - pick up'."""
        assert ids(docs.find("pakage waiting at mailrom - pick up"))[:1] == [
            "fetch-package-mailroom"
        ]
        assert ids(docs.find("bring a cofee"))[:1] == ["deliver-coffee"]
        assert ids(docs.find("water the plnats"))[:1] == ["water-plants"]

    def test_repaired_terms_weigh_less_than_exact_ones(self, docs: ProcessService) -> None:
        """A repaired match scores below the same match spelt right."""
        exact = docs.find("mailroom")[0]
        repaired = docs.find("mailrom")[0]
        assert repaired.doc.id == exact.doc.id
        assert 0 < repaired.bm25 < exact.bm25

    def test_words_in_the_index_and_short_words_are_not_repaired(
        self, docs: ProcessService
    ) -> None:
        """Known words (as stems too) and words under 4 letters are left alone."""
        assert repair(docs, ["packages", "mailroom", "zebra"]) == []  # 'zebra': no neighbour
        # The stem of 'package', searched as itself; 'coffe' spelt so that it stems back.
        assert repair(docs, ["pakage"]) == [Repair("packag", "packag")]
        assert repair(docs, ["cofee"]) == [Repair("coffe", "coffee")]
        assert repair(docs, ["pak"]) == []

    def test_repair_is_bounded_per_query(self, docs: ProcessService) -> None:
        """At most MAX_REPAIRED_WORDS absent words are looked at."""
        words = [f"zzz{chr(97 + i)}xq" for i in range(MAX_REPAIRED_WORDS)] + ["pakage"]
        assert repair(docs, words) == []

    def test_the_vocabulary_follows_writes(self, docs: ProcessService) -> None:
        """A word saved after the vocabulary was read is known at the next search."""
        assert docs.find("forklfit") == []
        docs.save(make_doc("forklift", "Park the forklift", "Drive it to bay 2.\n"))
        assert ids(docs.find("forklfit")) == ["forklift"]


class TestVectors:
    def test_blob_round_trip_and_refusals(self) -> None:
        """float32 little-endian; a blob of the wrong size or with NaN reads as None."""
        vector = normalise(np.arange(8, dtype=np.float32))[0]
        assert np.array_equal(from_blob(to_blob(vector), 8), vector)
        assert from_blob(to_blob(vector), 4) is None
        assert from_blob(np.full(4, np.nan, dtype="<f4").tobytes(), 4) is None

    def test_index_scores_the_better_vector_and_preselects_visibility(self) -> None:
        """score() takes max(head, doc) cosine and only the robots' plus shared rows."""
        index = VectorIndex(2)
        east, north = np.array([1.0, 0.0], np.float32), np.array([0.0, 1.0], np.float32)
        index.put(1, east, north, "rap-1", False)
        index.put(2, north, north, "rap-2", False)
        index.put(3, north, east, "rap-3", True)
        rowids, cosines, low, high = index.score(east, None, 10)
        assert rowids.tolist()[:2] == [1, 3]
        assert cosines.tolist()[:2] == [1.0, 1.0]
        assert (low, high) == (0.0, 1.0)
        assert sorted(index.score(east, ["rap-2"], 10)[0].tolist()) == [2, 3]
        index.remove(3)
        assert sorted(index.score(east, [], 10)[0].tolist()) == []
        for i in range(100):  # growth and slot reuse
            index.put(10 + i, east, east, "rap-1", False)
        assert len(index) == 102

    def test_save_writes_vectors_in_the_row_transaction(self, hybrid: ProcessService) -> None:
        """Each save stores both vectors with the model's name and dimension."""
        hybrid.save(make_doc("a", "Open the door"))
        [(model, dim, head, doc, _)] = vector_rows(hybrid)
        assert (model, dim) == ("hashing-64", 64)
        assert head == doc == 64

    def test_delete_and_notes_keep_vectors_in_step(self, hybrid: ProcessService) -> None:
        """delete drops the vectors; an outcome note re-embeds the whole document."""
        hybrid.save(make_doc("a", "Open the door"))
        [before] = vector_rows(hybrid)
        hybrid.record_outcome("a", False, "the forklift blocked the corridor")
        [after] = vector_rows(hybrid)
        assert before[4] != after[4]
        assert hybrid.delete("a")
        assert vector_rows(hybrid) == []
        assert hybrid.find("door") == []

    def test_a_model_change_re_embeds_instead_of_comparing(self, sqlite_backend: Any) -> None:
        """Vectors of another model or dimension are recomputed at open."""
        first = sqlite_backend.open(embedder=HashingEmbedder(64))
        first.save(make_doc("a", "Open the door"))
        first.save(make_doc("b", "Close the window"))
        first.close()
        second = sqlite_backend.open(embedder=HashingEmbedder(32))
        rows = vector_rows(second)
        assert {(r[0], r[1]) for r in rows} == {("hashing-32", 32)}
        assert len(rows) == 2
        assert ids(second.find("door", k=1)) == ["a"]

    def test_a_lexical_write_drops_stale_vectors(self, sqlite_backend: Any) -> None:
        """An update made without an embedder leaves no stale vector; the next hybrid open
        embeds it again."""
        sqlite_backend.open(embedder=HashingEmbedder()).close()
        store = sqlite_backend.open(embedder=HashingEmbedder())
        store.save(make_doc("a", "Open the door"))
        store.close()
        plain = sqlite_backend.open()
        plain.save(make_doc("a", "Close the window"))
        assert vector_rows(plain) == []
        plain.close()
        again = sqlite_backend.open(embedder=HashingEmbedder())
        assert len(vector_rows(again)) == 1
        assert ids(again.find("window")) == ["a"]

    def test_reindex_recomputes_the_vectors(self, hybrid: ProcessService) -> None:
        """reindex() rebuilds the index and every document's vectors."""
        for i in range(3):
            hybrid.save(make_doc(f"p-{i}", f"Process {i}"))
        drop_vectors(hybrid)
        assert hybrid.reindex() == 3
        assert len(vector_rows(hybrid)) == 3


class TestHybrid:
    def test_results_carry_the_components(self, hybrid: ProcessService) -> None:
        """bm25, semantic, reliability; score = fused (<= 1) x reliability."""
        hybrid.save(make_doc("a", "Open the door", success_count=3, failure_count=1))
        hybrid.save(make_doc("b", "Close the window"))
        (hit, *_) = hybrid.find("open the door")
        assert hit.doc.id == "a"
        assert hit.bm25 > 0
        assert hit.semantic is not None
        assert hit.semantic > 0.5
        assert hit.reliability == pytest.approx(4 / 6)
        assert 0 < hit.score <= hit.reliability

    def test_a_semantic_match_without_shared_words_is_found(self, sqlite_backend: Any) -> None:
        """A document no query word matches is returned on its cosine alone."""
        # An embedder that knows 'cappuccino' and 'coffee' mean the same.
        synonyms = {"cappuccino": "coffee", "workstation": "desk"}

        def encode(texts: list[str]) -> np.ndarray:
            canon = [" ".join(synonyms.get(w, w) for w in t.lower().split()) for t in texts]
            return HashingEmbedder(64).embed(canon)

        store = sqlite_backend.open(embedder=FunctionEmbedder("synonyms", 64, encode))
        store.save(make_doc("coffee", "Coffee to desk", "Brew coffee.\n"))
        store.save(make_doc("plants", "Water plants", "Fill the can.\n"))
        found = store.find("cappuccino workstation")
        assert ids(found) == ["coffee"]
        assert found[0].bm25 == 0

    def test_nothing_relevant_finds_nothing(self, hybrid: ProcessService) -> None:
        """Stopwords only, or words near nothing stored: no results, as lexical."""
        hybrid.save(make_doc("a", "Open the door"))
        assert hybrid.find("please the") == []
        assert hybrid.find("zebra quantum") == []

    def test_semantic_path_never_widens_visibility(self, hybrid: ProcessService) -> None:
        """A scoped search never returns another robot's document, even one the vector
        index holds under a stale (visible) robot."""
        hybrid.save(make_doc("mine", "Open the gate", robot="rap-1"))
        hybrid.save(make_doc("theirs", "Open the gate now", robot="rap-2"))
        hybrid.save(make_doc("fleet", "Open the gate please", robot="rap-3", shared=True))
        assert sorted(ids(hybrid.find("open gate", k=10, robots=["rap-1"]))) == ["fleet", "mine"]
        assert ids(hybrid.find("open gate", k=10, robots=[])) == ["fleet"]
        # Corrupt the in-memory owner of 'theirs' as if a move had not reached it yet.
        row = hybrid.repo.store.query_one("SELECT rowid FROM processes WHERE id = 'theirs'")
        assert row is not None
        vectors = hybrid.repo.vector_index
        assert vectors is not None
        head = hybrid.embedder.embed(["Open the gate now"])[0]  # type: ignore[union-attr]
        vectors.put(int(row[0]), head, head, "rap-1", True)
        assert "theirs" not in ids(hybrid.find("gate now", k=10, robots=["rap-1"]))

    def test_hybrid_and_lexical_return_the_same_ids_when_all_match(
        self, hybrid: ProcessService
    ) -> None:
        """The reliability and k rules hold: k clamped, damaged rows left out."""
        for i in range(60):
            hybrid.save(make_doc(f"p-{i}", "Stack boxes", f"Stack box {i}.\n"))
        assert len(hybrid.find("stack boxes", k=0)) == 1
        assert len(hybrid.find("stack boxes", k=10_000)) == 50


class TestDefaultModel:
    def test_loads_from_the_wheel_without_any_network(
        self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
    ) -> None:
        """The default embedder loads and embeds with sockets and the hub disabled."""
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.cache to fall back on

        def refuse(*args, **kwargs):
            raise OSError("network access attempted")

        monkeypatch.setattr(socket.socket, "connect", refuse)
        monkeypatch.setattr(socket, "create_connection", refuse)
        monkeypatch.setattr(socket, "getaddrinfo", refuse)
        embedder = load_default_embedder()
        assert (embedder.name, embedder.dim) == (DEFAULT_MODEL, 256)
        vectors = embedder.embed(["turn on the light", "turn on the lamp", "file a tax return"])
        assert vectors.shape == (3, 256)
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
        assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
        assert not list(tmp_path.iterdir())  # nothing cached or downloaded

    def test_missing_package_is_embedder_unavailable(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without wordllama the loader says so in one sentence."""
        monkeypatch.setitem(sys.modules, "wordllama", None)
        with pytest.raises(EmbedderUnavailable, match="not installed"):
            load_default_embedder()


def doc_md(id: str, title: str) -> str:
    return f"---\nid: {id}\ntitle: {title}\n---\n\n## Steps\n1. go\n"


async def find(settings: Settings, query: str) -> dict:
    async with create_connected_server_and_client_session(build_server(settings)) as client:
        await client.call_tool(
            "save_process", {"markdown": doc_md("light-on", "Turn on the light")}
        )
        await client.call_tool(
            "save_process", {"markdown": doc_md("light-off", "Turn off the light")}
        )
        result = await client.call_tool("find_processes", {"query": query})
    return json.loads(result.content[0].text)  # type: ignore[union-attr]


class TestServerModes:
    @pytest.fixture(autouse=True)
    def _fresh_model_cache(self) -> Iterator[None]:
        services.default_embedder.cache_clear()
        yield
        services.default_embedder.cache_clear()

    async def test_hybrid_is_the_default(self, tmp_path: Path) -> None:
        """A default server answers with a semantic component, the right process first."""
        settings = Settings(data_dir=tmp_path)
        assert settings.search is SearchMode.HYBRID
        out = await find(settings, "switch the light on")
        assert out["processes"][0]["id"] == "light-on"
        assert out["processes"][0]["semantic"] is not None

    async def test_lexical_mode_never_loads_the_model(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """MEMORY_SEARCH=lexical: semantic is null, score = bm25 x reliability."""

        def boom() -> None:
            raise AssertionError("the model was loaded in lexical mode")

        monkeypatch.setattr(services, "load_default_embedder", boom)
        out = await find(Settings(data_dir=tmp_path, search="lexical"), "turn on the light")
        first = out["processes"][0]
        assert first["id"] == "light-on"
        assert first["semantic"] is None
        assert first["score"] == pytest.approx(first["bm25"] * first["reliability"])

    async def test_missing_model_is_said_once_and_search_stays_lexical(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capture_logs
    ) -> None:
        """No wordllama: one search_lexical_only warning for two servers, lexical answers."""
        monkeypatch.setitem(sys.modules, "wordllama", None)
        with capture_logs() as logs:
            out = await find(Settings(data_dir=tmp_path), "turn on the light")
            again = await find(Settings(data_dir=tmp_path / "b"), "turn off the light")
        assert out["processes"][0]["id"] == "light-on"
        assert out["processes"][0]["semantic"] is None
        assert again["processes"][0]["id"] == "light-off"
        warnings = [e for e in logs if e["event"] == "search_lexical_only"]
        assert len(warnings) == 2  # one per server start, none per call
        assert "not installed" in warnings[0]["reason"]
        assert sum(1 for e in logs if e.get("tool") == "find_processes") == 2

    def test_memory_search_setting(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """MEMORY_SEARCH accepts hybrid|lexical in any case; anything else names itself."""
        for name in list(os.environ):
            if name.startswith(("MEMORY_", "MCP_")):
                monkeypatch.delenv(name)
        monkeypatch.setenv("MEMORY_SEARCH", " LEXICAL ")
        assert load_settings().search is SearchMode.LEXICAL
        monkeypatch.setenv("MEMORY_SEARCH", "semantic")
        with pytest.raises(SettingsError, match="MEMORY_SEARCH"):
            load_settings()


class TestReliabilityIsOneFormula:
    @pytest.mark.parametrize(
        ("successes", "failures"), [(0, 0), (1, 0), (0, 1), (3, 1), (7, 19), (2**31 - 1, 5)]
    )
    def test_sql_agrees_with_the_kit_function(self, successes: int, failures: int) -> None:
        """The SQL RELIABILITY_SQL computes what robot_mcp_kit.reliability does, and so does
        ProcessDoc.reliability."""
        conn = sqlite3.connect(":memory:")
        try:
            (got,) = conn.execute(
                f"SELECT {RELIABILITY_SQL} FROM (SELECT ? AS success_count, "  # noqa: S608
                "? AS failure_count) AS p",
                (successes, failures),
            ).fetchone()
        finally:
            conn.close()
        assert got == pytest.approx(reliability(successes, failures), rel=1e-12)
        doc = ProcessDoc(
            id="x", title="x", body="x", success_count=successes, failure_count=failures
        )
        assert doc.reliability == reliability(successes, failures)
