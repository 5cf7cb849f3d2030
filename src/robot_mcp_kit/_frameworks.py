"""The MCP frameworks the task tools run on: which one built a server, and how to add a tool.

:func:`detect_framework` tells mcp 1.x ``FastMCP``, mcp 2.x ``MCPServer`` and standalone
``fastmcp.FastMCP`` apart by the server's class; :func:`_add_tool` registers a function
(sync or async, answering a model or a dict) on any of them with a declared output schema,
structured content and one text content holding the same object as JSON;
:func:`shown_to_client` makes an error of the kit one that every framework loaded in the
process passes on to the MCP client; :func:`before_serving` runs a coroutine when a server
starts serving.

Imports no framework at import time, only inside the functions, from what it is given.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import sys
import typing
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, TypeVar, cast

from pydantic import BaseModel, ConfigDict

from robot_mcp_kit import telemetry
from robot_mcp_kit.log import get_logger

__all__ = [
    "Framework",
    "before_serving",
    "detect_framework",
    "shown_to_client",
    "trace_tool_calls",
]

_E = TypeVar("_E", bound=BaseException)
_log = get_logger("robot_mcp_kit.serving")


Framework = Literal["mcp1", "mcp2", "fastmcp"]
"""``mcp1``: mcp 1.x ``FastMCP``; ``mcp2``: mcp 2.x ``MCPServer``; ``fastmcp``: standalone."""


def detect_framework(server: Any) -> Framework:
    """Which framework built ``server``, from its class (no import of any framework).

    Raises:
        ImportError: no framework is installed at all (the ``mcp`` extra is missing).
        TypeError: ``server`` is none of mcp 1.x ``FastMCP``, mcp 2.x ``MCPServer`` or
            standalone ``fastmcp.FastMCP``.
    """
    for cls in type(server).__mro__:
        module = cls.__module__ or ""
        if module == "fastmcp" or module.startswith("fastmcp."):
            return "fastmcp"
        if module.startswith("mcp.server.mcpserver"):
            return "mcp2"
        if module.startswith("mcp.server.fastmcp"):
            return "mcp1"
    import importlib.util

    if importlib.util.find_spec("mcp") is None and importlib.util.find_spec("fastmcp") is None:
        raise ImportError(
            "register_task_tools needs an MCP framework: pip install 'robot-mcp-kit[mcp]' "
            "(or fastmcp)."
        )
    raise TypeError(
        f"register_task_tools needs an mcp.server.fastmcp.FastMCP (mcp 1.x), an "
        f"mcp.server.mcpserver.MCPServer (mcp 2.x) or a fastmcp.FastMCP, got "
        f"{type(server).__module__}.{type(server).__qualname__}."
    )


_TOOL_ERROR_MODULES = (
    # mcp 2.x MCPServer shows the client a failure's text only for its ToolError (any
    # other exception reads "Error executing tool <name>"), issue 19.
    "mcp.server.mcpserver.exceptions",
    # Standalone FastMCP shows any failure's text, but only a FastMCPError's once
    # mask_error_details=True.
    "fastmcp.exceptions",
    # mcp 1.x FastMCP shows any failure's text; its ToolError for `except ToolError`.
    "mcp.server.fastmcp.exceptions",
)
_shown_classes: dict[tuple[type[BaseException], ...], type[BaseException]] = {}


def _loaded_tool_errors() -> tuple[type[Exception], ...]:
    """The ``ToolError`` class of each framework already imported (none is imported here)."""
    found: list[type[Exception]] = []
    for name in _TOOL_ERROR_MODULES:
        cls = getattr(sys.modules.get(name), "ToolError", None)
        if isinstance(cls, type) and issubclass(cls, Exception) and cls not in found:
            found.append(cls)
    return tuple(found)


def shown_to_client(exc: _E) -> _E:
    """``exc``, as an error each MCP framework loaded in the process shows its client.

    A copy of ``exc`` (same message and attributes) whose class subclasses both
    ``type(exc)`` and the ``ToolError`` of every framework imported so far, so that
    ``except type(exc)`` still catches it and a tool that lets it escape gives the client
    its message (mcp 2.x hides any other exception's text). ``exc`` itself when no
    framework is loaded. Imports nothing; thread-safe enough (a race builds a class twice).
    """
    bases = _loaded_tool_errors()
    if not bases or isinstance(exc, bases):
        return exc
    key: tuple[type[BaseException], ...] = (type(exc), *bases)
    cls = _shown_classes.get(key)
    if cls is None:
        cls = type(
            type(exc).__name__,
            (type(exc), *bases),
            {
                "__module__": type(exc).__module__,
                "__qualname__": type(exc).__qualname__,
                "__doc__": type(exc).__doc__,
                # FastMCP logs a FastMCPError at its log_level, set by an __init__ a copy
                # never runs: an expected refusal, not a crash.
                "log_level": logging.WARNING,
            },
        )
        _shown_classes[key] = cls
    shown = cast("_E", cls.__new__(cls, *exc.args))
    shown.__dict__.update(exc.__dict__)
    return shown.with_traceback(exc.__traceback__)


def _output_model(name: str, schema: dict[str, Any]) -> type[BaseModel]:
    """A pydantic model the mcp SDK takes as the output type: ``schema``, any object valid.

    The mcp SDK (1.x and 2.x) derives a tool's output schema from the model in
    ``Annotated[CallToolResult, Model]`` and validates the returned structured content
    with it; the content is already checked here (it is a ``TaskInfo`` or an error), so the
    model admits any object and only lends its schema.
    """

    def replace_schema(target: dict[str, Any]) -> None:
        target.clear()
        target.update(schema)

    config = ConfigDict(extra="allow", json_schema_extra=replace_schema)
    model = type(name, (BaseModel,), {"model_config": config, "__module__": __name__})
    return cast("type[BaseModel]", model)


def _resolved_signature(fn: Callable[..., Any]) -> inspect.Signature:
    """``fn``'s signature with its string annotations resolved in ``fn``'s own globals."""
    hints = typing.get_type_hints(fn, include_extras=True)
    sig = inspect.signature(fn)
    params = [
        p.replace(annotation=hints.get(p.name, p.annotation)) for p in sig.parameters.values()
    ]
    return sig.replace(parameters=params)


def _as_object(value: Any) -> dict[str, Any]:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return value
    raise TypeError(
        f"a task tool must answer a pydantic model or a dict, got {type(value).__name__}"
    )


def _add_tool(
    server: Any,
    fn: Callable[..., Any],
    *,
    name: str,
    description: str | None,
    annotations: dict[str, Any] | None,
    output_schema: dict[str, Any],
) -> None:
    """Register ``fn`` (sync or async, answering a model or a dict) on ``server``.

    The client sees ``output_schema`` and, for each call, structured content equal to the
    answer's JSON object plus one text content holding the same object as JSON.
    """
    framework = detect_framework(server)
    sig = _resolved_signature(fn)

    async def run(**kwargs: Any) -> dict[str, Any]:
        value = fn(**kwargs)
        if inspect.isawaitable(value):
            value = await value
        return _as_object(value)

    if framework == "fastmcp":

        @functools.wraps(fn)
        async def fastmcp_tool(**kwargs: Any) -> dict[str, Any]:
            return await run(**kwargs)

        returns: Any = dict[str, Any]
        tool: Callable[..., Any] = fastmcp_tool
    else:
        from mcp.types import CallToolResult, TextContent

        @functools.wraps(fn)
        async def sdk_tool(**kwargs: Any) -> Any:
            value = await run(**kwargs)
            return CallToolResult(
                content=[TextContent(type="text", text=json.dumps(value))],
                structuredContent=value,
            )

        returns = Annotated[CallToolResult, _output_model(f"{name}_output", output_schema)]
        tool = sdk_tool

    # The frameworks read the parameters (and the output type) from the signature and the
    # annotations, resolved already: the wrapper's globals are this module's, not fn's.
    del tool.__wrapped__  # type: ignore[attr-defined]
    tool.__signature__ = sig.replace(return_annotation=returns)  # type: ignore[attr-defined]
    tool.__annotations__ = {
        **{p.name: p.annotation for p in sig.parameters.values()},
        "return": returns,
    }
    tool.__name__ = name

    if framework == "fastmcp":
        server.tool(
            tool,
            name=name,
            description=description,
            annotations=annotations,
            output_schema=output_schema,
        )
    else:
        from mcp.types import ToolAnnotations

        server.add_tool(
            tool,
            name=name,
            description=description,
            annotations=None if annotations is None else ToolAnnotations(**annotations),
        )


_SERVE_METHODS = (
    "run_stdio_async",
    "run_sse_async",
    "run_streamable_http_async",
    "run_http_async",
)
"""What each framework serves through: mcp 1.x and 2.x ``run()`` call the first three,
standalone FastMCP's ``run()`` / ``run_async()`` the first and the last."""
_BEFORE_SERVING = "_robot_mcp_before_serving"


def before_serving(server: Any, hook: Callable[[], Awaitable[None]]) -> None:
    """Await ``hook`` on the server's event loop each time ``server`` starts serving.

    Wraps, on this instance only, the ``run_*_async`` methods the framework's ``run()``
    serves through (stdio, SSE, streamable HTTP); hooks run in the order given, before the
    transport opens. A hook that raises is logged (``before_serving_failed``) and the
    server serves all the same. A server served another way (its ASGI app under the
    author's own uvicorn) never runs them.
    """
    hooks: list[Callable[[], Awaitable[None]]] | None = server.__dict__.get(_BEFORE_SERVING)
    if hooks is None:
        hooks = []
        for name in _SERVE_METHODS:
            method = getattr(server, name, None)
            if callable(method):
                setattr(server, name, _serving_after(method, hooks))
        setattr(server, _BEFORE_SERVING, hooks)
    hooks.append(hook)


def _serving_after(
    method: Callable[..., Awaitable[Any]], hooks: list[Callable[[], Awaitable[None]]]
) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(method)
    async def serve(*args: Any, **kwargs: Any) -> Any:
        for hook in hooks:
            try:
                await hook()
            except Exception:
                _log.exception(
                    "before_serving_failed",
                    hook=getattr(hook, "__qualname__", repr(hook)),
                    then="serving all the same",
                )
        return await method(*args, **kwargs)

    return serve


_TRACED = "_robot_mcp_traced"


def trace_tool_calls(server: Any) -> bool:
    """Give every ``tools/call`` of ``server`` a SERVER span (while telemetry is on).

    Wraps the low-level ``CallToolRequest`` handler of an mcp 1.x ``FastMCP``: each call
    then continues the caller's trace (``traceparent`` / ``tracestate`` in
    ``params._meta``) in a span ``tools/call {tool}`` with the MCP semantic conventions'
    attributes (:func:`robot_mcp_kit.telemetry.server_span`), and a result with
    ``isError`` sets ``error.type`` to ``tool_error``. While telemetry is off the wrapper
    only calls the handler. Idempotent.

    mcp 2.x ``MCPServer`` and standalone FastMCP make that span themselves (mcp ≥ 2.3 and
    FastMCP ship OpenTelemetry support) but record no ``mcp.server.operation.duration``:
    there a middleware added to the server's chain records it for every request. The task
    spans, the webhooks' trace and the kit's other metrics work on every framework, under
    whatever span is current. Returns False when the server offers no place to hook in.
    """
    framework = detect_framework(server)
    if framework == "mcp2":
        return _measure_mcp2(server)
    if framework == "fastmcp":
        return _measure_fastmcp(server)
    handlers = getattr(getattr(server, "_mcp_server", None), "request_handlers", None)
    if not isinstance(handlers, dict):
        return False
    from mcp import types

    handler = handlers.get(types.CallToolRequest)
    if handler is None:
        return False
    if getattr(handler, _TRACED, False):
        return True

    async def traced_call_tool(request: Any) -> Any:
        if not telemetry.active():
            return await handler(request)
        params = request.params
        meta = params.meta.model_dump() if params.meta is not None else None
        with telemetry.server_span(
            "tools/call", params.name, meta, _request_attributes()
        ) as current:
            result = await handler(request)
            if getattr(getattr(result, "root", result), "isError", False):
                telemetry.set_attributes(current, **{"error.type": "tool_error"})
            return result

    setattr(traced_call_tool, _TRACED, True)
    handlers[types.CallToolRequest] = traced_call_tool
    return True


def _measure_mcp2(server: Any) -> bool:
    """Record ``mcp.server.operation.duration`` for every request an mcp 2.x ``MCPServer``
    serves, through its middleware chain (mcp makes the SERVER span itself)."""
    chain = getattr(server, "middleware", None)
    if not isinstance(chain, list):
        return False
    if any(getattr(link, _TRACED, False) for link in chain):
        return True

    async def measure_request(ctx: Any, call_next: Any) -> Any:
        if not telemetry.active():
            return await call_next(ctx)
        params = ctx.params if isinstance(ctx.params, dict) else {}
        name = params.get("name")
        with telemetry.operation_duration(
            ctx.method, name if isinstance(name, str) else None
        ) as operation:
            try:
                result = await call_next(ctx)
            except Exception as exc:
                code = getattr(getattr(exc, "error", None), "code", None)
                if operation is not None and code is not None:
                    operation.error_type = str(code)  # the JSON-RPC error code, as mcp's span
                raise
            if operation is not None and _is_tool_error(result):
                operation.error_type = "tool_error"
            return result

    setattr(measure_request, _TRACED, True)
    chain.append(measure_request)
    return True


def _measure_fastmcp(server: Any) -> bool:
    """Record ``mcp.server.operation.duration`` for every request a standalone
    ``fastmcp.FastMCP`` serves, through its middleware (FastMCP makes the span itself)."""
    chain = getattr(server, "middleware", None)
    if not isinstance(chain, list):
        return False
    if any(getattr(link, _TRACED, False) for link in chain):
        return True
    from fastmcp.exceptions import FastMCPError  # type: ignore[import-not-found]
    from fastmcp.server.middleware import Middleware  # type: ignore[import-not-found]

    class MeasureRequests(Middleware):  # type: ignore[misc]
        async def on_request(self, context: Any, call_next: Any) -> Any:
            if not telemetry.active():
                return await call_next(context)
            name = getattr(context.message, "name", None)
            with telemetry.operation_duration(
                context.method or "", name if isinstance(name, str) else None
            ) as operation:
                try:
                    result = await call_next(context)
                except FastMCPError:
                    # A tool's error (ToolError, bad arguments, an unknown tool): FastMCP
                    # answers a tools/call with an isError result, as the other
                    # frameworks do, so it is measured as they measure it.
                    if operation is not None and context.method == "tools/call":
                        operation.error_type = "tool_error"
                    raise
                if operation is not None and _is_tool_error(result):
                    operation.error_type = "tool_error"
                return result

    link = MeasureRequests()
    setattr(link, _TRACED, True)
    server.add_middleware(link)
    return True


def _is_tool_error(result: Any) -> bool:
    """A ``CallToolResult`` (model or wire dict) that says ``isError``."""
    if isinstance(result, dict):
        return result.get("isError") is True
    target = getattr(result, "root", result)
    return getattr(target, "isError", None) is True or getattr(target, "is_error", None) is True


def _request_attributes() -> dict[str, Any]:
    """``jsonrpc.request.id`` and ``mcp.session.id`` of the request being handled."""
    module = sys.modules.get("mcp.server.lowlevel.server")
    request_ctx = getattr(module, "request_ctx", None)
    ctx = None if request_ctx is None else request_ctx.get(None)
    if ctx is None:
        return {}
    attributes: dict[str, Any] = {"jsonrpc.request.id": str(ctx.request_id)}
    http = getattr(ctx, "request", None)
    headers = getattr(http, "headers", None)
    session = None
    if headers is not None:
        session = headers.get("mcp-session-id")
    if session is None:
        query = getattr(http, "query_params", None)
        session = None if query is None else query.get("session_id")
    if session:
        attributes["mcp.session.id"] = session
    return attributes
