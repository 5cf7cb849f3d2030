"""The kit's core imports and runs where the ``mcp`` package cannot be imported (DESIGN §1)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

BLOCK_MCP = textwrap.dedent(
    """
    import importlib.abc
    import sys

    class BlockMcp(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "mcp" or name.startswith("mcp."):
                raise ImportError(f"mcp is blocked in this test ({name})")
            return None

    sys.meta_path.insert(0, BlockMcp())
    for loaded in [m for m in sys.modules if m == "mcp" or m.startswith("mcp.")]:
        del sys.modules[loaded]
    """
)

CHECKS = textwrap.dedent(
    """
    import asyncio

    try:
        import mcp  # noqa: F401
    except ImportError:
        pass
    else:
        raise SystemExit("the blocker did not block mcp")

    import robot_mcp_kit
    import robot_mcp_kit.events
    import robot_mcp_kit.fastmcp_ext
    import robot_mcp_kit.models
    import robot_mcp_kit.signing
    import robot_mcp_kit.tasks
    import robot_mcp_kit.testing
    from robot_mcp_kit import TaskManager, sign, verify
    from robot_mcp_kit.testing import RecordingPoster

    assert verify("s", 1, b"{}", "sha256=" + sign("s", 1, b"{}"), now_s=1)

    async def main():
        poster = RecordingPoster()
        manager = TaskManager("sleeper", poster)

        async def body(ctx):
            await ctx.progress({"percent": 50})
            return {"ok": True}

        info = manager.start("sleep_task", body)
        done = await poster.wait_for(info.task_id, "task_done", timeout_s=5)
        assert done.seq == 2, done

    asyncio.run(main())

    # With no framework loaded, start()'s errors are the kit's own classes, unchanged.
    from robot_mcp_kit import TaskManagerError

    async def idle(ctx):
        return {}

    try:
        TaskManager("sleeper", RecordingPoster()).start("sleep_task", idle)
    except TaskManagerError as exc:
        assert type(exc) is TaskManagerError, type(exc).__mro__
    else:
        raise SystemExit("start() without a loop did not raise")

    try:
        robot_mcp_kit.register_task_tools(object(), None)
    except ImportError as exc:
        assert "mcp" in str(exc), exc
    else:
        raise SystemExit("register_task_tools worked without mcp")

    assert not any(m == "mcp" or m.startswith("mcp.") for m in sys.modules), "mcp got imported"
    print("OK")
    """
)


def test_kit_imports_and_runs_a_task_without_mcp():
    """models, signing, events, tasks and testing import and work with mcp unimportable."""
    proc = subprocess.run(
        [sys.executable, "-c", BLOCK_MCP + CHECKS],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "OK"


def test_the_blocker_really_blocks_mcp():
    """Guard for the test above: with the blocker in place, ``import mcp`` fails."""
    proc = subprocess.run(
        [sys.executable, "-c", BLOCK_MCP + "import mcp\n"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode != 0
    assert "mcp is blocked in this test" in proc.stderr


RECEIVER_CHECKS = textwrap.dedent(
    """
    import asyncio
    import sys
    import tempfile
    import time

    from robot_mcp_kit.models import TaskEvent, new_event_id, utc_now
    from robot_mcp_kit.receiver import Receiver, ServerCallFailed, ServerConfig
    from robot_mcp_kit.signing import signed_headers

    async def main():
        got = []

        async def handle(update):
            got.append(update.seq)

        server = ServerConfig("sleeper", ("s",), mcp_url="http://127.0.0.1:9/sse")
        with tempfile.TemporaryDirectory() as tmp:
            receiver = Receiver(
                [server], handle, state=tmp + "/r.db", reconcile_on_start=False,
                reconcile_every_s=None,
            )
            async with receiver:
                for seq in (1, 2):
                    event = TaskEvent(
                        event_id=new_event_id(), task_id="slee-000001", server="sleeper",
                        tool="t", type="progress", seq=seq, ts=utc_now(), payload={},
                    )
                    body = event.model_dump_json().encode()
                    headers = signed_headers("sleeper", "s", body, int(time.time()))
                    assert (await receiver.receive(headers, body)).status == 200
                while len(got) < 2:
                    await asyncio.sleep(0.01)
                report = await receiver.reconcile()
                try:
                    await receiver.answer_input("sleeper", "slee-000001", "input-1")
                except ServerCallFailed as exc:
                    assert exc.code == "missing_extra", exc
                    assert "robot-mcp-kit[receiver]" in str(exc), exc
                else:
                    raise SystemExit("answer_input worked without mcp")
        assert got == [1, 2], got
        assert report["sleeper"]["error"] == "missing_extra", report

    asyncio.run(main())
    assert not any(m == "mcp" or m.startswith("mcp.") for m in sys.modules), "mcp got imported"
    print("OK")
    """
)


def test_the_receiver_receives_and_hands_over_without_mcp():
    """robot_mcp_kit.receiver verifies, stores and hands events over with mcp unimportable;
    repair and reconciliation say which extra they need instead of failing obscurely."""
    proc = subprocess.run(
        [sys.executable, "-c", BLOCK_MCP + RECEIVER_CHECKS],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "OK"
