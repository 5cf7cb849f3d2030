"""Task ownership (contract §13, issue 32 finding 2): a task is its starter's.

The principal comes from mcp's auth context, which the framework's bearer authentication
sets for each request (here set directly, as that middleware does); the manager remembers
it at ``start`` and every read or drive of another principal answers as for an unknown
id. The task tools do the same through a real mcp 1.x client in memory, one session per
principal. Over real HTTP with real bearer tokens: ``tests/integration/
test_task_ownership_http.py`` (mcp 2.x) and the conformance clause's broken server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.fastmcp import FastMCP
from mcp.shared.memory import create_connected_server_and_client_session

from robot_mcp_kit import ConfigurationError, EventPoster, TaskContext, TaskManager, TaskState
from robot_mcp_kit import register_task_tools as register
from robot_mcp_kit.tasks import ANONYMOUS, Principal, current_principal
from robot_mcp_kit.testing import RecordingPoster

CONFIRM = {"type": "object", "properties": {"confirm": {"type": "boolean"}}}
ALICE = Principal("alice")
BOB = Principal("bob")


@contextlib.contextmanager
def acting_as(client_id: str, **token: Any) -> Iterator[None]:
    """What mcp's AuthContextMiddleware does for a request with this client's token."""
    user = AuthenticatedUser(AccessToken(token="t", client_id=client_id, scopes=[], **token))
    reset = auth_context_var.set(user)
    try:
        yield
    finally:
        auth_context_var.reset(reset)


async def _asks(ctx: TaskContext) -> dict[str, Any]:
    answer = await ctx.request_input("Go?", schema=CONFIRM)
    return {"action": answer.action}


async def _forever(ctx: TaskContext) -> dict[str, Any]:
    await asyncio.sleep(3600)
    return {}


async def _waiting(manager: TaskManager, task_id: str) -> None:
    for _ in range(400):
        if manager.pending_inputs(task_id):
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"{task_id} never asked for input")


class TestPrincipal:
    def test_the_access_token_names_the_principal(self):
        """Client, issuer (the iss claim) and subject; the key is the JSON triple."""
        assert current_principal() == ANONYMOUS
        assert ANONYMOUS.key == ""
        with acting_as("brain", subject="u-7", claims={"iss": "https://idp.example"}):
            who = current_principal()
        assert who == Principal("brain", "https://idp.example", "u-7")
        assert json.loads(who.key) == ["brain", "https://idp.example", "u-7"]
        assert current_principal() == ANONYMOUS

    def test_task_admins_must_be_client_ids(self):
        """A bare string (which would be read letter by letter) or an empty id is refused."""
        for bad in ("brain", [""], [7]):
            with pytest.raises(ConfigurationError, match="task_admins"):
                TaskManager("nav", RecordingPoster(), task_admins=bad)  # type: ignore[arg-type]


class TestManager:
    async def test_another_principal_s_task_is_an_unknown_id_to_it(self, manager):
        """Bob can neither see, read the events of, answer nor cancel Alice's task."""
        with acting_as("alice"):
            asks = manager.start("ask", _asks).task_id
            runs = manager.start("run", _forever).task_id
        await _waiting(manager, asks)

        for task_id in (asks, runs):
            assert manager.get(task_id, caller=BOB) is None
            assert manager.events(task_id, caller=BOB) is None
            assert manager.pending_inputs(task_id, caller=BOB) is None
            assert await manager.cancel(task_id, caller=BOB) is None
        assert manager.list(caller=BOB) == []
        assert manager.list([TaskState.RUNNING], caller=BOB) == []
        answered = await manager.answer_input(
            asks, {"input-1": {"action": "accept", "content": {}}}, caller=BOB
        )
        assert answered is None

        # Nothing Bob did reached the tasks: Alice's are running, the question still open.
        assert [i.task_id for i in manager.list(caller=ALICE)] == [asks, runs]
        assert manager.get(runs, caller=ALICE).state == TaskState.RUNNING
        assert list(manager.pending_inputs(asks, caller=ALICE)) == ["input-1"]
        assert manager.events(asks, caller=ALICE).last_seq == 1
        assert [i.task_id for i in manager.list()] == [asks, runs]  # the server's own view
        assert await manager.answer_input(
            asks, {"input-1": {"action": "accept", "content": {}}}, caller=ALICE
        ) == ["input-1"]
        assert (await manager.cancel(runs, caller=ALICE)).state == TaskState.CANCELLED

    async def test_task_admins_see_and_drive_every_task(self, poster):
        """The brain's client id named in task_admins sees Alice's task and cancels it."""
        manager = TaskManager("nav", poster, task_admins=["brain"])
        try:
            with acting_as("alice"):
                task_id = manager.start("run", _forever).task_id
            brain = Principal("brain", "https://idp.example", "svc")
            assert [i.task_id for i in manager.list(caller=brain)] == [task_id]
            assert manager.get(task_id, caller=brain) is not None
            assert (await manager.cancel(task_id, caller=brain)).state == TaskState.CANCELLED
            assert manager.list(caller=BOB) == []
        finally:
            await manager.aclose()

    async def test_without_authentication_there_is_one_principal(self, manager):
        """No token anywhere: every caller is ANONYMOUS and sees every task, as before."""
        task_id = manager.start("run", _forever).task_id
        assert manager.get(task_id, caller=current_principal()) is not None
        assert [i.task_id for i in manager.list(caller=ANONYMOUS)] == [task_id]
        # An authenticated caller does not see a task started outside any request.
        assert manager.get(task_id, caller=ALICE) is None


