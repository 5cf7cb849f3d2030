#!/usr/bin/env bash
# CI proof that the kit serves every MCP server framework (issue 12), each in an isolated
# environment holding only the built wheel and that framework:
#   1. the sleeper's task tools through each framework's own in-memory client
#      (mcp 1.x FastMCP, mcp 2.x MCPServer, standalone FastMCP): check_framework.py;
#   2. the conformance suite (its client on mcp 2.x) against a sleeper built on mcp 2.x,
#      over streamable HTTP, and against one built on standalone FastMCP;
#   3. the conformance suite against the README's example (examples/navigation.py) on each
#      framework, over SSE and streamable HTTP;
#   4. the MCP tasks extension (issue 24): the official suite's tasks-* scenarios against
#      examples/tasks_fixture.py copied out of the repository into an environment holding
#      only the wheel and mcp 2.x, and a broken native face (tests/conformance_broken/
#      native_disagrees.py) failing exactly test_native_task_agrees_with_the_events.
# Needs uv and PyPI. Exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$HOME/.local/bin:$PATH"

dist="$(mktemp -d)"
trap 'rm -rf "$dist"' EXIT
uv build --wheel --out-dir "$dist" --quiet
wheel="$(ls "$dist"/robot_mcp_kit-*.whl)"
python="${FRAMEWORKS_PYTHON:-3.11}"

isolated() {  # isolated SPEC... -- CMD...: run CMD where only the wheel and SPECs are installed
  local with=()
  while [ "$1" != "--" ]; do with+=(--with "$1"); shift; done
  shift
  uv run --quiet --isolated --no-project --python "$python" --with "$wheel" "${with[@]}" "$@"
}

for pair in "mcp1=mcp>=1.28.1,<2" "mcp2=mcp>=2,<3" "fastmcp=fastmcp>=2.10"; do
  framework="${pair%%=*}"
  isolated "${pair#*=}" -- python tests/frameworks/check_framework.py "$framework"
done

# Telemetry on each framework (issue 32): mcp.server.operation.duration for every tool call,
# whether the kit makes the SERVER span (mcp 1.x) or the framework does (mcp 2.x, FastMCP).
for pair in "mcp1=mcp>=1.28.1,<2" "mcp2=mcp>=2,<3" "fastmcp=fastmcp>=2.10"; do
  framework="${pair%%=*}"
  isolated "$wheel[observability]" "${pair#*=}" -- \
    python tests/frameworks/check_telemetry.py "$framework"
done

suite_args=(--start-args '{"duration_s": 0.5, "tick_s": 0.1}'
            --fail-args '{"duration_s": 0.3, "tick_s": 0.1, "fail": true}'
            --cancel-args '{"duration_s": 30, "tick_s": 0.1}'
            --input-args '{"duration_s": 0.3, "tick_s": 0.1, "confirm": true}')

echo "conformance suite (mcp 2.x client) against the sleeper on mcp 2.x over streamable HTTP"
echo "(with its native face: the tasks extension and the events must agree, contract §12):"
isolated "$wheel[conformance]" "mcp>=2,<3" -- \
  robot-mcp-conformance --server-cmd "python examples/sleeper.py" \
  --transport streamable-http "${suite_args[@]}" -q

echo "conformance suite against the sleeper on standalone FastMCP over streamable HTTP:"
SLEEPER_FRAMEWORK=fastmcp isolated "$wheel[conformance]" "fastmcp>=2.10" -- \
  robot-mcp-conformance --server-cmd "python examples/sleeper.py" \
  --transport streamable-http "${suite_args[@]}" -q
# The README's example, as written, on each framework (issue 19): serve() takes the
# transport and port the suite gives it through MCP_TRANSPORT / MCP_PORT.
navigation_args=(--server-cmd "python examples/navigation.py" --server-name navigation
                 --start-tool navigate_to --start-args '{"place": "dock", "speed": 20}'
                 --fail-args '{"place": "nowhere", "speed": 20}'
                 --cancel-args '{"place": "far_corner", "speed": 0.1}')
for pair in "mcp1=mcp>=1.28.1,<2" "mcp2=mcp>=2,<3" "fastmcp=fastmcp>=2.10"; do
  for transport in sse streamable-http; do
    echo "conformance suite against the README's example on ${pair%%=*} over $transport:"
    isolated "$wheel[conformance]" "${pair#*=}" -- \
      robot-mcp-conformance "${navigation_args[@]}" --transport "$transport" -q
  done
done
# The official suite's tasks-* scenarios (scripts/mcp_conformance.py installs the pinned
# suite) against the fixture, run as an author would: a copy of the one file, outside the
# repository, where only the wheel and mcp 2.x are installed.
fixture_dir="$(mktemp -d)"
trap 'rm -rf "$dist" "$fixture_dir"' EXIT
cp examples/tasks_fixture.py "$fixture_dir/"
echo "official MCP conformance suite, tasks-* scenarios, against examples/tasks_fixture.py:"
uv run --frozen python scripts/mcp_conformance.py --target tasks --tasks-cmd \
  "uv run --quiet --isolated --no-project --python $python --with $wheel --with mcp>=2.3,<3 python $fixture_dir/tasks_fixture.py"

# The native-agreement clause (contract §12) can fail: a native face that reports its own
# result fails exactly test_native_task_agrees_with_the_events, nothing else.
echo "conformance suite against a broken native face (tests/conformance_broken/native_disagrees.py):"
broken_out="$fixture_dir/native_disagrees.txt"
if (cd tests/conformance_broken && isolated "$wheel[conformance]" "mcp>=2.3,<3" -- \
    robot-mcp-conformance --server-cmd "python native_disagrees.py" \
    --transport streamable-http "${suite_args[@]}" -q -rf) >"$broken_out" 2>&1; then
  cat "$broken_out"; echo "native_disagrees passed the suite: the §12 clause cannot fail"; exit 1
fi
failed="$(grep -c '^FAILED' "$broken_out" || true)"
if [ "$failed" != 1 ] || ! grep -q '^FAILED.*test_native_task_agrees_with_the_events' "$broken_out"; then
  cat "$broken_out"; echo "native_disagrees: expected exactly test_native_task_agrees_with_the_events to fail"; exit 1
fi
echo "  ok  native_disagrees fails exactly test_native_task_agrees_with_the_events"
echo "frameworks: all checks passed"
