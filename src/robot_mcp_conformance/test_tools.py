"""The reconciliation tools exist, take the contract's arguments and say what they are for."""

from __future__ import annotations

import re
from typing import Any

import pytest

from robot_mcp_conformance._checks import Clause, clauses, enforces, violation
from robot_mcp_kit import TASK_TOOL_NAMES

TOOL_NAMES = TASK_TOOL_NAMES

# A description passes when it talks about tasks and says, in one sentence, that the tool
# does not start (begin, launch) work, or that it is only for status/cancellation.
_ABOUT_TASKS = re.compile(r"\btasks?\b", re.IGNORECASE)
_NOT_FOR_STARTING = re.compile(
    r"(\bnot\b|\bnever\b|n't\b|\bno\b)[^.]{0,120}\b(start|begin|launch|initiate)",
    re.IGNORECASE,
)
_ONLY_STATUS = re.compile(r"\bonly\b[^.]{0,80}\b(status|cancel)", re.IGNORECASE)


def _tool(tools: dict[str, Any], name: str, clause: Clause) -> Any:
    tool = tools.get(name)
    if tool is None:
        violation(clause, f"the server does not list a {name} tool", {"tools": sorted(tools)})
    return tool


def _accepts(schema: dict[str, Any], json_type: str) -> bool:
    """Whether a JSON schema admits values of ``json_type`` (directly or in a branch)."""
    declared = schema.get("type")
    if declared == json_type or (isinstance(declared, list) and json_type in declared):
        return True
    branches = schema.get("anyOf", []) + schema.get("oneOf", [])
    return any(isinstance(b, dict) and _accepts(b, json_type) for b in branches)


def _array_of_strings(schema: dict[str, Any]) -> bool:
    if schema.get("type") == "array" or (
        isinstance(schema.get("type"), list) and "array" in schema["type"]
    ):
        items = schema.get("items")
        return not isinstance(items, dict) or _accepts(items, "string")
    branches = schema.get("anyOf", []) + schema.get("oneOf", [])
    return any(isinstance(b, dict) and _array_of_strings(b) for b in branches)


@enforces(clauses.TOOLS_EXIST)
@pytest.mark.parametrize("name", TOOL_NAMES)
def test_reconciliation_tool_is_listed(tools: dict[str, Any], name: str) -> None:
    """§3.3: every task-capable server exposes get_task, cancel_task and list_tasks."""
    _tool(tools, name, clauses.TOOLS_EXIST)


@enforces(clauses.TOOL_SCHEMA)
@pytest.mark.parametrize("name", TOOL_NAMES)
def test_reconciliation_tool_input_schema(tools: dict[str, Any], name: str) -> None:
    """§3.3: get_task(task_id: str), cancel_task(task_id: str), list_tasks(states=None)."""
    clause = clauses.TOOL_SCHEMA
    tool = _tool(tools, name, clause)
    schema = tool.get("inputSchema") or {}
    props: dict[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    evidence = {"tool": name, "inputSchema": schema}
    if name in ("get_task", "cancel_task"):
        prop = props.get("task_id")
        if not isinstance(prop, dict):
            violation(clause, f"{name} has no task_id argument", evidence)
        if not _accepts(prop, "string"):
            violation(clause, f"{name}'s task_id argument does not accept a string", evidence)
        if "task_id" not in required:
            violation(clause, f"{name}'s task_id argument is not required", evidence)
        extra = required - {"task_id"}
    else:
        prop = props.get("states")
        if not isinstance(prop, dict):
            violation(clause, "list_tasks has no states argument", evidence)
        if "states" in required:
            violation(clause, "list_tasks' states argument must be optional (None: all)", evidence)
        if not _array_of_strings(prop):
            violation(clause, "list_tasks' states argument is not a list of strings", evidence)
        extra = required
    if extra:
        violation(
            clause,
            f"{name} requires arguments the contract does not pass: {sorted(extra)}",
            evidence,
        )


@enforces(clauses.TOOL_DESCRIPTION)
@pytest.mark.parametrize("name", TOOL_NAMES)
def test_reconciliation_tool_description_says_it_does_not_start_work(
    tools: dict[str, Any], name: str
) -> None:
    """§4.4: descriptions tell the LLM these are for status/cancel, not for starting work."""
    clause = clauses.TOOL_DESCRIPTION
    tool = _tool(tools, name, clause)
    text = (tool.get("description") or "").strip()
    evidence = {"tool": name, "description": text}
    if not text:
        violation(clause, f"{name} has no description", evidence)
    if not _ABOUT_TASKS.search(text):
        violation(clause, f"{name}'s description does not mention tasks", evidence)
    if not (_NOT_FOR_STARTING.search(text) or _ONLY_STATUS.search(text)):
        violation(
            clause,
            f"{name}'s description never says it does not start work (looked for a "
            "sentence like 'this does NOT start any work' or 'only for status')",
            evidence,
        )


def _wraps_a_string(schema: dict[str, Any]) -> bool:
    """The mcp SDK's wrapper for a ``-> str`` tool: ``{"result": {"type": "string"}}``."""
    props = schema.get("properties") or {}
    return (
        set(props) == {"result"}
        and isinstance(props["result"], dict)
        and _accepts(props["result"], "string")
        and not _accepts(props["result"], "object")
    )


@enforces(clauses.TOOLS_RETURN_JSON)
@pytest.mark.parametrize("name", TOOL_NAMES)
def test_reconciliation_tool_output_schema_describes_an_object(
    tools: dict[str, Any], name: str
) -> None:
    """§6.4: a declared output schema describes the answer object, not {"result": string}."""
    clause = clauses.TOOLS_RETURN_JSON
    tool = _tool(tools, name, clause)
    schema = tool.get("outputSchema")
    if schema is None:
        return  # plain text answers (no structured content) are allowed
    evidence = {"tool": name, "outputSchema": schema}
    if schema.get("type") != "object":
        violation(clause, f"{name}'s output schema is not an object schema", evidence)
    if _wraps_a_string(schema):
        violation(
            clause,
            f'{name}\'s output schema wraps its answer in a string ({{"result": string}}): a '
            "structured-output client receives the JSON double-encoded",
            evidence,
        )