def _ok(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200)


class TestJournal:
    async def test_the_owner_survives_a_restart_with_an_outbox(self, tmp_path: Path):
        """After a restart the interrupted task is still Alice's, and still not Bob's."""
        path = tmp_path / "outbox.db"

        def poster() -> EventPoster:
            return EventPoster(
                "nav", "http://brain.test/events", "s", transport=httpx.MockTransport(_ok),
                outbox=path, close_grace_s=0.1,
            )  # fmt: skip

        first_poster = poster()
        first = TaskManager("nav", first_poster)
        with acting_as("alice"):
            task_id = first.start("run", _forever).task_id
        await asyncio.sleep(0.05)
        await first.aclose()  # the task stays running in the journal
        await first_poster.aclose()
        with sqlite3.connect(path) as conn:
            ((owner,),) = conn.execute("SELECT owner FROM tasks WHERE task_id = ?", (task_id,))
        assert json.loads(owner) == ["alice", None, None]

        second_poster = poster()
        second = TaskManager("nav", second_poster)
        try:
            info = second.get(task_id, caller=ALICE)
            assert info is not None
            assert info.failure is not None
            assert info.failure.error_code == "INTERRUPTED"
            assert second.get(task_id, caller=BOB) is None
        finally:
            await second.aclose()
            await second_poster.aclose()

    async def test_a_version_2_outbox_gains_the_owner_column(self, tmp_path: Path):
        """A file written before owners were kept migrates; its tasks are anonymous."""
        path = tmp_path / "outbox.db"
        first_poster = EventPoster(
            "nav", "http://brain.test/events", "s", transport=httpx.MockTransport(_ok),
            outbox=path, close_grace_s=0.1,
        )  # fmt: skip
        first = TaskManager("nav", first_poster)
        task_id = first.start("run", _forever).task_id
        await asyncio.sleep(0.05)
        await first.aclose()
        await first_poster.aclose()
        with sqlite3.connect(path) as conn:  # as the previous release left it
            conn.execute("ALTER TABLE tasks DROP COLUMN owner")
            conn.execute("UPDATE store_meta SET value = '2' WHERE key = 'schema_version'")

        second_poster = EventPoster(
            "nav", "http://brain.test/events", "s", transport=httpx.MockTransport(_ok),
            outbox=path, close_grace_s=0.1,
        )  # fmt: skip
        second = TaskManager("nav", second_poster)
        try:
            assert second.get(task_id, caller=ANONYMOUS) is not None
            assert second.get(task_id, caller=ALICE) is None
        finally:
            await second.aclose()
            await second_poster.aclose()
        with sqlite3.connect(path) as conn:
            version = conn.execute("SELECT value FROM store_meta WHERE key = 'schema_version'")
            assert version.fetchone() == ("3",)


@contextlib.asynccontextmanager
async def session_as(server: FastMCP, client_id: str) -> AsyncIterator[Any]:
    """A client session whose server side runs as ``client_id`` (its context is copied
    from here when the session's server task starts)."""
    with acting_as(client_id):
        async with create_connected_server_and_client_session(server._mcp_server) as session:
            yield session


async def call(session: Any, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    assert not result.isError, result.content
    data: dict[str, Any] = json.loads(result.content[0].text)
    return data


class TestTaskTools:
    async def test_the_task_tools_answer_another_principal_not_found(self, poster):
        """Through the tools: Bob's list is empty, everything else is not_found, exactly
        as for an id that never existed; the brain (a task admin) sees the task."""
        manager = TaskManager("nav", poster, task_admins=["brain"])
        server = FastMCP("nav")
        register(server, manager, inputs=True)

        @server.tool()
        async def ask() -> dict[str, Any]:
            return manager.start("ask", _asks).model_dump(mode="json")

        try:
            async with (
                session_as(server, "alice") as alice,
                session_as(server, "bob") as bob,
                session_as(server, "brain") as brain,
            ):
                task_id = (await call(alice, "ask"))["task_id"]
                await _waiting(manager, task_id)
                assert await call(bob, "list_tasks") == {"tasks": []}
                unknown = "nav-000000"
                for tool, args in (
                    ("get_task", {}),
                    ("get_task_events", {}),
                    ("cancel_task", {}),
                    ("answer_task_input", {"request_id": "input-1", "action": "accept"}),
                ):
                    theirs = await call(bob, tool, task_id=task_id, **args)
                    never = await call(bob, tool, task_id=unknown, **args)
                    assert theirs["error"] == never["error"] == "not_found", tool
                    assert theirs["detail"] == never["detail"].replace(unknown, task_id), tool
                assert manager.get(task_id).state == TaskState.RUNNING
                assert list(manager.pending_inputs(task_id)) == ["input-1"]

                listed = await call(brain, "list_tasks")
                assert [t["task_id"] for t in listed["tasks"]] == [task_id]
                answered = await call(
                    alice, "answer_task_input", task_id=task_id, request_id="input-1",
                    action="accept", content={"confirm": True},
                )  # fmt: skip
                assert answered["task_id"] == task_id
        finally:
            await manager.aclose()
