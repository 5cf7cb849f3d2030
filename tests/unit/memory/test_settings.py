"""The memory server's settings: environment in, one frozen validated object out."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from robot_mcp_memory._exceptions import SettingsError
from robot_mcp_memory.settings import (
    ENV_VARS,
    Settings,
    Transport,
    load_settings,
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)


class TestDefaults:
    def test_defaults_match_the_spec(self):
        """With no variables set: stdio, 127.0.0.1:9103, data/, robot unknown, no token."""
        s = load_settings()
        assert s.transport is Transport.STDIO
        assert s.host == "127.0.0.1"
        assert s.port == 9103
        assert s.data_dir == Path("data")
        assert s.robot_id == "unknown"
        assert s.token is None
        assert not s.is_http


class TestFromEnvironment:
    def test_every_variable_is_read(self, monkeypatch, tmp_path):
        """Each documented variable reaches its field."""
        monkeypatch.setenv("MCP_TRANSPORT", "streamable-http")
        monkeypatch.setenv("MCP_HOST", "0.0.0.0")
        monkeypatch.setenv("MCP_PORT", "9200")
        monkeypatch.setenv("MEMORY_DATA_DIR", str(tmp_path))
        monkeypatch.setenv("ROBOT_ID", "g1-lab-01")
        monkeypatch.setenv("MEMORY_TOKEN", "s3cret")
        s = load_settings()
        assert s.transport is Transport.STREAMABLE_HTTP
        assert (s.host, s.port, s.data_dir, s.robot_id) == ("0.0.0.0", 9200, tmp_path, "g1-lab-01")
        assert s.token is not None
        assert s.token.get_secret_value() == "s3cret"
        assert s.is_http

    def test_transport_is_case_insensitive(self, monkeypatch):
        """MCP_TRANSPORT=SSE is sse."""
        monkeypatch.setenv("MCP_TRANSPORT", " SSE ")
        assert load_settings().transport is Transport.SSE

    def test_blank_token_means_no_token(self, monkeypatch):
        """A blank MEMORY_TOKEN (as an EnvironmentFile writes it) means no token."""
        monkeypatch.setenv("MEMORY_TOKEN", "  ")
        assert load_settings().token is None

    def test_ascii_whitespace_around_the_token_is_dropped(self, monkeypatch):
        """A trailing newline or spaces (an EnvironmentFile, a heredoc) are not the token."""
        monkeypatch.setenv("MEMORY_TOKEN", " \tadmin-token-0123456789\r\n")
        token = load_settings().token
        assert token is not None
        assert token.get_secret_value() == "admin-token-0123456789"

    def test_token_is_hidden_in_repr(self, monkeypatch):
        """The token never appears in the settings' repr (logs, tracebacks)."""
        monkeypatch.setenv("MEMORY_TOKEN", "hunter2hunter2")
        assert "hunter2" not in repr(load_settings())


class TestValidation:
    @pytest.mark.parametrize(
        ("variable", "value"),
        [
            ("MCP_TRANSPORT", "websocket"),
            ("MCP_PORT", "0"),
            ("MCP_PORT", "65536"),
            ("MCP_PORT", "ninety"),
            ("MCP_HOST", " "),
            ("ROBOT_ID", ""),
            ("ROBOT_ID", "two words"),
            ("MEMORY_TOKEN", "has space"),
            # Issue 18: only ASCII whitespace around the token is dropped.
            ("MEMORY_TOKEN", "\xa0admin-token-0123456789"),
            ("MEMORY_TOKEN", "admin-token-0123456789\x85"),
            ("MEMORY_TOKEN", "admin-token-0123456789\u2003"),
            ("MEMORY_TOKEN", "\u3000"),
            ("MEMORY_TOKEN", "admin-tökén-0123456789"),
            ("MEMORY_ROBOT_TOKENS", "rap-1:\xa0robot-token-0123456789"),
        ],
    )
    def test_invalid_value_is_one_line_naming_the_variable(self, monkeypatch, variable, value):
        """A bad variable raises SettingsError: one line that names the variable."""
        monkeypatch.setenv(variable, value)
        with pytest.raises(SettingsError) as info:
            load_settings()
        assert info.value.variable == variable
        message = str(info.value)
        assert "\n" not in message
        assert message.startswith(f"invalid {variable}=")

    def test_bad_transport_message_lists_the_valid_ones(self, monkeypatch):
        """The transport error says what is valid."""
        monkeypatch.setenv("MCP_TRANSPORT", "websocket")
        with pytest.raises(SettingsError, match="streamable-http"):
            load_settings()

    def test_bad_token_value_is_not_echoed(self, monkeypatch):
        """Even an invalid token is not printed in the error."""
        monkeypatch.setenv("MEMORY_TOKEN", "secret with space")
        with pytest.raises(SettingsError) as info:
            load_settings()
        assert "secret" not in str(info.value)

    def test_settings_are_frozen(self):
        """A settings object cannot be changed after validation."""
        s = Settings(transport="sse")
        with pytest.raises(ValidationError):
            s.port = 1  # type: ignore[misc]

    def test_fields_by_name_in_code(self, tmp_path):
        """Tests and callers construct settings with field names."""
        s = Settings(transport="sse", port=1234, data_dir=tmp_path, robot_id="r1")
        assert (s.transport, s.port, s.data_dir) == (Transport.SSE, 1234, tmp_path)


