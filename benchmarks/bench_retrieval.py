"""Retrieval quality and cost of find: plain bm25, lexical-only and hybrid (issue 11).

    uv run python benchmarks/bench_retrieval.py [--sizes 0,1000,10000] [--repeats 3]
                                                [--sweep]

On the labelled set of ``tests/data/retrieval`` (office-and-lab robot processes, queries
tagged by style) plus 0, 1 000 and 10 000 near-miss distractors from its generator, one
``index.db`` per size is built through ``ProcessService.save`` with the default embedder
(wordllama, offline), and on that same file, in the same run, each query is answered by:

- plain bm25: a raw FTS5 query — every word of the query, quoted and OR-ed, ranked by
  ``bm25(processes_fts)`` with default weights, no stopwords, no reliability;
- lexical: ``ProcessService`` without an embedder (robot-aware words, typo repair, column
  weights; what ``MEMORY_SEARCH=lexical`` serves);
- hybrid: ``ProcessService.find`` with the embedder (the default).

Printed: R@1, R@3 and MRR@10 per method and size; opposite-action queries ranked wrong;
R@1 by style at the largest size; find p50 of hybrid and lexical at the largest size
(interleaved, ``--repeats`` passes over the queries); saves/s with embedding over the
largest build; RSS (VmRSS, VmHWM) with the model loaded and the largest store open.
``--sweep`` also prints hybrid R@1 for semantic weights 0.5..0.9 and for reciprocal-rank
fusion (k=60), the numbers behind decision 0011.

Targets: hybrid R@1 >= lexical + 0.08 at 10 000 distractors; no opposite-action query wrong;
find p50 hybrid <= 1.5 x lexical; saves >= 300 docs/s; RSS <= 300 MiB.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from robot_mcp_memory.backends import storage_at
from robot_mcp_memory.processes import (
    Embedder,
    ProcessDoc,
    ProcessService,
    load_default_embedder,
    match_expression,
)

# The weight sweep sets the ranking module's knob in place: fuse() reads it per query.
_ranking = importlib.import_module("robot_mcp_memory.processes._ranking")

ROOT = Path(__file__).resolve().parents[1]


def load_set() -> Any:
    path = ROOT / "tests" / "data" / "retrieval" / "retrieval_set.py"
    spec = importlib.util.spec_from_file_location("retrieval_set", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["retrieval_set"] = module
    spec.loader.exec_module(module)
    return module


def rss_kib() -> tuple[int, int]:
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def metrics(ranked: Sequence[Sequence[str]], expected: Sequence[str]) -> tuple[float, ...]:
    r1 = r3 = mrr = 0.0
    for ids, want in zip(ranked, expected, strict=True):
        if ids[:1] == [want]:
            r1 += 1
        if want in ids[:3]:
            r3 += 1
        if want in ids[:10]:
            mrr += 1 / (ids.index(want) + 1)
    n = len(expected)
    return r1 / n, r3 / n, mrr / n


def plain_bm25(store: ProcessService) -> Callable[[str], list[str]]:
    import re

    def run(query: str) -> list[str]:
        words = list(dict.fromkeys(re.findall(r"[^\W_]+", query.lower())))
        if not words:
            return []
        rows = store.repo.store.query(
            "SELECT p.id FROM processes_fts JOIN processes AS p ON p.rowid = processes_fts.rowid "
            "WHERE processes_fts MATCH ? ORDER BY bm25(processes_fts) LIMIT 10",
            (match_expression(words),),
        )
        return [str(r[0]) for r in rows]

    return run


def rrf(store: ProcessService, lexical: ProcessService, query: str) -> list[str]:
    """Reciprocal-rank fusion (k=60) of the lexical and semantic rankings, x nothing."""
    assert store.embedder is not None
    assert store.repo.vector_index is not None
    lex = [f.doc.id for f in lexical.find(query, 50)]
    vector = store.embedder.embed([query])[0]
    rowids, _, _, _ = store.repo.vector_index.score(vector, None, 50)
    ids = {
        int(r["rowid"]): str(r["id"])
        for r in store.repo.store.query(
            f"SELECT rowid, id FROM processes WHERE rowid IN ({','.join('?' * len(rowids))})",  # noqa: S608
            tuple(int(r) for r in rowids),
        )
    }
    sem = [ids[int(r)] for r in rowids if int(r) in ids]
    score: dict[str, float] = {}
    for ranking in (lex, sem):
        for rank, id in enumerate(ranking):
            score[id] = score.get(id, 0.0) + 1 / (60 + rank + 1)
    return sorted(score, key=lambda i: -score[i])[:10]


def build(
    data_dir: Path, embedder: Embedder, docs: list[ProcessDoc]
) -> tuple[ProcessService, float]:
    store = ProcessService(
        storage_at(str(data_dir)).open().processes, robot_id="bench", embedder=embedder
    )
    started = time.perf_counter()
    for doc in docs:
        store.save(doc)
    return store, time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="0,1000,10000", help="distractor counts")
    parser.add_argument("--repeats", type=int, default=3, help="timing passes over the queries")
    parser.add_argument("--sweep", action="store_true", help="weights 0.5..0.9 and RRF")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rs = load_set()
    labelled = [ProcessDoc.parse(rs.markdown(d)) for d in rs.processes()]
    queries = rs.queries()
    expected = [q.expected for q in queries]
    embedder = load_default_embedder()
    print(f"labelled set: {len(labelled)} processes, {len(queries)} queries; model {embedder.name}")
    print(
        f"{'distractors':>11}  {'method':<10} {'R@1':>6} {'R@3':>6} {'MRR@10':>7} {'opp.wrong':>9}"
    )
    opposite = [i for i, q in enumerate(queries) if q.style == "opposite"]
    last: dict[str, Any] = {}
    for size in sizes:
        extra = [ProcessDoc(**d) for d in rs.distractors(size)]
        with tempfile.TemporaryDirectory() as tmp:
            # Distractors first, the labelled set last: a labelled document never wins a
            # tie by being older.
            store, build_s = build(Path(tmp), embedder, extra + labelled)
            lexical = ProcessService(store.repo)
            methods: dict[str, Callable[[str], list[str]]] = {
                "bm25": plain_bm25(store),
                "lexical": lambda q: [f.doc.id for f in lexical.find(q, 10)],  # noqa: B023
                "hybrid": lambda q: [f.doc.id for f in store.find(q, 10)],  # noqa: B023
            }
            results: dict[str, list[list[str]]] = {}
            for name, run in methods.items():
                ranked = [run(q.query) for q in queries]
                results[name] = ranked
                r1, r3, mrr = metrics(ranked, expected)
                wrong = sum(1 for i in opposite if ranked[i][:1] != [expected[i]])
                print(f"{size:>11}  {name:<10} {r1:6.3f} {r3:6.3f} {mrr:7.3f} {wrong:>9}")
            if args.sweep:
                for weight in (0.5, 0.6, 0.7, 0.8, 0.9):
                    _ranking.SEMANTIC_WEIGHT = weight
                    ranked = [[f.doc.id for f in store.find(q.query, 10)] for q in queries]
                    r1, r3, mrr = metrics(ranked, expected)
                    print(f"{size:>11}  {'w=' + str(weight):<10} {r1:6.3f} {r3:6.3f} {mrr:7.3f}")
                _ranking.SEMANTIC_WEIGHT = 0.7
                ranked = [rrf(store, lexical, q.query) for q in queries]
                r1, r3, mrr = metrics(ranked, expected)
                print(f"{size:>11}  {'rrf k=60':<10} {r1:6.3f} {r3:6.3f} {mrr:7.3f}")
            if size == sizes[-1]:
                last = {"results": results, "size": size, "saves": len(extra + labelled) / build_s}
                times: dict[str, list[float]] = {"hybrid": [], "lexical": []}
                for rep in range(args.repeats):
                    for i, q in enumerate(queries):
                        order = ("hybrid", "lexical") if (i + rep) % 2 else ("lexical", "hybrid")
                        for name in order:
                            finder = store if name == "hybrid" else lexical
                            started = time.perf_counter()
                            finder.find(q.query, 3)
                            times[name].append((time.perf_counter() - started) * 1000)
                last["p50"] = {k: statistics.median(v) for k, v in times.items()}
                last["rss"] = rss_kib()
            store.close()
    size = last["size"]
    print(f"\nR@1 by style at {size} distractors:")
    styles = sorted({q.style for q in queries})
    print(f"{'style':<13} {'n':>3} " + " ".join(f"{m:>8}" for m in last["results"]))
    for style in styles:
        idx = [i for i, q in enumerate(queries) if q.style == style]
        cells = []
        for ranked in last["results"].values():
            hits = sum(1 for i in idx if ranked[i][:1] == [expected[i]])
            cells.append(f"{hits / len(idx):8.3f}")
        print(f"{style:<13} {len(idx):>3} " + " ".join(cells))
    p50 = last["p50"]
    print(
        f"\nfind p50 at {size + len(labelled)} documents: hybrid {p50['hybrid']:.2f} ms, "
        f"lexical {p50['lexical']:.2f} ms (ratio {p50['hybrid'] / p50['lexical']:.2f}, "
        "target <= 1.5)"
    )
    print(f"saves with embedding: {last['saves']:.0f} documents/s (target >= 300)")
    rss, hwm = last["rss"]
    print(
        f"RSS with the model loaded and {size + len(labelled)} documents: {rss / 1024:.0f} MiB "
        f"(peak {hwm / 1024:.0f} MiB; target <= 300)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
