"""ProcessService: documents as rows, search, outcomes, collisions (memory spec §4, §5, §7)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robot_mcp_memory._exceptions import DocTooLarge
from robot_mcp_memory._limits import MAX_K, MAX_QUERY_BYTES
from robot_mcp_memory.processes import ProcessDoc, ProcessService, truncate_query
from robot_mcp_memory.processes._rules import append_outcome
from robot_mcp_memory.processes._words import MAX_TERMS, search_terms

MAILROOM = (Path(__file__).resolve().parents[4] / "examples" / "mailroom.md").read_text(
    encoding="utf-8"
)

# Documents that share only function words and filler with the mailroom queries.
DISTRACTORS = [
    (
        "water-plants",
        "Water the plants",
        "Please fill the can from the tap and water me the ferns.",
    ),
    ("charge-battery", "Charge the battery", "Go to the dock. Please wait there until full."),
    ("wipe-table", "Wipe the table", "Take the cloth from the kitchen and wipe the table."),
    (
        "greet-visitor",
        "Greet a visitor",
        "Say hello to the visitor at the door, then lead them in.",
    ),
]


class Clock:
    """A settable clock, advanced by hand."""

    def __init__(self) -> None:
        self.now = datetime(2026, 7, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float = 60) -> None:
        self.now += timedelta(seconds=seconds)


def make_doc(
    id: str, title: str = "A process", body: str = "## Steps\n1. do it\n", **fields
) -> ProcessDoc:
    return ProcessDoc(id=id, title=title, body=body, **fields)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(sqlite_backend: Any, clock: Clock) -> ProcessService:
    """The store under test."""
    store: ProcessService = sqlite_backend.open(robot_id="g1-test", clock=clock)
    return store


@pytest.fixture
def sqlite_store(tmp_path: Path, clock: Clock, sqlite_processes: Any) -> ProcessService:
    """For what only SQLite has: its files, its fts5 table, its hot-writer thread."""
    processes: ProcessService = sqlite_processes(tmp_path, robot_id="g1-test", clock=clock)
    return processes


@pytest.fixture
def settle(sqlite_backend: Any) -> Any:
    """Wait for the hot counters' queued writes."""
    return sqlite_backend.settle


@pytest.fixture
def mailroom(store: ProcessService) -> ProcessDoc:
    for id, title, body in DISTRACTORS:
        store.save(make_doc(id, title, body))
    return store.save(ProcessDoc.parse(MAILROOM)).doc


class TestSave:
    def test_save_then_get_returns_the_document(self, store: ProcessService, clock: Clock) -> None:
        """A new document is stored with its counters and created; updated is now."""
        saved = store.save(ProcessDoc.parse(MAILROOM))
        assert saved.created is True
        assert saved.renamed_from is None
        got = store.get("fetch-package-mailroom")
        assert got == saved.doc
        assert got is not None
        assert (got.success_count, got.failure_count) == (3, 1)
        assert got.created == datetime(2026, 6, 12, 14, 0, tzinfo=UTC)
        assert got.updated == clock.now
        assert got.body == ProcessDoc.parse(MAILROOM).body

    def test_stored_row_renders_and_parses_back(self, store: ProcessService) -> None:
        """A stored row rendered as markdown parses back to the stored document."""
        saved = store.save(ProcessDoc.parse(MAILROOM))
        got = store.get("fetch-package-mailroom")
        assert got is not None
        assert ProcessDoc.parse(got.render()) == saved.doc
        assert store.get("nope") is None

    def test_unknown_robot_becomes_the_store_robot(self, store: ProcessService) -> None:
        """robot: unknown is provenance-stamped with the store's robot_id; a named robot is kept."""
        assert store.save(make_doc("a")).doc.robot == "g1-test"
        assert store.save(make_doc("b", robot="rap-1")).doc.robot == "rap-1"

    def test_new_document_without_created_gets_now(
        self, store: ProcessService, clock: Clock
    ) -> None:
        """created defaults to the save time."""
        assert store.save(make_doc("a")).doc.created == clock.now

    def test_body_is_in_the_column_and_no_markdown_reaches_disk(
        self, tmp_path: Path, sqlite_store: ProcessService
    ) -> None:
        """The row holds the body; the data directory holds only the database and its WAL files."""
        store = sqlite_store
        store.save(ProcessDoc.parse(MAILROOM))
        store.record_outcome("fetch-package-mailroom", True, "fine")
        store.save(make_doc("other"))
        store.delete("other")
        store.reindex()
        row = store.repo.store.query_one(
            "SELECT body FROM processes WHERE id = 'fetch-package-mailroom'"
        )
        assert row is not None
        assert row["body"].startswith("## Steps\n1. navigation.navigate_to(mailroom)")
        files = {p.name for p in tmp_path.rglob("*")}
        assert files <= {"index.db", "index.db-wal", "index.db-shm"}
        assert "index.db" in files
        assert not list(tmp_path.rglob("*.md"))

    def test_size_is_judged_on_what_was_sent_not_on_the_rendering(
        self, store: ProcessService
    ) -> None:
        """A body under 256 KiB is stored even if its rendering is a little longer (issue 9);
        a body over the limit is DocTooLarge quoting its own size, and nothing is stored."""
        body = "x" * (256 * 1024 - 10)
        assert store.save(make_doc("big", body=body)).doc.id == "big"
        sent = "---\nid: bigger\ntitle: Big\n---\n\n" + "y" * (256 * 1024)
        with pytest.raises(DocTooLarge) as info:
            ProcessDoc.parse(sent)
        assert info.value.size == len(sent.encode())
        assert store.count() == 1


