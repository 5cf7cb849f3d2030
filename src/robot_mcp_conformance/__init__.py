"""The Async Task Contract conformance suite (DESIGN §7), installable and runnable anywhere.

Install it with ``pip install 'robot-mcp-kit[conformance]'`` and run it three ways::

    pytest conformance --server-url URL                       # in a checkout of this repo
    pytest --pyargs robot_mcp_conformance --server-url URL    # in any project
    robot-mcp-conformance URL [options]                       # the console script

``URL`` is an SSE or a streamable-HTTP endpoint (detected, or ``--transport``). Every test
checks one clause of the contract (``docs/contract.md``) and, when it fails, names that
clause and shows the offending event or response. :mod:`.plugin` holds the options (a
``pytest11`` plugin); :mod:`._fixtures` the fixtures; :mod:`._config` the options as a
:class:`Config`; :mod:`._process` the server process the suite starts; :mod:`._client`
transport detection and the MCP client; :mod:`._runs` the task runs the tests inspect
and :mod:`._harness` the harness that produces them; :mod:`._checks` the clause
catalogue and the failure messages; :mod:`._cli` the console script; :mod:`._exceptions`
the errors, all :class:`ConformanceError`; :mod:`._report` the JSON report and the
expected failures of both suites.

The receiver suite (``robot-mcp-conformance receiver URL``, :mod:`.receiver`) holds the
brain's ``POST /api/agent/events`` to the contract: :mod:`._receiver_config` its options as
a :class:`ReceiverConfig`, :mod:`._probe` the signed posts, :mod:`._receiver_runs` the
scenarios, :mod:`._hook` the receiver's inspection hook, :mod:`._timing` the statistics of
the timing check, :mod:`._receiver_checks` its clauses, :mod:`._receiver_plugin` its
options and setup in the plugin.

The names below are the suite's public API, for a harness that drives a server the way
the suite does (``McpClient``, ``detect_transport``) or builds its command line.
"""

from robot_mcp_conformance._cli import build_pytest_args
from robot_mcp_conformance._client import McpClient, ToolReply, detect_transport
from robot_mcp_conformance._config import (
    SLEEPER_CANCEL_ARGS,
    SLEEPER_FAIL_ARGS,
    SLEEPER_PATH,
    SLEEPER_START_ARGS,
    Config,
    Transport,
)
from robot_mcp_conformance._exceptions import (
    ConfigError,
    ConformanceError,
    HookError,
    ServerStartError,
    TargetError,
)
from robot_mcp_conformance._process import ServerProcess
from robot_mcp_conformance._receiver_config import ReceiverConfig
from robot_mcp_kit import __version__

__all__ = [
    "SLEEPER_CANCEL_ARGS",
    "SLEEPER_FAIL_ARGS",
    "SLEEPER_PATH",
    "SLEEPER_START_ARGS",
    "Config",
    "ConfigError",
    "ConformanceError",
    "HookError",
    "McpClient",
    "ReceiverConfig",
    "ServerProcess",
    "ServerStartError",
    "TargetError",
    "ToolReply",
    "Transport",
    "__version__",
    "build_pytest_args",
    "detect_transport",
]
