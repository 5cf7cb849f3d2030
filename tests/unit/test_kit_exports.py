"""The public namespaces: sorted ``__all__`` whose every name resolves."""

from __future__ import annotations

import importlib

import pytest

PUBLIC_MODULES = [
    "robot_mcp_kit",
    "robot_mcp_kit.events",
    "robot_mcp_kit.fastmcp_ext",
    "robot_mcp_kit.models",
    "robot_mcp_kit.signing",
    "robot_mcp_kit.tasks",
    "robot_mcp_kit.testing",
]


def isort_key(name: str) -> tuple[int, str]:
    """The order ruff's RUF022 keeps: CONSTANTS, then Classes, then functions."""
    if name.isupper():
        return (0, name)
    if name[0].isupper():
        return (1, name)
    return (2, name)


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_all_is_sorted_and_unique(module_name):
    """``__all__`` is sorted isort-style and names each symbol once."""
    names = importlib.import_module(module_name).__all__
    assert list(names) == sorted(names, key=isort_key)
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_exported_name_resolves(module_name):
    """Every name in ``__all__`` is an attribute of the module (lazy ones included)."""
    module = importlib.import_module(module_name)
    missing = [name for name in module.__all__ if getattr(module, name, None) is None]
    assert missing == []


def test_package_reexports_the_task_api():
    """The task API is importable from the package root and is the same object."""
    import robot_mcp_kit
    import robot_mcp_kit.fastmcp_ext
    import robot_mcp_kit.tasks

    for name in ("TaskBody", "TaskContext", "TaskError", "TaskManager"):
        assert getattr(robot_mcp_kit, name) is getattr(robot_mcp_kit.tasks, name)
    assert robot_mcp_kit.register_task_tools is robot_mcp_kit.fastmcp_ext.register_task_tools


class TestOneDefinitionPerFact:
    """Issue 13: each wire fact has one definition the rest of the kit derives from."""

    def test_task_state_members_are_the_wire_strings(self):
        """TaskState's members are the four wire strings, so string comparisons still hold."""
        from robot_mcp_kit import TERMINAL_STATES, TaskState

        assert [s.value for s in TaskState] == ["running", "succeeded", "failed", "cancelled"]
        assert TaskState.RUNNING == "running"
        assert frozenset({"succeeded", "failed", "cancelled"}) == TERMINAL_STATES

    def test_task_info_serialises_the_state_as_its_string(self):
        """A TaskInfo's state is a plain string in JSON and its schema stays an inline enum."""
        from datetime import UTC, datetime

        from robot_mcp_kit import TaskInfo, TaskState

        now = datetime(2026, 1, 1, tzinfo=UTC)
        info = TaskInfo(
            task_id="t-1", server="s", tool="x", state="failed", created_at=now, updated_at=now
        )
        assert info.state is TaskState.FAILED
        assert '"state":"failed"' in info.model_dump_json()
        schema = TaskInfo.model_json_schema()["properties"]["state"]
        assert schema == {
            "enum": ["running", "succeeded", "failed", "cancelled"],
            "title": "State",
            "type": "string",
        }

    def test_signature_error_reasons_are_signature_reason_members(self):
        """check() raises SignatureError whose reason is a SignatureReason member."""
        from robot_mcp_kit import SignatureError, SignatureReason
        from robot_mcp_kit.signing import check

        with pytest.raises(SignatureError) as info:
            check("secret", "yesterday", b"{}", "sha256=" + "0" * 64)
        assert info.value.reason is SignatureReason.MALFORMED_TIMESTAMP
        assert info.value.reason == "malformed_timestamp"

    def test_task_tool_names_are_the_registered_names(self):
        """TASK_TOOL_NAMES is the one spelling of the reconciliation tools' names."""
        import robot_mcp_kit
        import robot_mcp_kit.fastmcp_ext

        assert robot_mcp_kit.TASK_TOOL_NAMES == ("get_task", "cancel_task", "list_tasks")
        assert robot_mcp_kit.fastmcp_ext.TASK_TOOL_NAMES is robot_mcp_kit.TASK_TOOL_NAMES
        assert robot_mcp_kit.TASK_EVENTS_TOOL_NAME == "get_task_events"

    @pytest.mark.parametrize(
        ("successes", "failures", "expected"), [(0, 0, 0.5), (3, 0, 0.8), (3, 2, 4 / 7)]
    )
    def test_reliability_is_laplace_smoothed(self, successes, failures, expected):
        """reliability(s, f) = (s + 1) / (s + f + 2), and a Lesson uses it."""
        from robot_mcp_kit import reliability
        from robot_mcp_kit.params import Lesson

        assert reliability(successes, failures) == pytest.approx(expected)
        lesson = Lesson("solo:r", "grip", {}, success_count=successes, failure_count=failures)
        assert lesson.reliability == reliability(successes, failures)


class TestExceptions:
    """Issue 13: every error the kit raises on purpose is a RobotMcpKitError and still
    the builtin it was before."""

    async def test_start_on_a_closed_manager_raises_manager_closed(self):
        """ManagerClosed is a RobotMcpKitError and the RuntimeError callers caught."""
        from robot_mcp_kit import ManagerClosed, RobotMcpKitError, TaskManager
        from robot_mcp_kit.testing import RecordingPoster

        manager = TaskManager("t", RecordingPoster())
        await manager.aclose()

        async def body(ctx):
            return {}

        with pytest.raises(ManagerClosed) as info:
            manager.start("x", body)
        assert isinstance(info.value, RobotMcpKitError)
        assert isinstance(info.value, RuntimeError)

    @pytest.mark.parametrize(
        ("make", "builtin"),
        [
            (lambda: __import__("robot_mcp_kit").TaskManager("", None), ValueError),
            (lambda: __import__("robot_mcp_kit").RetryPolicy(delays_s=(-1,)), ValueError),
            (lambda: __import__("robot_mcp_kit").TaskManager("t", None).list(["x"]), ValueError),
            (lambda: __import__("robot_mcp_kit.store").store.Table("1", "record", ""), ValueError),
            (
                lambda: (
                    __import__("robot_mcp_kit.params")
                    .params.ParamStore(
                        __import__("robot_mcp_kit.params").params.MemoryBackend(), "s"
                    )
                    .record("k")
                ),
                KeyError,
            ),
            (
                lambda: (
                    __import__("robot_mcp_kit.params")
                    .params.ParamStore(
                        __import__("robot_mcp_kit.params").params.MemoryBackend(), "s"
                    )
                    .record("k", ["not", "a", "mapping"])
                ),
                TypeError,
            ),
        ],
    )
    def test_kit_errors_keep_their_builtin(self, make, builtin):
        """Each is a RobotMcpKitError and the builtin it replaced."""
        from robot_mcp_kit import RobotMcpKitError

        with pytest.raises(RobotMcpKitError) as info:
            make()
        assert isinstance(info.value, builtin)