class TestCollisions:
    def test_same_mission_updates_and_keeps_counters(
        self, store: ProcessService, clock: Clock, settle: Any
    ) -> None:
        """Same id and mission: content replaced, counters and created kept, updated bumped."""
        first = store.save(ProcessDoc.parse(MAILROOM)).doc
        store.record_outcome(first.id, True)
        settle(store)
        used = store.get(first.id).last_used
        clock.advance(3600)
        revised = ProcessDoc.parse(MAILROOM).model_copy(
            update={
                "title": "Fetch a parcel from the mailroom",
                "success_count": 0,
                "failure_count": 0,
            }
        )
        saved = store.save(revised)
        assert saved.created is False
        assert saved.renamed_from is None
        doc = saved.doc
        assert doc.title == "Fetch a parcel from the mailroom"
        assert (doc.success_count, doc.failure_count) == (4, 1)
        assert doc.created == first.created
        assert doc.last_used == used
        assert doc.updated == clock.now
        assert doc.updated > first.updated
        assert store.count() == 1

    def test_missing_mission_on_either_side_updates(self, store: ProcessService) -> None:
        """A document without source_mission_id updates in place, keeping the stored one."""
        store.save(make_doc("a", source_mission_id="m-1"))
        saved = store.save(make_doc("a", title="New title"))
        assert saved.created is False
        assert saved.doc.title == "New title"
        assert saved.doc.source_mission_id == "m-1"
        store.save(make_doc("b"))
        assert store.save(make_doc("b", source_mission_id="m-2")).created is False
        assert store.count() == 2

    def test_different_mission_suffixes_then_updates_the_suffixed(
        self, store: ProcessService
    ) -> None:
        """Other missions go to id-2, then id-3; a re-save from mission 2 updates id-2."""
        store.save(make_doc("a", source_mission_id="m-1"))
        second = store.save(make_doc("a", title="Second", source_mission_id="m-2"))
        assert (second.doc.id, second.created, second.renamed_from) == ("a-2", True, "a")
        third = store.save(make_doc("a", title="Third", source_mission_id="m-3"))
        assert (third.doc.id, third.created, third.renamed_from) == ("a-3", True, "a")
        again = store.save(make_doc("a", title="Second, revised", source_mission_id="m-2"))
        assert (again.doc.id, again.created, again.renamed_from) == ("a-2", False, "a")
        assert store.get("a-2").title == "Second, revised"
        assert store.get("a").title == "A process"
        assert store.count() == 3

    def test_suffix_keeps_the_id_within_its_length(self, store: ProcessService) -> None:
        """A 100-character id is shortened to make room for its suffix."""
        long_id = "a" * 100
        store.save(make_doc(long_id, source_mission_id="m-1"))
        saved = store.save(make_doc(long_id, source_mission_id="m-2"))
        assert saved.doc.id == "a" * 98 + "-2"

    def test_save_leaves_concurrent_counter_increments_alone(
        self, store: ProcessService, settle: Any
    ) -> None:
        """Saves interleaved with queued increments never overwrite the counters."""
        store.save(make_doc("a", source_mission_id="m-1"))
        for i in range(50):
            store.record_outcome("a", i % 2 == 0)
            store.save(make_doc("a", title=f"rev {i}", source_mission_id="m-1", success_count=99))
        settle(store)
        doc = store.get("a")
        assert (doc.success_count, doc.failure_count) == (25, 25)


