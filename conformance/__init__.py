"""The Async Task Contract conformance suite (DESIGN §7).

Run it against any task-capable MCP server::

    uv run pytest conformance --server-url http://127.0.0.1:9100/sse

Every test checks one clause of the contract (kit spec §3 and §4) and, when it fails,
names that clause and shows the offending event or response. ``conftest.py`` holds the
options and fixtures; ``_target.py`` the server process and the MCP client;
``_scenarios.py`` the task runs the tests inspect; ``_checks.py`` the clause catalogue
and the failure messages. See ``conformance/README.md``.
"""
