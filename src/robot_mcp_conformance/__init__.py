"""The Async Task Contract conformance suite (DESIGN §7), installable and runnable anywhere.

Install it with ``pip install 'robot-mcp-kit[conformance]'`` and run it three ways::

    pytest conformance --server-url URL                       # in a checkout of this repo
    pytest --pyargs robot_mcp_conformance --server-url URL    # in any project
    robot-mcp-conformance URL [options]                       # the console script

``URL`` is an SSE or a streamable-HTTP endpoint (detected, or ``--transport``). Every test
checks one clause of the contract (``docs/contract.md``) and, when it fails, names that
clause and shows the offending event or response. :mod:`.plugin` holds the options (a
``pytest11`` plugin); :mod:`._fixtures` the fixtures; :mod:`._target` the server process,
transport detection and the MCP client; :mod:`._scenarios` the task runs the tests
inspect; :mod:`._checks` the clause catalogue and the failure messages; :mod:`._cli` the
console script.
"""

from robot_mcp_kit import __version__

__all__ = ["__version__"]