class TestFind:
    @pytest.mark.parametrize(
        "query",
        [
            "get me a parcel from the mail room",
            "bring me the parcel from the mail room",
            "Please fetch my package from the mailroom!",
            "parcels",
        ],
    )
    def test_phrasing_variants_find_the_mailroom_process(
        self, store: ProcessService, mailroom: ProcessDoc, query: str
    ) -> None:
        """Different phrasings of the same task rank fetch-package-mailroom first."""
        found = store.find(query, k=3)
        assert found
        assert found[0].doc.id == "fetch-package-mailroom"
        assert found[0].doc == store.get("fetch-package-mailroom")

    def test_documents_sharing_only_stopwords_are_not_returned(
        self, store: ProcessService, mailroom: ProcessDoc
    ) -> None:
        """'the', 'from', 'me', 'please' alone never make a match; k is not filled with them."""
        found = store.find("please bring me the parcel from the mail room", k=5)
        assert [f.doc.id for f in found] == ["fetch-package-mailroom"]

    @pytest.mark.parametrize("query", ["the", "please", "the please from me a", "", "   ", "?!"])
    def test_query_of_only_stopwords_finds_nothing(
        self, store: ProcessService, mailroom: ProcessDoc, query: str
    ) -> None:
        """No words left after the stopwords: no results."""
        assert store.find(query) == []

    def test_result_fields_are_consistent(
        self, store: ProcessService, mailroom: ProcessDoc
    ) -> None:
        """bm25 is positive, reliability is Laplace-smoothed, score is their product."""
        (hit,) = store.find("mailroom parcel", k=1)
        assert hit.bm25 > 0
        assert hit.reliability == pytest.approx((3 + 1) / (3 + 1 + 2))
        assert hit.score == pytest.approx(hit.bm25 * hit.reliability)

    def test_reliability_reranks_equal_text(self, store: ProcessService) -> None:
        """A 0/5 process ranks below a 5/0 one with the same text."""
        text = {"title": "Deliver mail to the office", "body": "Carry the letters to room 12.\n"}
        store.save(make_doc("flaky", success_count=0, failure_count=5, **text))
        store.save(make_doc("solid", success_count=5, failure_count=0, **text))
        found = store.find("deliver letters office", k=2)
        assert [f.doc.id for f in found] == ["solid", "flaky"]
        assert found[0].bm25 == pytest.approx(found[1].bm25)
        assert found[0].reliability == pytest.approx(6 / 7)
        assert found[1].reliability == pytest.approx(1 / 7)

    def test_ranking_is_by_score_over_all_matches(self, store: ProcessService) -> None:
        """The top result is the best score among all matches, not among a bm25 top-k."""
        for i in range(30):
            store.save(
                make_doc(f"filler-{i}", title=f"Unrelated chore {i}", body=f"Sort bin {i}.\n")
            )
        for i in range(3):
            store.save(
                make_doc(
                    f"strong-{i}",
                    title="Refill the coffee machine",
                    body="Refill coffee beans. Coffee machine coffee refill.\n",
                    success_count=0,
                    failure_count=40,
                )
            )
        store.save(
            make_doc(
                "weak-reliable",
                title="Kitchen duties",
                body="Check the coffee machine.\n",
                success_count=40,
                failure_count=0,
            )
        )
        everything = store.find("refill coffee machine", k=MAX_K)
        by_bm25 = sorted(everything, key=lambda f: f.bm25, reverse=True)
        assert by_bm25[0].doc.id.startswith("strong-")
        assert [f.score for f in everything] == sorted((f.score for f in everything), reverse=True)
        assert store.find("refill coffee machine", k=1)[0].doc.id == "weak-reliable"

    def test_k_is_clamped(self, store: ProcessService) -> None:
        """k below 1 returns one result; k above 50 returns at most 50."""
        for i in range(MAX_K + 5):
            store.save(make_doc(f"p-{i}", title="Stack boxes", body=f"Stack box {i}.\n"))
        assert len(store.find("stack boxes", k=0)) == 1
        assert len(store.find("stack boxes", k=10_000)) == MAX_K

    def test_robots_scope_filters_in_sql(self, store: ProcessService) -> None:
        """robots= limits results to those robots' documents plus shared ones."""
        store.save(make_doc("mine", title="Open the gate", robot="rap-1"))
        store.save(make_doc("theirs", title="Open the gate", robot="rap-2"))
        store.save(make_doc("fleet", title="Open the gate", robot="rap-3", shared=True))
        ids = lambda robots: sorted(f.doc.id for f in store.find("gate", k=10, robots=robots))  # noqa: E731
        assert ids(None) == ["fleet", "mine", "theirs"]
        assert ids(["rap-1"]) == ["fleet", "mine"]
        assert ids([]) == ["fleet"]
        assert sorted(d.id for d in store.list(robots=["rap-2"])) == ["fleet", "theirs"]
        assert store.count(robots=["rap-1"]) == 2
        assert store.count() == 3

    def test_note_text_is_searchable(self, store: ProcessService, mailroom: ProcessDoc) -> None:
        """The Outcome log is part of the indexed body."""
        store.record_outcome(mailroom.id, False, "the forklift blocked the corridor")
        assert [f.doc.id for f in store.find("forklift", k=3)] == [mailroom.id]


