"""Issue 9, hostile callers: each finding's regression test through MCP over real SSE.

One caller with a valid token must not be able to break the memory for everyone: a
poisoned counter, deep YAML, an id with a trailing newline, text that is not valid
Unicode, out-of-range values. Every answer is a precise error that quotes what was sent and
never an exception's text, and the server keeps serving everyone else.
"""

from __future__ import annotations

import json
import sqlite3
import time

import httpx
import pytest

pytestmark = pytest.mark.slow

INT64_MAX = 2**63 - 1


def doc(id: str, title: str = "A process", body: str = "## Steps\n1. do it\n", **front) -> str:
    lines = ["---", f"id: {id}", f"title: {title}"]
    lines += [f"{k}: {v}" for k, v in front.items()]
    return "\n".join([*lines, "---", "", body])


def no_exception_text(answer: dict) -> None:
    text = json.dumps(answer)
    for leak in ("Error:", "Traceback", "errors.pydantic.dev", "OverflowError", "sqlite3"):
        assert leak not in text, answer


async def test_a_poisoned_counter_cannot_break_reads_or_search(spawn, mcp_call, tmp_path):
    """Counters are bounded on input and saturate; a damaged row never fails a search."""
    server = spawn()
    async with server.session() as s:
        refused = await mcp_call(
            s, "save_process", markdown=doc("poison", "Poison", success_count=INT64_MAX)
        )
        assert refused["error"] == "invalid"
        assert refused["field"] == "success_count"
        no_exception_text(refused)

        top = 2**31 - 1
        saved = await mcp_call(
            s, "save_process", markdown=doc("full", "Fetch the parcel", success_count=top)
        )
        assert saved["success_count"] == top
        bumped = await mcp_call(s, "record_outcome", id="full", success=True)
        assert bumped["success_count"] == top  # saturated, not overflowed
        await mcp_call(s, "save_process", markdown=doc("healthy", "Fetch the parcel quickly"))

    # A row damaged by an older version (a REAL counter, a broken date and tags), written
    # straight into the file while the server runs: reads repair or skip it.
    conn = sqlite3.connect(tmp_path / "data" / "index.db")
    deadline = time.monotonic() + 10  # the increment is a hot write: wait until it lands
    while time.monotonic() < deadline:
        stored, used = conn.execute(
            "SELECT success_count, last_used FROM processes WHERE id = 'full'"
        ).fetchone()
        if used is not None:
            break
        time.sleep(0.05)
    assert (stored, type(stored)) == (top, int)  # saturated in the file too
    conn.execute(
        "UPDATE processes SET success_count = 9.3e18, created = 'yesterday', tags = '{' "
        "WHERE id = 'full'"
    )
    conn.execute(
        "INSERT INTO processes (id, title, body, robot) VALUES ('Broken Id', 'parcel', '', 'x')"
    )
    conn.execute(
        "INSERT INTO processes_fts (rowid, id, title, task_pattern, tags, body) "
        "SELECT rowid, id, title, task_pattern, tags, body FROM processes WHERE id = 'Broken Id'"
    )
    conn.commit()
    conn.close()

    async with server.session() as s:
        found = await mcp_call(s, "find_processes", query="fetch the parcel", k=10)
        ids = [p["id"] for p in found["processes"]]
        assert set(ids) == {"full", "healthy"}  # the unreadable row is left out
        full = next(p for p in found["processes"] if p["id"] == "full")
        assert full["success_count"] == top
        got = await mcp_call(s, "get_process", id="full")
        assert got["success_count"] == top
        assert got["tags"] == []
        listed = await mcp_call(s, "list_processes")
        assert {p["id"] for p in listed["processes"]} == {"full", "healthy"}
        again = await mcp_call(s, "save_process", markdown=doc("full", "Fetch the parcel again"))
        assert again["inserted"] is False
        bumped = await mcp_call(s, "record_outcome", id="full", success=True)
        assert bumped["success_count"] == top
        broken = await mcp_call(s, "get_process", id="Broken Id")
        assert broken["error"] == "internal"
        assert "delete_process" in broken["detail"]
        assert await mcp_call(s, "delete_process", id="Broken Id") == {"deleted": "Broken Id"}
        assert (await mcp_call(s, "reindex"))["indexed"] == 2
    events = [e for e in server.log_events() if e.get("event") == "tool_call"]
    assert not [e for e in events if e["outcome"] == "internal" and e["tool"] != "get_process"]


async def test_deep_yaml_is_refused_quickly_as_invalid(spawn, mcp_call):
    """Frontmatter nested thousands deep is invalid before parsing, cheaply, for every form."""
    server = spawn()
    hostile = [
        "tags: " + "[" * 10_000 + "]" * 10_000,
        "tags: " + "{a: " * 5_000 + "1" + "}" * 5_000,
        "tags:\n  " + "- " * 10_000 + "x",
        "tags:\n" + "".join(" " * i + "- x\n" for i in range(0, 400, 2)),
    ]
    async with server.session() as s:
        for front in hostile:
            markdown = f"---\nid: deep\ntitle: Deep\n{front}\n---\n\nbody\n"
            started = time.perf_counter()
            out = await mcp_call(s, "save_process", markdown=markdown)
            elapsed = time.perf_counter() - started
            assert out["error"] == "invalid", out
            assert out["reason"] == "too_deep"
            assert out["field"] == "frontmatter"
            no_exception_text(out)
            assert elapsed < 5, f"a refusal took {elapsed:.1f}s"  # not a hang
        ok = await mcp_call(s, "save_process", markdown=doc("shallow", "Shallow", tags="[[a]]"))
        assert ok["error"] == "invalid"  # tags of lists are the wrong type, but parsed
        assert ok["reason"] == "wrong_type"


