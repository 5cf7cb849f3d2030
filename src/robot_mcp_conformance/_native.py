"""A minimal client of the MCP tasks extension (SEP-2663), for §12's agreement check.

Raw JSON-RPC over streamable HTTP at protocol 2026-07-28, each request declaring
``io.modelcontextprotocol/tasks`` in its ``_meta`` client capabilities, with the
``Mcp-Method`` / ``Mcp-Name`` headers that revision asks for. It needs no MCP SDK, so the
suite judges the native face whatever SDK it runs on. :class:`NativeRun` is what one task
driven natively looked like.
"""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any

from robot_mcp_conformance._runs import TaskRun

__all__ = [
    "KIT_TASK_ID_META_KEY",
    "NATIVE_PROTOCOL",
    "TASKS_EXTENSION_ID",
    "NativeClient",
    "NativeError",
    "NativeRun",
]

TASKS_EXTENSION_ID = "io.modelcontextprotocol/tasks"
NATIVE_PROTOCOL = "2026-07-28"
KIT_TASK_ID_META_KEY = "io.github.robot-mcp/task_id"
"""Where a native task answer names the contract's ``task_id`` (contract §12)."""
TERMINAL_STATUSES = ("completed", "failed", "cancelled")
POLL_S = 0.2


class NativeError(Exception):
    """A JSON-RPC error answer (or an answer that is not JSON-RPC: code 0)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass
class NativeRun:
    """One task created through ``tools/call`` with the extension and polled to its end."""

    label: str
    created: dict[str, Any] | None = None
    final: dict[str, Any] | None = None
    cancel_ack: dict[str, Any] | None = None
    error: str | None = None
    webhook: TaskRun | None = None
    polls: list[str] = field(default_factory=list)

    @property
    def kit_task_id(self) -> str | None:
        meta = (self.created or {}).get("_meta")
        task_id = meta.get(KIT_TASK_ID_META_KEY) if isinstance(meta, dict) else None
        return task_id if isinstance(task_id, str) else None


class NativeClient:
    """Sends one JSON-RPC request per POST to a streamable-HTTP MCP endpoint (with
    ``headers`` on each: ``Authorization`` for a server with authentication)."""

    def __init__(
        self, url: str, *, timeout_s: float = 30.0, headers: dict[str, str] | None = None
    ) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self.headers = dict(headers or {})
        self._ids = itertools.count(1)

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """The result of ``method``; raises :class:`NativeError` for an error answer."""
        import httpx

        params = dict(params or {})
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": NATIVE_PROTOCOL,
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXTENSION_ID: {}}},
            "io.modelcontextprotocol/clientInfo": {
                "name": "robot-mcp-conformance",
                "version": "1",
            },
        }
        request_id = next(self._ids)
        headers = {
            **self.headers,
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": NATIVE_PROTOCOL,
            "Mcp-Method": method,
        }
        name = params.get("name") if method == "tools/call" else params.get("taskId")
        if isinstance(name, str):
            headers["Mcp-Name"] = name
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        try:
            response = httpx.post(self.url, json=body, headers=headers, timeout=self.timeout_s)
        except httpx.HTTPError as exc:
            raise NativeError(0, f"{type(exc).__name__}: {exc}") from None
        answer = _answer(response.headers.get("content-type", ""), response.text, request_id)
        if answer is None:
            raise NativeError(0, f"HTTP {response.status_code}: {response.text[:300]!r}")
        error = answer.get("error")
        if isinstance(error, dict):
            raise NativeError(int(error.get("code") or 0), str(error.get("message")))
        result = answer.get("result")
        if not isinstance(result, dict):
            raise NativeError(0, f"no result object: {json.dumps(answer)[:300]}")
        return result

    def advertises_tasks(self) -> bool:
        """Whether ``server/discover`` lists the tasks extension."""
        try:
            found = self.request("server/discover")
        except NativeError:
            return False
        capabilities = found.get("capabilities")
        extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
        return isinstance(extensions, dict) and TASKS_EXTENSION_ID in extensions

    def until_terminal(self, run: NativeRun, task_id: str, timeout_s: float) -> None:
        """Poll ``tasks/get`` until a terminal status (or the deadline); fill ``run.final``."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                got = self.request("tasks/get", {"taskId": task_id})
            except NativeError as exc:
                run.error = f"tasks/get {task_id!r} answered {exc}"
                return
            run.final = got
            run.polls.append(str(got.get("status")))
            if got.get("status") in TERMINAL_STATUSES or time.monotonic() >= deadline:
                return
            time.sleep(POLL_S)


def _answer(content_type: str, text: str, request_id: int) -> dict[str, Any] | None:
    """The JSON-RPC answer with ``request_id`` from a JSON or SSE response body."""
    if "text/event-stream" in content_type:
        for line in text.splitlines():
            if line.startswith("data:"):
                try:
                    message = json.loads(line.removeprefix("data:").strip())
                except ValueError:
                    continue
                if isinstance(message, dict) and message.get("id") == request_id:
                    return message
        return None
    try:
        message = json.loads(text)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None
