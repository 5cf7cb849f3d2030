"""Nothing an author's body hands the kit can break reconciliation (issue 19, finding 1).

Every payload is checked where it enters: one that cannot be one JSON document within the
limits fails the *call* with ``InvalidPayload`` naming the key path and the reason, nothing
is recorded or sent, and ``get_task`` / ``list_tasks`` keep answering for every task —
checked here through a real MCP client on the kit's task tools.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp.server.fastmcp import FastMCP
from mcp.shared.memory import create_connected_server_and_client_session

from robot_mcp_kit import InvalidArgument, InvalidPayload, TaskContext, TaskError, TaskManager
from robot_mcp_kit._payload import MAX_PAYLOAD_DEPTH, json_payload, progress_payload
from robot_mcp_kit.fastmcp_ext import register_task_tools
from robot_mcp_kit.testing import RecordingPoster


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


class TestJsonPayload:
    @pytest.mark.parametrize(
        ("payload", "path", "reason"),
        [
            ({"b": b"\x00\xff"}, "payload['b']", "is a bytes, which is not JSON (decode"),
            ({"o": [1, object()]}, "payload['o'][1]", "is a object, which is not JSON"),
            ({"x": float("nan")}, "payload['x']", "is nan; JSON has no NaN"),
            ({"x": {"y": float("-inf")}}, "payload['x']['y']", "is -inf"),
            ({3: "three"}, "payload", "has the key 3 (int); JSON keys are strings"),
            ({"s": "\ud800"}, "payload['s']", "not valid UTF-8"),
            ({"set": {1, 2}}, "payload['set']", "is a set"),
        ],
    )
    def test_what_is_not_json_is_named_by_path_and_reason(self, payload, path, reason):
        with pytest.raises(InvalidPayload) as info:
            json_payload(payload, "progress payload", max_bytes=1000)
        assert info.value.path == path
        assert reason in info.value.reason
        assert str(info.value).startswith("The progress payload cannot be sent as JSON: ")

    def test_nesting_is_bounded_and_a_deep_one_never_recurses_far(self):
        assert json_payload(nested(MAX_PAYLOAD_DEPTH), "p", max_bytes=10_000)
        with pytest.raises(InvalidPayload, match=f"deeper than {MAX_PAYLOAD_DEPTH}"):
            json_payload(nested(MAX_PAYLOAD_DEPTH + 1), "p", max_bytes=10_000)
        with pytest.raises(InvalidPayload, match="deeper"):
            json_payload(nested(2000), "p", max_bytes=10**9)

    def test_the_size_is_bounded_as_compact_utf8_json(self):
        assert json_payload({"s": "é" * 10}, "p", max_bytes=len('{"s":""}') + 20)
        with pytest.raises(InvalidPayload, match="over the limit of 27"):
            json_payload({"s": "é" * 10}, "p", max_bytes=27)

    def test_a_valid_payload_is_copied_deeply_with_tuples_as_lists(self):
        inner = {"pose": (1.5, 2, None), "ok": True, "tags": ["a"]}
        copied = json_payload({"x": inner}, "p", max_bytes=1000)
        assert copied == {"x": {"pose": [1.5, 2, None], "ok": True, "tags": ["a"]}}
        inner["tags"].append("b")
        assert copied["x"]["tags"] == ["a"]

    def test_not_a_dict_is_refused_and_stays_a_type_error(self):
        with pytest.raises(TypeError, match="must be a dict, got list"):
            json_payload([1], "progress payload", max_bytes=1000)


async def _tool_json(session: Any, tool: str, **arguments: Any) -> Any:
    result = await session.call_tool(tool, arguments)
    assert not result.isError, result.content
    return json.loads(result.content[0].text)


@pytest.mark.parametrize(
    "bad",
    [{"b": b"\x00\xff"}, {"o": object()}, nested(2000), {"x": float("inf")}],
    ids=["bytes", "object", "deep", "inf"],
)
async def test_a_bad_progress_fails_the_call_and_reconciliation_keeps_working(bad):
    """The body's call raises; the task keeps its last good progress; no event and no seq
    gap; get_task and list_tasks answer through MCP for it and for every other task."""
    poster = RecordingPoster()
    manager = TaskManager("sleeper", poster)
    mcp = FastMCP("sleeper")
    register_task_tools(mcp, manager)
    raised: list[InvalidPayload] = []

    async def body(ctx: TaskContext) -> dict[str, Any]:
        await ctx.progress({"percent": 10})
        try:
            await ctx.progress(bad)
        except InvalidPayload as exc:
            raised.append(exc)
        await ctx.progress({"percent": 20})
        return {"ok": True}

    async def fine(ctx: TaskContext) -> dict[str, Any]:
        return {}

    other = manager.start("t", fine)
    info = manager.start("t", body)
    await poster.wait_for(info.task_id, "task_done")
    assert len(raised) == 1
    assert [e.seq for e in poster.events_for(info.task_id)] == [1, 2, 3]
    async with create_connected_server_and_client_session(mcp._mcp_server) as session:
        got = await _tool_json(session, "get_task", task_id=info.task_id)
        assert got["progress"] == {"percent": 20}
        listed = await _tool_json(session, "list_tasks")
        assert {t["task_id"] for t in listed["tasks"]} == {info.task_id, other.task_id}
    await manager.aclose()


async def test_a_body_that_lets_it_raise_fails_with_the_path_in_its_message():
    poster = RecordingPoster()
    manager = TaskManager("sleeper", poster)

    async def body(ctx: TaskContext) -> dict[str, Any]:
        await ctx.progress({"pose": {"raw": b"\xff"}})
        return {}

    info = manager.start("t", body)
    event = await poster.wait_for(info.task_id, "task_failed")
    assert event.payload["error_code"] == "INTERNAL"
    assert "payload['pose']['raw'] is a bytes" in event.payload["message"]
    manager.get(info.task_id).model_dump_json()  # type: ignore[union-attr]
    await manager.aclose()


async def test_a_result_that_is_not_json_fails_the_task_and_is_never_stored():
    poster = RecordingPoster()
    manager = TaskManager("sleeper", poster)

    async def body(ctx: TaskContext) -> dict[str, Any]:
        return {"at": {1, 2}}

    info = manager.start("t", body)
    event = await poster.wait_for(info.task_id, "task_failed")
    assert (
        "The task result cannot be sent as JSON: payload['at'] is a set"
        in (event.payload["message"])
    )
    got = manager.get(info.task_id)
    assert got is not None
    assert got.result is None
    assert [t.model_dump_json() for t in manager.list()]
    await manager.aclose()


async def test_an_oversize_payload_is_refused_where_it_enters():
    poster = RecordingPoster()
    manager = TaskManager("sleeper", poster, max_payload_bytes=1024)
    raised: list[str] = []

    async def body(ctx: TaskContext) -> dict[str, Any]:
        for call in (ctx.progress, ctx.emit):
            try:
                await call({"blob": "x" * 2000})
            except InvalidPayload as exc:
                raised.append(exc.what)
        return {}

    info = manager.start("t", body)
    await poster.wait_for(info.task_id, "task_done")
    assert raised == ["progress payload", "watch_event payload"]
    assert [e.type for e in poster.events_for(info.task_id)] == ["task_done"]
    await manager.aclose()


async def test_fire_trigger_checks_the_trigger_and_its_extras_before_remembering_it():
    poster = RecordingPoster()
    manager = TaskManager("sleeper", poster)
    trigger = {"type": "eta_below", "seconds": 5}

    async def body(ctx: TaskContext) -> dict[str, Any]:
        with pytest.raises(InvalidPayload, match=r"payload\['eta'\] is a object"):
            await ctx.fire_trigger(trigger, {"eta": object()})
        with pytest.raises(InvalidPayload, match="The trigger cannot"):
            await ctx.fire_trigger({"type": "x", "at": b"1"})
        # The refused call did not count as the trigger's one firing.
        await ctx.fire_trigger(trigger, {"eta": 4.5})
        return {}

    info = manager.start("t", body, [trigger])
    await poster.wait_for(info.task_id, "task_done")
    fired = [e.payload for e in poster.events_for(info.task_id) if e.type == "trigger_fired"]
    assert fired == [{"trigger": trigger, "eta": 4.5}]
    await manager.aclose()


async def test_start_refuses_a_trigger_or_duration_that_is_not_json_and_creates_nothing():
    poster = RecordingPoster()
    manager = TaskManager("sleeper", poster)

    async def body(ctx: TaskContext) -> dict[str, Any]:
        return {}

    with pytest.raises(InvalidPayload, match=r"trigger 1 cannot .* payload\['seconds'\]"):
        manager.start(
            "t", body, [{"type": "eta_below", "seconds": 5}, {"type": "x", "seconds": b"5"}]
        )
    with pytest.raises(InvalidArgument, match="est_duration_s must be a finite number"):
        manager.start("t", body, est_duration_s=float("nan"))
    assert manager.list() == []
    await manager.aclose()


async def test_a_task_error_that_cannot_be_reported_still_finishes_the_task():
    poster = RecordingPoster()
    manager = TaskManager("sleeper", poster)

    async def body(ctx: TaskContext) -> dict[str, Any]:
        raise TaskError(42, "the door")  # type: ignore[arg-type]

    info = manager.start("t", body)
    event = await poster.wait_for(info.task_id, "task_failed")
    assert event.payload["error_code"] == "INTERNAL"
    assert "TaskError that cannot be reported" in event.payload["message"]
    assert manager.get(info.task_id).state == "failed"  # type: ignore[union-attr]
    await manager.aclose()


class TestPercent:
    """A progress payload's ``percent`` is a number or null (contract §8.2, issue 19)."""

    @pytest.mark.parametrize(
        ("percent", "shown", "hint"),
        [
            ("75", "'75'", " (send 75)"),
            ("37.5", "'37.5'", " (send 37.5)"),
            ("most", "'most'", ""),
            ("nan", "'nan'", ""),
            (True, "True", ""),
            ([75], "a list", ""),
            ({"done": 75}, "a dict", ""),
        ],
    )
    def test_a_percent_that_is_not_a_number_is_refused_naming_it(self, percent, shown, hint):
        with pytest.raises(InvalidPayload) as info:
            progress_payload({"percent": percent}, max_bytes=1000)
        assert info.value.path == "payload['percent']"
        assert info.value.reason == (
            f"is {shown}; percent must be a number or null, which progress_above triggers "
            f"compare{hint}"
        )
        assert str(info.value).startswith("The progress payload is refused: payload['percent'] is ")

    @pytest.mark.parametrize("percent", [0, 75, 37.5, None, -1, 250])
    def test_a_number_or_null_is_accepted(self, percent):
        assert progress_payload({"percent": percent}, max_bytes=1000) == {"percent": percent}

    def test_percent_means_something_only_in_a_progress_payload(self):
        assert json_payload({"percent": "75"}, "watch_event payload", max_bytes=1000)

    async def test_a_string_percent_fails_the_call_and_a_number_fires_progress_above(self):
        """ctx.progress({"percent": "75"}) raises and sends nothing; 75 then fires."""
        poster = RecordingPoster()
        manager = TaskManager("sleeper", poster)
        raised: list[InvalidPayload] = []

        async def body(ctx: TaskContext) -> dict[str, Any]:
            try:
                await ctx.progress({"percent": "75"})
            except InvalidPayload as exc:
                raised.append(exc)
            await ctx.progress({"percent": 75})
            return {}

        trigger = {"type": "progress_above", "percent": 50}
        info = manager.start("t", body, triggers=[trigger])
        await poster.wait_for(info.task_id, "task_done")
        assert [str(e) for e in raised] == [
            "The progress payload is refused: payload['percent'] is '75'; percent must be "
            "a number or null, which progress_above triggers compare (send 75)."
        ]
        events = poster.events_for(info.task_id)
        assert [(e.seq, e.type) for e in events] == [
            (1, "progress"),
            (2, "trigger_fired"),
            (3, "task_done"),
        ]
        assert events[0].payload == {"percent": 75}
        assert events[1].payload == {"trigger": trigger, "percent": 75}
        await manager.aclose()
