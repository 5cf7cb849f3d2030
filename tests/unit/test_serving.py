"""serve_options: the MCP_TRANSPORT / MCP_HOST / MCP_PORT convention, read from a mapping.

The serving itself runs as real processes in ``tests/integration/test_serve.py`` (mcp 1.x)
and ``tests/frameworks/run.sh`` (all three frameworks).
"""

from __future__ import annotations

import pytest

from robot_mcp_kit import ConfigurationError
from robot_mcp_kit.serving import ServeOptions, serve_options


def test_an_empty_environment_takes_the_defaults():
    assert serve_options({}) == ServeOptions("stdio", "127.0.0.1", 8000)


def test_the_defaults_can_be_the_server_s_own():
    options = serve_options({}, default_transport="sse", default_port=9103)
    assert options == ServeOptions("sse", "127.0.0.1", 9103)


def test_set_variables_win_and_blanks_count_as_unset():
    env = {"MCP_TRANSPORT": " streamable-http ", "MCP_HOST": "0.0.0.0", "MCP_PORT": "9200"}
    assert serve_options(env) == ServeOptions("streamable-http", "0.0.0.0", 9200)
    assert serve_options({"MCP_TRANSPORT": "", "MCP_HOST": " ", "MCP_PORT": ""}) == (
        ServeOptions("stdio", "127.0.0.1", 8000)
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"MCP_TRANSPORT": "http"}, "MCP_TRANSPORT must be one of stdio, sse, streamable-http"),
        ({"MCP_TRANSPORT": "SSE"}, "got 'SSE'"),
        ({"MCP_PORT": "9200.5"}, "MCP_PORT must be an integer port from 1 to 65535"),
        ({"MCP_PORT": "99999999999999999999"}, "MCP_PORT must be from 1 to 65535"),
        ({"MCP_PORT": "-1"}, "got -1"),
        ({"MCP_PORT": "0"}, "got 0"),
    ],
)
def test_a_bad_value_names_the_variable_and_what_it_accepts(env, message):
    with pytest.raises(ConfigurationError, match=message.replace(".", r"\.")):
        serve_options(env)