class TestAllowedHosts:
    def test_allowed_hosts_are_split_and_trimmed(self, monkeypatch):
        """MEMORY_ALLOWED_HOSTS is a comma-separated list of host, host:port or host:*."""
        monkeypatch.setenv("MEMORY_ALLOWED_HOSTS", " brain-memory:*, 10.0.0.5:9103 ,[::1]:*,")
        assert load_settings().allowed_host_list == ("brain-memory:*", "10.0.0.5:9103", "[::1]:*")

    @pytest.mark.parametrize("bad", ["http://brain-memory", "brain memory", "host:port", "a/b"])
    def test_a_url_or_junk_is_refused_naming_the_variable(self, monkeypatch, bad):
        """A scheme, a path or a space is refused in one line naming the variable."""
        monkeypatch.setenv("MEMORY_ALLOWED_HOSTS", bad)
        with pytest.raises(SettingsError) as err:
            load_settings()
        assert err.value.variable == "MEMORY_ALLOWED_HOSTS"
        assert "\n" not in str(err.value)

    def test_unset_leaves_fastmcp_default(self):
        """Unset: no explicit transport security (FastMCP checks loopback binds itself)."""
        from robot_mcp_memory.server import transport_security

        assert transport_security(Settings()) is None
        explicit = transport_security(Settings(allowed_hosts="brain-memory:*"))
        assert explicit is not None
        assert explicit.enable_dns_rebinding_protection
        assert "brain-memory:*" in explicit.allowed_hosts
        assert "https://brain-memory:*" in explicit.allowed_origins


class TestHttpLimits:
    def test_defaults(self):
        """Unset: 256 connections, a 10 s header timeout."""
        s = load_settings()
        assert (s.max_connections, s.header_timeout_s) == (256, 10.0)

    def test_read_from_the_environment(self, monkeypatch):
        monkeypatch.setenv("MEMORY_MAX_CONNECTIONS", "512")
        monkeypatch.setenv("MEMORY_HEADER_TIMEOUT_S", "2.5")
        s = load_settings()
        assert (s.max_connections, s.header_timeout_s) == (512, 2.5)

    @pytest.mark.parametrize(
        ("variable", "value"),
        [
            ("MEMORY_MAX_CONNECTIONS", "3"),
            ("MEMORY_MAX_CONNECTIONS", "65537"),
            ("MEMORY_MAX_CONNECTIONS", "many"),
            ("MEMORY_MAX_CONNECTIONS", "1.5"),
            ("MEMORY_HEADER_TIMEOUT_S", "0"),
            ("MEMORY_HEADER_TIMEOUT_S", "-1"),
            ("MEMORY_HEADER_TIMEOUT_S", "301"),
            ("MEMORY_HEADER_TIMEOUT_S", "nan"),
            ("MEMORY_HEADER_TIMEOUT_S", "inf"),
            ("MEMORY_HEADER_TIMEOUT_S", "ten"),
        ],
    )
    def test_out_of_range_is_one_line_naming_the_variable_and_the_range(
        self, monkeypatch, variable, value
    ):
        monkeypatch.setenv(variable, value)
        with pytest.raises(SettingsError) as info:
            load_settings()
        message = str(info.value)
        assert info.value.variable == variable
        assert "\n" not in message
        assert message.startswith(f"invalid {variable}={value!r}: ")
        assert f"({variable}: " in message  # the meaning, with the valid range

    def test_listed_for_help(self):
        assert ENV_VARS["MEMORY_MAX_CONNECTIONS"][:2] == ("max_connections", "256")
        assert ENV_VARS["MEMORY_HEADER_TIMEOUT_S"][:2] == ("header_timeout_s", "10")


