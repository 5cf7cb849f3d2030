"""The public namespaces: sorted ``__all__`` whose every name resolves, and which is exactly
the module's public names (encode/httpx ``tests/test_exported_members.py``).

The public names of a module ``M`` are read from its source, top level only (the branches
of ``if TYPE_CHECKING:`` / ``try:`` included, so a name served lazily by ``__getattr__``
counts). A name ``N`` not starting with ``_`` is public when ``M``

1. defines it: ``def N``, ``class N``, ``N = ...`` or ``N: T = ...``; or
2. re-exports it: ``from X import N`` where ``X`` is a kit module (``robot_mcp_kit`` or
   below) and either ``X`` is private (a dotted segment starts with ``_``: ``M`` is then
   ``N``'s public home) or ``M`` is a package and ``X`` one of its submodules (the package
   is the facade of its submodules).

Not public: anything imported from outside the kit (stdlib, ``typing``, pydantic, httpx:
helpers), a name a plain module imports from another *public* kit module (a use; its public
home is that module), and module objects (``import X``, ``from pkg import submodule``).
``__version__`` is public although it starts with ``_`` (as in httpx).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import types

import pytest

PUBLIC_MODULES = [
    "robot_mcp_kit",
    "robot_mcp_kit.events",
    "robot_mcp_kit.fastmcp_ext",
    "robot_mcp_kit.log",
    "robot_mcp_kit.models",
    "robot_mcp_kit.params",
    "robot_mcp_kit.receiver",
    "robot_mcp_kit.runtime",
    "robot_mcp_kit.signing",
    "robot_mcp_kit.store",
    "robot_mcp_kit.tasks",
    "robot_mcp_kit.testing",
]

# The namespaces whose ``__all__`` is held to equal their public names (issue 13).
GUARDED_MODULES = [
    "robot_mcp_kit",
    "robot_mcp_kit.log",
    "robot_mcp_kit.params",
    "robot_mcp_kit.receiver",
    "robot_mcp_kit.runtime",
    "robot_mcp_kit.store",
    "robot_mcp_kit.testing",
]

INCLUDED_PRIVATE_NAMES = frozenset({"__version__"})


def isort_key(name: str) -> tuple[int, str]:
    """The order ruff's RUF022 keeps: CONSTANTS, then Classes, then functions."""
    if name.isupper():
        return (0, name)
    if name[0].isupper():
        return (1, name)
    return (2, name)


def public_names(module_name: str) -> set[str]:
    """The public names of ``module_name`` by the rule in this module's docstring."""
    module = importlib.import_module(module_name)
    is_package = hasattr(module, "__path__")
    names: set[str] = set()

    def is_reexport(source: str) -> bool:
        if source != "robot_mcp_kit" and not source.startswith("robot_mcp_kit."):
            return False
        private = any(part.startswith("_") for part in source.split("."))
        return private or (is_package and source.startswith(module_name + "."))

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if is_reexport(node.module):
                    names.update(alias.asname or alias.name for alias in node.names)
            elif isinstance(node, ast.If):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)

    visit(ast.parse(inspect.getsource(module)).body)
    return {
        name
        for name in names
        if (not name.startswith("_") or name in INCLUDED_PRIVATE_NAMES)
        and not isinstance(getattr(module, name, None), types.ModuleType)
    }


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_all_is_sorted_and_unique(module_name):
    """``__all__`` is sorted isort-style and names each symbol once."""
    names = importlib.import_module(module_name).__all__
    assert list(names) == sorted(names, key=isort_key)
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_exported_name_resolves(module_name):
    """Every name in ``__all__`` is importable from the module (lazy ones included)."""
    module = importlib.import_module(module_name)
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert missing == []
    namespace: dict[str, object] = {}
    exec(f"from {module_name} import *", namespace)  # noqa: S102 - the star import users write
    assert set(module.__all__) <= set(namespace)


@pytest.mark.parametrize("module_name", GUARDED_MODULES)
def test_all_is_the_public_names(module_name):
    """``__all__`` equals the module's public names: nothing public is left out of it, and
    it lists nothing the module neither defines nor re-exports."""
    module = importlib.import_module(module_name)
    assert sorted(module.__all__, key=isort_key) == sorted(public_names(module_name), key=isort_key)


def test_the_rule_sees_what_it_should():
    """The rule itself: a definition, a re-export from a private module and a lazy name
    count; a helper from outside the kit and a use of a public kit module do not."""
    assert {
        "TaskManager",
        "TaskRuntime",
        "RetryPolicy",
        "register_task_tools",
        "__version__",
    } <= public_names("robot_mcp_kit")
    testing = public_names("robot_mcp_kit.testing")
    assert {"FakeClock", "ServiceProcess"} <= testing
    assert "TaskEvent" not in testing  # imported from the public models module: a use
    assert "annotations" not in testing
    assert "Any" not in public_names("robot_mcp_kit.params")


def test_package_reexports_the_task_api():
    """The task API is importable from the package root and is the same object."""
    import robot_mcp_kit
    import robot_mcp_kit.fastmcp_ext
    import robot_mcp_kit.tasks

    for name in ("TaskBody", "TaskContext", "TaskError", "TaskManager"):
        assert getattr(robot_mcp_kit, name) is getattr(robot_mcp_kit.tasks, name)
    assert robot_mcp_kit.register_task_tools is robot_mcp_kit.fastmcp_ext.register_task_tools
    import robot_mcp_kit.runtime

    assert robot_mcp_kit.TaskRuntime is robot_mcp_kit.runtime.TaskRuntime


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