async def test_identifiers_with_a_trailing_newline_are_refused(spawn, mcp_call):
    """An id is matched as a whole string: 'abc\\n' is not the slug 'abc'."""
    server = spawn()
    async with server.session() as s:
        out = await mcp_call(s, "save_process", markdown=doc('"abc\\n"', "Newline id"))
        assert out["error"] == "invalid"
        assert out["field"] == "id"
        assert (await mcp_call(s, "list_processes"))["processes"] == []


def raw_tool_call(server, initialize: dict, name: str, arguments_json: str) -> dict:
    """tools/call over streamable HTTP with hand-written JSON arguments (the official client
    cannot encode a lone surrogate; a hostile one can, as a JSON escape)."""
    headers = {**server.headers(), "Accept": "application/json, text/event-stream"}
    with httpx.Client(base_url=server.base, headers=headers, timeout=15) as http:
        init = http.post("/mcp", json=initialize)
        headers = {"mcp-session-id": init.headers["mcp-session-id"]}
        http.post(
            "/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
        )
        body = (
            '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", '
            f'"params": {{"name": "{name}", "arguments": {arguments_json}}}}}'
        )
        reply = http.post(
            "/mcp",
            content=body.encode(),
            headers={**headers, "Content-Type": "application/json"},
        )
    if reply.status_code == 400:  # refused by the transport guard before any tool runs
        error = reply.json()["error"]
        return {"error": "invalid", "detail": error["message"], "rpc_code": error["code"]}
    assert reply.status_code == 200, reply.text
    text = reply.text
    if text.startswith("event:") or "data:" in text:
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    result = json.loads(text)["result"]
    return json.loads(result["content"][0]["text"])


def test_values_that_break_libraries_get_our_own_precise_errors(spawn, mcp_initialize):
    """Lone surrogates, huge integers and out-of-range dates: invalid, quoting what was sent."""
    server = spawn(transport="streamable-http")
    surrogate_doc = json.dumps(doc("s", "Bad \ud800 text"))
    assert "\\ud800" in surrogate_doc  # sent as a JSON escape
    cases = [
        ("save_process", f'{{"markdown": {surrogate_doc}}}'),
        ("get_process", '{"id": "x\\udfff"}'),
        ("record_outcome", '{"id": "x", "success": true, "note": "n\\ud800"}'),
        ("list_processes", '{"robot": "r\\ud800"}'),
        ("delete_process", '{"id": "\\ud800"}'),
    ]
    # A lone surrogate never reaches storage: the JSON-RPC guard refuses the message as a
    # parse error (400), and a tool that still met one would answer invalid naming it.
    for tool, arguments in cases:
        out = raw_tool_call(server, mcp_initialize, tool, arguments)
        assert out["error"] == "invalid", (tool, out)
        assert "surrogate" in out["detail"] or out.get("rpc_code") == -32700, out
        no_exception_text(out)
    found = raw_tool_call(
        server, mcp_initialize, "find_processes", '{"query": "parcel \\ud800 mail"}'
    )
    assert found.get("processes", []) == []

    huge = raw_tool_call(
        server,
        mcp_initialize,
        "save_process",
        json.dumps({"markdown": doc("h", "Huge", failure_count="9" * 5000)}),
    )
    assert huge["error"] == "invalid"
    no_exception_text(huge)
    assert len(huge["detail"]) < 400

    date = raw_tool_call(
        server,
        mcp_initialize,
        "save_process",
        json.dumps({"markdown": doc("d", "Date", created="0001-01-01")}),
    )
    assert date["error"] == "invalid"
    assert "0001-01-01" in date["detail"]
    assert "1-01-01T00:00:00.000Z" not in date["detail"]


async def test_save_answer_and_too_large_shape(spawn, mcp_call):
    """'inserted' says new-or-update; 'created' stays the timestamp; too_large quotes the
    size sent, in one shape for every field."""
    server = spawn()
    async with server.session() as s:
        saved = await mcp_call(
            s, "save_process", markdown=doc("t", "T", created="2026-06-12T14:00:00Z")
        )
        assert saved["inserted"] is True
        assert saved["created"] == "2026-06-12T14:00:00.000Z"
        sent = doc("big", "Big", body="x" * (256 * 1024))
        big = await mcp_call(s, "save_process", markdown=sent)
        note = await mcp_call(s, "record_outcome", id="t", success=True, note="n" * 5000)
        for answer, field, size in ((big, "document", len(sent.encode())), (note, "note", 5000)):
            assert answer["error"] == "too_large"
            assert answer["field"] == field
            assert answer["size"] == size
            assert set(answer) == {"error", "detail", "field", "size", "limit", "unit"}
            assert answer["unit"] == "bytes"
