"""Kill -9 during saves leaves every document's row and index entry agreeing (DESIGN §5)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from robot_mcp_memory.backends import storage_at
from robot_mcp_memory.processes import ProcessService

CHILD = textwrap.dedent(
    """
    import sys
    from robot_mcp_memory.backends import storage_at
    from robot_mcp_memory.processes import ProcessDoc, ProcessService

    store = ProcessService(storage_at(sys.argv[1]).open().processes)
    rev = 0
    while True:
        rev += 1
        token = f"rev{rev}x"
        store.save(ProcessDoc(
            id=f"doc-{rev % 5}", title=f"Title {token}", body=f"Body {token} " * 200,
        ))
        store.record_outcome(f"doc-{rev % 5}", rev % 2 == 0, f"note {token}")
        if rev % 50 == 0:
            print(rev, flush=True)
    """
)


@pytest.mark.slow
def test_sigkill_mid_save_leaves_rows_and_index_agreeing(tmp_path: Path) -> None:
    """After SIGKILL at an arbitrary save, each row has exactly its own index entry."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if int(line) >= 300:
                break
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL

    store = ProcessService(storage_at(str(tmp_path)).open().processes)
    try:
        assert store.repo.store.query_one("PRAGMA integrity_check")[0] == "ok"
        rows = store.repo.store.query(
            "SELECT p.id, p.title, p.body, f.id AS fid, f.title AS ftitle, f.body AS fbody "
            "FROM processes AS p LEFT JOIN processes_fts AS f ON f.rowid = p.rowid"
        )
        assert len(rows) == 5
        for row in rows:
            assert (row["fid"], row["ftitle"], row["fbody"]) == (
                row["id"],
                row["title"],
                row["body"],
            )
        assert store.repo.store.query_one("SELECT count(*) FROM processes_fts")[0] == 5
        for row in rows:
            token = row["title"].split()[-1]
            assert [f.doc.id for f in store.find(token, k=5)] == [row["id"]]
    finally:
        store.close()
