"""The README's "Use the kit in your own server" example is real code that works.

It is ``examples/navigation.py`` word for word, and the conformance commands both READMEs
give for it are the same text (``tests/integration/test_serve.py`` runs them;
``tests/frameworks/run.sh`` runs the example under the suite on all three frameworks).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from mcp.shared.memory import create_connected_server_and_client_session

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
NAVIGATION = REPO / "examples" / "navigation.py"
CONFORMANCE_README = REPO / "conformance" / "README.md"


def _kit_example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    examples = [b for b in blocks if "register_task_tools" in b]
    assert len(examples) == 1, "README should hold exactly one kit example"
    return examples[0]


async def test_readme_kit_example_serves_its_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    """Executed as written (poster in no-op mode), it serves navigate_to and the task tools."""
    monkeypatch.delenv("RVC_CALLBACK_URL", raising=False)
    namespace: dict[str, object] = {"__name__": "readme_example"}
    exec(compile(_kit_example(), str(README), "exec"), namespace)  # noqa: S102 - our own README
    server = namespace["mcp"]
    async with create_connected_server_and_client_session(server._mcp_server) as client:  # type: ignore[attr-defined]
        tools = {t.name: t for t in (await client.list_tools()).tools}
        started = await client.call_tool("navigate_to", {"place": "dock"})
    await namespace["manager"].aclose()  # type: ignore[attr-defined]
    assert {"navigate_to", "get_task", "cancel_task", "list_tasks"} <= set(tools)
    # The start tool answers the TaskInfo as an object (issue 12), not a JSON string.
    schema = tools["navigate_to"].outputSchema
    assert schema is not None
    assert schema["type"] == "object"
    assert "task_id" in schema["properties"]
    assert started.structuredContent is not None
    assert started.structuredContent["state"] == "running"
    assert json.loads(started.content[0].text) == started.structuredContent  # type: ignore[union-attr]


def test_the_readme_example_is_examples_navigation_py_word_for_word() -> None:
    """A reader copies the block; CI runs the file: they must be one text."""
    assert _kit_example() == NAVIGATION.read_text(encoding="utf-8")


def _suite_commands(text: str) -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    return [b for b in blocks if "python navigation.py &" in b]


def test_both_readmes_give_the_same_suite_command_for_the_example() -> None:
    """The README and conformance/README.md start the example and run the suite alike."""
    (readme,) = _suite_commands(README.read_text(encoding="utf-8"))
    (conformance,) = _suite_commands(CONFORMANCE_README.read_text(encoding="utf-8"))
    assert readme == conformance
    for name in re.findall(r'"(\w+)":', readme):  # every argument is one navigate_to takes
        assert f"{name}: " in _kit_example(), name
