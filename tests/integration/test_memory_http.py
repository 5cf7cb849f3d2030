"""The memory server as a real child process over real HTTP (SSE and streamable HTTP)."""

from __future__ import annotations

import json
import signal
import threading
import time
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from robot_mcp_kit import __version__

pytestmark = pytest.mark.slow

TOKEN = "integration-token-7f3a"  # the conftest spawn fixture's default admin token

MAILROOM = (Path(__file__).resolve().parents[2] / "examples" / "mailroom.md").read_text(
    encoding="utf-8"
)

OTHER = """\
---
id: water-plants
title: Water the office plants
tags: [plants]
---

## Steps
1. Fill the can in the kitchen, water each pot on the window sill.
"""


@asynccontextmanager
async def sse_session(server):
    async with (
        sse_client(f"{server.base}/sse", headers=server.headers()) as (read, write),
        ClientSession(read, write, read_timeout_seconds=timedelta(seconds=15)) as session,
    ):
        await session.initialize()
        yield session


async def call(session: ClientSession, tool: str, **args) -> dict:
    result = await session.call_tool(tool, args)
    assert not result.isError, result.content
    return json.loads(result.content[0].text)


async def official_client_error(server, authorization: str) -> BaseException | None:
    """What the official SSE client raises trying to delete a process with ``authorization``."""
    try:
        with anyio.fail_after(10):
            async with (
                sse_client(f"{server.base}/sse", headers={"Authorization": authorization}) as rw,
                ClientSession(*rw) as session,
            ):
                await session.initialize()
                await session.call_tool("delete_process", {"id": "fetch-package-mailroom"})
    except BaseException as exc:  # the client surfaces the 401 as an error (group)
        return exc
    return None


def tool_calls(server) -> list[dict]:
    return [e for e in server.log_events() if e.get("event") == "tool_call"]


class TestSse:
    async def test_demo_mailroom_ranks_first_over_sse(self, spawn):
        """Spec §8 demo over real SSE: the paraphrased instruction finds the mailroom doc first."""
        server = spawn()
        async with sse_session(server) as session:
            saved = await call(session, "save_process", markdown=MAILROOM)
            await call(session, "save_process", markdown=OTHER)
            found = await call(
                session, "find_processes", query="bring me the parcel from the mail room"
            )
        assert saved["id"] == "fetch-package-mailroom"
        first = found["processes"][0]
        assert first["id"] == "fetch-package-mailroom"
        assert "Visitor packages are on the lower shelf." in first["markdown"]
        assert first["markdown"].startswith("---\nid: fetch-package-mailroom\n")
        assert server.documents() == 2
        events = tool_calls(server)
        assert [e["tool"] for e in events] == ["save_process", "save_process", "find_processes"]
        assert all(e["outcome"] == "ok" and e["duration_ms"] >= 0 for e in events)

    def test_healthz_needs_no_token(self, spawn):
        """GET /healthz answers without a token."""
        server = spawn()
        r = httpx.get(f"{server.base}/healthz", timeout=5)
        assert r.status_code == 200
        assert r.json() == {"status": "ok"}

    def test_store_ready_line_comes_through_structlog_with_its_fields(self, spawn):
        """The kit's stdlib store_ready line is a JSON event with its extras as fields."""
        server = spawn()
        ready = [e for e in server.log_events() if str(e.get("event")).startswith("store_ready")]
        assert len(ready) == 1
        assert ready[0]["logger"] == "robot_mcp_kit.store"
        assert ready[0]["level"] == "info"
        assert "timestamp" in ready[0]
        assert ready[0]["to_version"] >= 1  # an `extra=` field, not just the message
        assert "processes" in ready[0]["counts"]

    def test_sigterm_stops_cleanly_and_closes_the_store(self, spawn):
        """SIGTERM: exit 0 after the store is closed (memory_server_stopped is the last word)."""
        server = spawn()
        server.stop()
        assert server.proc is not None
        assert server.proc.returncode == 0
        events = [e.get("event") for e in server.log_events()]
        assert events[-1] == "memory_server_stopped"

    async def test_wrong_token_is_401_and_no_tool_runs(self, spawn):
        """Without the right token: 401 + WWW-Authenticate, the count holds, no tool_call logged."""
        server = spawn()
        async with sse_session(server) as session:
            await call(session, "save_process", markdown=MAILROOM)
        before = server.documents()
        calls_before = len(tool_calls(server))

        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "delete_process", "arguments": {"id": "fetch-package-mailroom"}},
        }
        async with httpx.AsyncClient(base_url=server.base, timeout=5) as http:
            for headers in ({}, {"Authorization": "Bearer wrong"}):
                r = await http.get("/sse", headers=headers)
                assert r.status_code == 401
                assert r.headers["www-authenticate"].startswith("Bearer")
                assert r.json()["error"] == "unauthorized"
                r = await http.post("/messages/?session_id=0", json=body, headers=headers)
                assert r.status_code == 401

        # The official client, too, gets nowhere with a wrong token.
        failure = await official_client_error(server, "Bearer wrong")
        assert failure is not None

        assert server.documents() == before == 1
        assert len(tool_calls(server)) == calls_before
        rejected = [e for e in server.log_events() if e.get("event") == "auth_rejected"]
        assert rejected

    async def test_sigkill_during_saves_loses_no_returned_save(self, spawn, tmp_path):
        """kill -9 mid-stream: after restart every acknowledged save is there and findable,
        and rows, index and listing agree."""
        server = spawn()
        acknowledged: list[str] = []
        filler = "Carry the item carefully along the corridor. " * 400  # ~18 KiB per doc

        def killer() -> None:
            deadline = time.monotonic() + 30
            while len(acknowledged) < 15 and time.monotonic() < deadline:
                time.sleep(0.001)
            server.kill9()

        async def stream() -> None:
            async with sse_session(server) as session:
                for i in range(10_000):
                    markdown = (
                        f"---\nid: kill-doc-{i}\ntitle: Kill test zebra{i}\n---\n\n"
                        f"## Steps\n1. {filler}\n"
                    )
                    result = await session.call_tool(
                        "save_process", {"markdown": markdown}, timedelta(seconds=5)
                    )
                    if result.isError:
                        return
                    acknowledged.append(json.loads(result.content[0].text)["id"])

        thread = threading.Thread(target=killer, daemon=True)
        thread.start()
        try:
            with anyio.fail_after(60):
                await stream()
        except Exception:  # noqa: S110 - the connection dies with the server, by design
            pass
        except BaseExceptionGroup:
            pass
        thread.join(timeout=30)
        assert server.proc is not None
        assert server.proc.returncode == -signal.SIGKILL
        assert len(acknowledged) >= 15

        restarted = spawn()  # same data dir
        assert restarted.data_dir == server.data_dir
        async with sse_session(restarted) as session:
            listed = await call(session, "list_processes", limit=500)
            rows = restarted.documents()
            indexed = (await call(session, "reindex"))["indexed"]
            for doc_id in acknowledged:
                n = doc_id.rsplit("-", 1)[1]
                found = await call(session, "find_processes", query=f"zebra{n}", k=1)
                assert [p["id"] for p in found["processes"]] == [doc_id]
        assert indexed == rows == len(listed["processes"])
        assert rows >= len(acknowledged)
        assert set(acknowledged) <= {p["id"] for p in listed["processes"]}