NASTY_QUERIES = [
    '"',
    '"""',
    "*",
    "parcel*",
    "(",
    ")",
    "(mail OR room",
    "NEAR(mail room, 2)",
    "mail NEAR room",
    "AND",
    "OR",
    "NOT",
    "mail AND NOT room",
    "-parcel",
    "^parcel",
    "title:parcel",
    "body : x",
    "{title body}: parcel",
    "mail\x00room\x07\x1b[31m",
    "📦📦 parcel 🚚",
    "👨‍👩‍👧",
    "parcel\u202e\u200b\ufeff",
    "'; DROP TABLE processes; --",
    "\\",
    "+ - / % $ # @ ! ~ ` |",
    "ｆｅｔｃｈ　ｐａｒｃｅｌ",  # fullwidth: NFKC turns it into "fetch parcel"
]


class TestSanitization:
    @pytest.mark.parametrize("query", NASTY_QUERIES)
    def test_operator_laden_queries_never_raise(
        self, store: ProcessService, mailroom: ProcessDoc, query: str
    ) -> None:
        """FTS5 syntax in a query is inert: no exception, at most results."""
        found = store.find(query, k=3)
        assert all(f.score > 0 for f in found)

    def test_fullwidth_query_is_normalised(
        self, store: ProcessService, mailroom: ProcessDoc
    ) -> None:
        """NFKC maps fullwidth letters to ASCII, so the query still matches."""
        assert store.find("ｆｅｔｃｈ　ｐａｒｃｅｌ")[0].doc.id == mailroom.id

    def test_two_kib_of_junk_is_accepted(self, store: ProcessService, mailroom: ProcessDoc) -> None:
        """Exactly 2 KiB of operators and words runs, and so does any longer query."""
        junk = ('"(NEAR* AND) OR -^: parcel ' * 100)[:MAX_QUERY_BYTES]
        assert len(junk.encode()) == MAX_QUERY_BYTES
        assert store.find(junk)[0].doc.id == mailroom.id
        assert store.find(junk * 50)[0].doc.id == mailroom.id

    def test_a_long_query_is_searched_by_its_first_2_kib(
        self, store: ProcessService, mailroom: ProcessDoc
    ) -> None:
        """Words past the first 2 KiB are not searched; truncate_query says it cut."""
        filler = "x " * MAX_QUERY_BYTES
        assert store.find(filler + "parcel") == []
        assert store.find("parcel " + filler)[0].doc.id == mailroom.id
        assert truncate_query("parcel") == ("parcel", False)
        cut, truncated = truncate_query("é" * MAX_QUERY_BYTES)
        assert truncated
        assert cut == "é" * (MAX_QUERY_BYTES // 2)  # never splits a character

    def test_terms_are_capped(self) -> None:
        """A long query searches at most MAX_TERMS terms, single words first."""
        words = [f"word{i}" for i in range(100)]
        terms = search_terms(" ".join(words))
        assert len(terms) == MAX_TERMS
        assert terms == words[:MAX_TERMS]

    def test_terms_drop_stopwords_and_join_neighbours(self) -> None:
        """Function words go; 'mail room' is also tried as 'mailroom'."""
        assert search_terms("Get me a parcel from the Mail Room") == [
            "get",
            "parcel",
            "mail",
            "room",
            "getparcel",
            "parcelmail",
            "mailroom",
        ]

    @settings(
        max_examples=150,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )
    @given(query=st.text(max_size=2100))
    def test_arbitrary_text_never_raises(
        self, store: ProcessService, mailroom: ProcessDoc, query: str
    ) -> None:
        """Any text, of any length and with lone surrogates, finds a list of at most k."""
        assert len(store.find(query, k=3)) <= 3


class TestOutcomes:
    def test_record_outcome_updates_the_row_after_flush(
        self, store: ProcessService, mailroom: ProcessDoc, clock: Clock, settle: Any
    ) -> None:
        """A success and a failure bump their counters and last_used once written."""
        clock.advance(10)
        predicted = store.record_outcome(mailroom.id, True)
        assert predicted is not None
        assert (predicted.success_count, predicted.failure_count) == (4, 1)
        assert predicted.last_used == clock.now
        store.record_outcome(mailroom.id, False)
        settle(store)
        doc = store.get(mailroom.id)
        assert (doc.success_count, doc.failure_count) == (4, 2)
        assert doc.last_used == clock.now
        assert doc.updated == mailroom.updated

    def test_record_outcome_unknown_id_is_none(self, store: ProcessService, settle: Any) -> None:
        """An unknown id records nothing."""
        assert store.record_outcome("nope", True, "note") is None
        settle(store)
        assert store.count() == 0
        assert store.repo.store.stats.enqueued == 0

    def test_outcome_survives_reindex(self, store: ProcessService, mailroom: ProcessDoc) -> None:
        """Counters and notes live on the row, so a rebuilt index changes nothing."""
        store.record_outcome(mailroom.id, True, "went fine")
        assert store.reindex() == store.count() == len(DISTRACTORS) + 1
        doc = store.get(mailroom.id)
        assert doc.success_count == 4
        assert "went fine" in doc.body
        assert store.find("bring me the parcel")[0].doc == doc

    def test_note_lands_under_outcome_log(
        self, store: ProcessService, mailroom: ProcessDoc, clock: Clock
    ) -> None:
        """The first note creates '## Outcome log' at the end; later ones append to it."""
        store.record_outcome(mailroom.id, True, "door was open")
        clock.advance(60)
        returned = store.record_outcome(mailroom.id, False, "door closed\nafter 18:00")
        body = store.get(mailroom.id).body
        assert returned.body == body
        assert body.endswith(
            "## Outcome log\n"
            "- 2026-07-01T12:00:00.000Z success: door was open\n"
            "- 2026-07-01T12:01:00.000Z failure: door closed after 18:00\n"
        )
        assert body.count("## Outcome log") == 1

    def test_empty_note_changes_no_body(self, store: ProcessService, mailroom: ProcessDoc) -> None:
        """A blank note is not logged."""
        store.record_outcome(mailroom.id, True, "   ")
        assert store.get(mailroom.id).body == mailroom.body

    def test_append_outcome_inserts_inside_an_existing_section(self) -> None:
        """A line goes to the end of the Outcome log section, before the next section."""
        body = "## Steps\n1. x\n\n## Outcome log\n- old\n\n## Operator notes\n- n\n"
        assert append_outcome(body, "- new") == (
            "## Steps\n1. x\n\n## Outcome log\n- old\n- new\n\n## Operator notes\n- n\n"
        )
        assert append_outcome("## Steps\n1. x\n", "- new") == (
            "## Steps\n1. x\n\n## Outcome log\n- new\n"
        )

    def test_hot_counter_off_thread_and_save_on_thread(self, sqlite_store: ProcessService) -> None:
        """sqlite's trace shows the counter UPDATE on the writer thread, the save on ours."""
        store = sqlite_store
        store.save(make_doc("a"))
        seen: list[tuple[int, str]] = []
        store.repo.store.set_trace_callback(lambda sql: seen.append((threading.get_ident(), sql)))
        try:
            store.save(make_doc("a", title="again"))
            store.record_outcome("a", True)
            store.repo.store.flush()
        finally:
            store.repo.store.set_trace_callback(None)
        me = threading.get_ident()
        saves = [
            tid
            for tid, sql in seen
            if sql.lstrip().upper().startswith("UPDATE PROCESSES SET TITLE")
        ]
        counters = [tid for tid, sql in seen if "success_count = min(success_count + 1" in sql]
        assert saves == [me]
        assert len(counters) == 1
        assert counters[0] != me


class TestDeleteListReindex:
    def test_delete_removes_row_and_index(
        self, store: ProcessService, mailroom: ProcessDoc
    ) -> None:
        """After delete the document is gone from get, find and the index table."""
        assert store.delete(mailroom.id) is True
        assert store.get(mailroom.id) is None
        assert all(f.doc.id != mailroom.id for f in store.find("parcel mailroom", k=10))
        rows = store.repo.store.query(
            "SELECT count(*) FROM processes_fts WHERE id = ?", (mailroom.id,)
        )
        assert rows[0][0] == 0
        assert store.delete(mailroom.id) is False

    def test_reindex_counts_rows_and_rebuilds(self, sqlite_store: ProcessService) -> None:
        """reindex returns the row count and leaves one index entry per row."""
        store = sqlite_store
        for id, title, body in DISTRACTORS:
            store.save(make_doc(id, title, body))
        mailroom = store.save(ProcessDoc.parse(MAILROOM)).doc
        store.repo.store.execute("DELETE FROM processes_fts")
        assert store.find("parcel") == []
        n = store.reindex()
        assert n == store.count() == len(DISTRACTORS) + 1
        assert store.repo.store.query_one("SELECT count(*) FROM processes_fts")[0] == n
        assert store.find("parcel")[0].doc.id == mailroom.id

    def test_list_pages_by_id(self, store: ProcessService) -> None:
        """list orders by id and honours limit and offset; limit is clamped."""
        for i in range(5):
            store.save(make_doc(f"p-{i}"))
        assert [d.id for d in store.list(limit=2, offset=1)] == ["p-1", "p-2"]
        assert [d.id for d in store.list(limit=0)] == ["p-0"]
        assert len(store.list(limit=10_000, offset=-3)) == 5

    def test_index_entry_follows_its_row_by_rowid(self, sqlite_store: ProcessService) -> None:
        """Each index entry has its row's rowid; an orphan entry is never returned and
        reindex drops it."""
        store = sqlite_store
        store.save(make_doc("a", title="Old words"))
        store.save(make_doc("b", title="Other"))
        pairs = store.repo.store.query(
            "SELECT p.id, f.id FROM processes AS p JOIN processes_fts AS f ON f.rowid = p.rowid"
        )
        assert sorted(tuple(r) for r in pairs) == [("a", "a"), ("b", "b")]
        with store.repo.store.transaction() as conn:
            conn.execute(
                "INSERT INTO processes_fts (rowid, id, title, task_pattern, tags, body) "
                "VALUES (999, 'ghost', 'Old ghost words', '', '[]', 'x')"
            )
        store.save(make_doc("a", title="New words"))
        assert [f.doc.id for f in store.find("words", k=5)] == ["a"]
        assert store.find("ghost") == []
        assert store.reindex() == 2
        assert store.repo.store.query_one("SELECT count(*) FROM processes_fts")[0] == 2
