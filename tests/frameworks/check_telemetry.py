"""Every framework's server records ``mcp.server.operation.duration`` (issue 32, finding 8).

Run in an isolated environment holding the built wheel with its ``observability`` extra
and one framework (``tests/frameworks/run.sh`` does)::

    uv run --isolated --no-project --with 'dist/robot_mcp_kit-*.whl[observability]' \\
        --with 'mcp>=2,<3' python tests/frameworks/check_telemetry.py mcp2

The sleeper is built on the framework with telemetry on (an SDK ``MeterProvider`` with an
in-memory reader), its tools are called through the framework's own in-memory client,
and the histogram must hold a point for each tool called (``gen_ai.tool.name``), each
naming its ``mcp.method.name``, a tool that raised measured as ``error.type`` ``tool_error``
on every framework. Prints one line per check; exits 0 when all hold, 1 with the
first that did not.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from check_framework import SLEEPER, CheckFailed, check, connect

METRIC = "mcp.server.operation.duration"


def points(reader: Any) -> list[dict[str, Any]]:
    """The attributes of every data point of the duration histogram collected so far."""
    found: list[dict[str, Any]] = []
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == METRIC:
                    found.extend(dict(p.attributes) for p in metric.data.data_points)
    return found


async def run(framework: str) -> None:
    import importlib.util

    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider

    from robot_mcp_kit import TaskManager, telemetry
    from robot_mcp_kit.testing import RecordingPoster

    reader = InMemoryMetricReader()
    telemetry.enable(
        tracer_provider=TracerProvider(), meter_provider=MeterProvider(metric_readers=[reader])
    )
    spec = importlib.util.spec_from_file_location("sleeper_example", SLEEPER)
    assert spec is not None
    assert spec.loader is not None
    sleeper = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sleeper)
    manager = TaskManager("sleeper", RecordingPoster())
    server = sleeper.build_server(manager, framework=framework)

    @server.tool()
    async def boom(x: int) -> str:
        raise RuntimeError("the robot's arm is stuck")

    async with connect(framework, server) as (client, _info):
        for tool, arguments in (
            ("list_tasks", {}),
            ("get_task", {"task_id": "t_unknown"}),
            ("boom", {"x": 1}),
        ):
            if framework == "fastmcp":
                await client.call_tool_mcp(tool, arguments)
            else:
                await client.call_tool(tool, arguments)
    seen = points(reader)
    calls = {p.get("gen_ai.tool.name"): p for p in seen if p.get("mcp.method.name") == "tools/call"}
    check(
        {"list_tasks", "get_task", "boom"} <= calls.keys(),
        f"{METRIC} has a point per tool called",
        seen,
    )
    check("error.type" not in calls["list_tasks"], "a call that worked has no error.type", seen)
    check(
        calls["boom"].get("error.type") == "tool_error",
        "a tool that raised is measured as error.type tool_error (its isError result)",
        seen,
    )
    check(
        all(p.get("mcp.method.name") for p in seen),
        f"every {METRIC} point names its mcp.method.name",
        seen,
    )
    telemetry.disable()


def main() -> int:
    framework = sys.argv[1]
    print(f"{framework}: {METRIC}")
    try:
        asyncio.run(run(framework))
    except CheckFailed as failed:
        print(f"  FAILED  {failed}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