class TestRobotShares:
    def test_defaults(self):
        """Unset: 4 streams, 16 requests, 4 sessions per robot; 16 slots for the admin."""
        s = load_settings()
        assert (s.robot_max_streams, s.robot_max_requests, s.robot_max_sessions) == (4, 16, 4)
        assert (s.admin_reserve, s.admin_reserve_slots) == (None, 16)

    @pytest.mark.parametrize(("cap", "reserve"), [(4, 1), (32, 8), (64, 16), (1024, 16)])
    def test_default_reserve_is_at_most_a_quarter_of_the_cap(self, monkeypatch, cap, reserve):
        monkeypatch.setenv("MEMORY_MAX_CONNECTIONS", str(cap))
        assert load_settings().admin_reserve_slots == reserve

    def test_read_from_the_environment(self, monkeypatch):
        monkeypatch.setenv("MEMORY_ROBOT_MAX_STREAMS", "2")
        monkeypatch.setenv("MEMORY_ROBOT_MAX_REQUESTS", "5")
        monkeypatch.setenv("MEMORY_ROBOT_MAX_SESSIONS", "3")
        monkeypatch.setenv("MEMORY_ADMIN_RESERVE", "0")
        s = load_settings()
        assert (s.robot_max_streams, s.robot_max_requests, s.robot_max_sessions) == (2, 5, 3)
        assert s.admin_reserve_slots == 0

    @pytest.mark.parametrize(
        ("env", "variable", "names"),
        [
            ({"MEMORY_ROBOT_MAX_STREAMS": "0"}, "MEMORY_ROBOT_MAX_STREAMS", "1-1024"),
            ({"MEMORY_ROBOT_MAX_REQUESTS": "0"}, "MEMORY_ROBOT_MAX_REQUESTS", "1-65536"),
            ({"MEMORY_ROBOT_MAX_SESSIONS": "1025"}, "MEMORY_ROBOT_MAX_SESSIONS", "1-1024"),
            ({"MEMORY_ADMIN_RESERVE": "-1"}, "MEMORY_ADMIN_RESERVE", "kept for MEMORY_TOKEN"),
            (
                {"MEMORY_ROBOT_MAX_STREAMS": "20"},
                "MEMORY_ROBOT_MAX_STREAMS",
                "more than MEMORY_ROBOT_MAX_REQUESTS=16",
            ),
            (
                {"MEMORY_MAX_CONNECTIONS": "32", "MEMORY_ADMIN_RESERVE": "32"},
                "MEMORY_ADMIN_RESERVE",
                "less than MEMORY_MAX_CONNECTIONS=32",
            ),
        ],
    )
    def test_impossible_shares_are_one_line_naming_the_variable(
        self, monkeypatch, env, variable, names
    ):
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        with pytest.raises(SettingsError) as info:
            load_settings()
        assert info.value.variable == variable
        assert "\n" not in str(info.value)
        assert names in str(info.value)

    def test_listed_for_help(self):
        for variable, field in (
            ("MEMORY_ROBOT_MAX_STREAMS", "robot_max_streams"),
            ("MEMORY_ROBOT_MAX_REQUESTS", "robot_max_requests"),
            ("MEMORY_ROBOT_MAX_SESSIONS", "robot_max_sessions"),
            ("MEMORY_ADMIN_RESERVE", "admin_reserve"),
        ):
            assert ENV_VARS[variable][0] == field


class TestFairShare:
    def test_defaults(self):
        """Unset: 1 call at once, 8 waiting and a tenth of the time per robot token and lane;
        512 KiB answers."""
        s = load_settings()
        assert (s.robot_max_calls, s.robot_max_queued, s.robot_time_share) == (1, 8, 0.1)
        assert s.max_answer_bytes == 524288

    def test_read_from_the_environment(self, monkeypatch):
        monkeypatch.setenv("MEMORY_ROBOT_MAX_CALLS", "4")
        monkeypatch.setenv("MEMORY_ROBOT_MAX_QUEUED", "0")
        monkeypatch.setenv("MEMORY_MAX_ANSWER_BYTES", "1048576")
        monkeypatch.setenv("MEMORY_ROBOT_TIME_SHARE", "0.5")
        s = load_settings()
        assert (s.robot_max_calls, s.robot_max_queued, s.max_answer_bytes) == (4, 0, 1048576)
        assert s.robot_time_share == 0.5

    @pytest.mark.parametrize(
        ("variable", "value"),
        [
            ("MEMORY_ROBOT_MAX_CALLS", "0"),
            ("MEMORY_ROBOT_MAX_CALLS", "65"),
            ("MEMORY_ROBOT_MAX_CALLS", "two"),
            ("MEMORY_ROBOT_MAX_QUEUED", "-1"),
            ("MEMORY_ROBOT_MAX_QUEUED", "1025"),
            ("MEMORY_MAX_ANSWER_BYTES", "1000"),
            ("MEMORY_MAX_ANSWER_BYTES", "512KiB"),
            ("MEMORY_MAX_ANSWER_BYTES", "67108865"),
            ("MEMORY_ROBOT_TIME_SHARE", "0"),
            ("MEMORY_ROBOT_TIME_SHARE", "1.5"),
            ("MEMORY_ROBOT_TIME_SHARE", "nan"),
            ("MEMORY_ROBOT_TIME_SHARE", "10%"),
        ],
    )
    def test_out_of_range_is_one_line_naming_the_variable_and_the_range(
        self, monkeypatch, variable, value
    ):
        monkeypatch.setenv(variable, value)
        with pytest.raises(SettingsError) as info:
            load_settings()
        message = str(info.value)
        assert info.value.variable == variable
        assert "\n" not in message
        assert message.startswith(f"invalid {variable}={value!r}: ")
        assert f"({variable}: " in message

    def test_listed_for_help(self):
        assert ENV_VARS["MEMORY_ROBOT_MAX_CALLS"][:2] == ("robot_max_calls", "1")
        assert ENV_VARS["MEMORY_ROBOT_MAX_QUEUED"][:2] == ("robot_max_queued", "8")
        assert ENV_VARS["MEMORY_MAX_ANSWER_BYTES"][:2] == ("max_answer_bytes", "524288")
        assert ENV_VARS["MEMORY_ROBOT_TIME_SHARE"][:2] == ("robot_time_share", "0.1")
