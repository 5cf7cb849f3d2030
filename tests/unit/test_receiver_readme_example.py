"""The README's "Receive events in your brain" example is examples/brain.py, word for word.

``tests/integration/test_brain_example.py`` runs that file against the real sleeper and
under the receiver suite, and ``robot-mcp-demo`` runs it in its brain-restart scenario.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
BRAIN = REPO / "examples" / "brain.py"


def _brain_example() -> str:
    section = README.read_text(encoding="utf-8").split("## Receive events in your brain", 1)[1]
    section = section.split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1, "the section should hold exactly one python block"
    return blocks[0]


def test_the_readme_brain_example_is_examples_brain_py_word_for_word() -> None:
    """A reader copies the block; CI runs the file: they must be one text."""
    assert _brain_example() == BRAIN.read_text(encoding="utf-8")


def test_the_readme_command_runs_that_file() -> None:
    """The section's command starts examples/brain.py with the variables it reads."""
    section = README.read_text(encoding="utf-8").split("## Receive events in your brain", 1)[1]
    (command,) = [b for b in re.findall(r"```bash\n(.*?)```", section, re.S) if "brain.py" in b]
    assert "examples/brain.py" in command
    for variable in ("RVC_SERVERS=sleeper", "RVC_SLEEPER_SECRET=", "RVC_SLEEPER_MCP_URL="):
        assert variable in command
