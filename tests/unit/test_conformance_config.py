"""The conformance suite's option parsing: defaults, fallbacks and what is refused."""

from __future__ import annotations

import sys
from typing import Any

import pytest

import robot_mcp_conformance as target


def build(**options: Any) -> Any:
    raw: dict[str, Any] = dict.fromkeys(
        (
            "server_url",
            "server_cmd",
            "secret",
            "callback_port",
            "server_name",
            "start_tool",
            "start_args",
            "fail_args",
            "cancel_args",
        )
    )
    raw.update(options)
    return target.Config.build(**raw)


class TestDefaults:
    def test_no_options_run_the_bundled_sleeper_on_free_ports(self):
        """Without a target the suite starts examples/sleeper.py with a free callback port."""
        cfg = build()
        assert cfg.defaulted
        assert cfg.server_url is None
        assert cfg.server_cmd == (sys.executable, str(target.SLEEPER_PATH))
        assert cfg.callback_port == 0
        assert (cfg.secret, cfg.server_name) == ("s3cret", "sleeper")
        assert cfg.start_tool == "sleep_task"
        assert cfg.start_args == target.SLEEPER_START_ARGS
        assert cfg.fail_args == target.SLEEPER_FAIL_ARGS
        assert cfg.long_args == target.SLEEPER_CANCEL_ARGS

    def test_server_url_listens_for_events_on_8765(self):
        """A running server cannot be told a free port, so fake_rvc takes 8765."""
        cfg = build(server_url="http://127.0.0.1:9100/sse")
        assert cfg.callback_port == 8765
        assert not cfg.defaulted
        assert cfg.describe_target() == "http://127.0.0.1:9100/sse"

    def test_own_start_tool_drops_the_sleeper_argument_sets(self):
        """With --start-tool, start args default to {} and there is no fail or cancel set."""
        cfg = build(server_cmd="python nav.py --sim", start_tool="navigate_to")
        assert cfg.server_cmd == ("python", "nav.py", "--sim")
        assert cfg.start_args == {}
        assert cfg.fail_args is None
        assert cfg.cancel_args is None
        assert cfg.long_args == {}

    def test_cancel_args_fall_back_to_start_args(self):
        """Without --cancel-args the cancel tests use --start-args."""
        cfg = build(start_tool="go", start_args='{"to": "dock"}')
        assert cfg.long_args == {"to": "dock"}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"server_url": "http://127.0.0.1:9/sse", "server_cmd": "python s.py"},
            "--server-url and --server-cmd are alternatives",
        ),
        (
            {"server_url": "127.0.0.1:9100"},
            "--server-url must be the server's SSE or streamable-HTTP endpoint",
        ),
        (
            {"server_url": "http://127.0.0.1:9/sse", "callback_port": "0"},
            "--callback-port 0 (a free port) only works with --server-cmd",
        ),
        ({"callback_port": "http"}, "--callback-port must be a port number"),
        ({"callback_port": "70000"}, "--callback-port must be 0-65535"),
        ({"start_args": "{duration_s: 1}"}, "--start-args must be a JSON object"),
        ({"start_tool": "go", "fail_args": "[1, 2]"}, "--fail-args must be a JSON object"),
        ({"task_timeout_s": "-1"}, "--task-timeout must be > 0"),
        ({"other_bearer_token": "tok-b"}, "--other-bearer-token needs --bearer-token"),
        (
            {"bearer_token": "tok-a", "other_bearer_token": "tok-a"},
            "--other-bearer-token is the same token as --bearer-token",
        ),
        ({"bearer_token": "Bearer tok-a"}, "--bearer-token must be the bare token"),
        ({"bearer_token": "tok\u00a0a"}, "--bearer-token must be printable ASCII"),
        ({"server_cmd": "   "}, None),
    ],
)
def test_contradictory_or_malformed_options_are_refused(options, message):
    """Bad option values raise ConfigError saying what is valid (a blank command is unset)."""
    if message is None:
        assert build(**options).defaulted
        return
    with pytest.raises(target.ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build(**options)


class TestTokens:
    """--bearer-token and --other-bearer-token: the Authorization header of each principal."""

    def test_no_token_no_header(self):
        cfg = build()
        assert cfg.auth_headers() == {} == cfg.auth_headers(other=True)

    def test_each_principal_sends_its_own_token(self):
        cfg = build(bearer_token=" tok-a ", other_bearer_token="tok-b")
        assert cfg.auth_headers() == {"Authorization": "Bearer tok-a"}
        assert cfg.auth_headers(other=True) == {"Authorization": "Bearer tok-b"}


class TestTransport:
    """--transport: auto (detected) by default, or forced; anything else is refused."""

    def test_auto_leaves_the_transport_to_detection(self):
        assert build(server_url="http://127.0.0.1:9/mcp").transport is None
        assert build(server_url="http://127.0.0.1:9/mcp", transport="auto").transport is None

    @pytest.mark.parametrize("transport", ["sse", "streamable-http", " SSE "])
    def test_a_named_transport_is_kept(self, transport):
        cfg = build(server_url="http://127.0.0.1:9/x", transport=transport)
        assert cfg.transport == transport.strip().lower()

    def test_an_unknown_transport_is_refused(self):
        with pytest.raises(target.ConfigError, match="--transport must be auto, sse or"):
            build(server_url="http://127.0.0.1:9/x", transport="websocket")

    def test_no_target_without_the_bundled_sleeper_is_a_config_error(self, monkeypatch, tmp_path):
        """Installed from the wheel (no examples/), the suite asks for a target."""
        with pytest.raises(target.ConfigError, match="no server to test: give --server-url"):
            build(sleeper_path=tmp_path / "missing.py")