class TestStreamableHttp:
    async def test_initialize_and_list_tools(self, spawn):
        """Streamable HTTP: initialize + list_tools through the official client, with the token."""
        server = spawn(transport="streamable-http")
        async with (
            httpx.AsyncClient(headers=server.headers(), timeout=15) as http,
            streamable_http_client(f"{server.base}/mcp", http_client=http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            init = await session.initialize()
            tools = await session.list_tools()
            saved = await call(session, "save_process", markdown=MAILROOM)
        assert init.serverInfo.name == "memory"
        assert init.serverInfo.version == __version__  # ours, not the mcp SDK's
        assert len(tools.tools) == 20  # DESIGN §5's 18 and issue 22's revert and merge
        assert saved["id"] == "fetch-package-mailroom"

    def test_token_gate_and_host_header_protection(self, spawn, mcp_initialize, mcp_accept):
        """No token: 401; the right token but a foreign Host header: refused by FastMCP."""
        server = spawn(transport="streamable-http")
        r = httpx.post(f"{server.base}/mcp", json=mcp_initialize, headers=mcp_accept, timeout=5)
        assert r.status_code == 401
        r = httpx.post(
            f"{server.base}/mcp",
            json=mcp_initialize,
            headers={**mcp_accept, **server.headers(), "Host": "evil.example:80"},
            timeout=5,
        )
        assert r.status_code in (403, 421)
        r = httpx.post(
            f"{server.base}/mcp",
            json=mcp_initialize,
            headers={**mcp_accept, **server.headers()},
            timeout=5,
        )
        assert r.status_code == 200
        session_id = r.headers["mcp-session-id"]
        r = httpx.delete(
            f"{server.base}/mcp", headers={**server.headers(), "mcp-session-id": session_id}
        )
        assert r.status_code == 200
        assert httpx.get(f"{server.base}/healthz", timeout=5).status_code == 200


def test_allowed_hosts_admit_the_named_host_and_refuse_others(spawn, mcp_initialize, mcp_accept):
    """MEMORY_ALLOWED_HOSTS: a client naming the service host is served, a foreign one is not.

    Bound to loopback here (tests never bind beyond it); FastMCP's loopback-only default
    would refuse ``brain-memory``, so a 200 proves the setting is what is applied.
    """
    server = spawn(
        transport="streamable-http", token=None, env={"MEMORY_ALLOWED_HOSTS": "brain-memory:*"}
    )
    named = httpx.post(
        f"{server.base}/mcp",
        json=mcp_initialize,
        headers={**mcp_accept, "Host": f"brain-memory:{server.port}"},
        timeout=5,
    )
    foreign = httpx.post(
        f"{server.base}/mcp",
        json=mcp_initialize,
        headers={**mcp_accept, "Host": f"evil.example:{server.port}"},
        timeout=5,
    )
    assert named.status_code == 200, named.text
    assert foreign.status_code == 421, foreign.text
