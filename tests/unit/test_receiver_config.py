"""The receiver's servers: from code, from a file (TOML, JSON, YAML), from the environment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from robot_mcp_kit import ConfigurationError
from robot_mcp_kit.receiver import ServerConfig, load_servers, servers_from_env


class TestServerConfig:
    def test_one_secret_as_a_string_is_one_secret(self):
        """ServerConfig("sleeper", "s3cret") keeps ("s3cret",); the token is not in its repr."""
        server = ServerConfig("sleeper", "s3cret", mcp_url="http://127.0.0.1:9100/sse", token="t0k")  # type: ignore[arg-type]
        assert server.secrets == ("s3cret",)
        assert "t0k" not in repr(server)
        assert server.resolved_transport == "sse"

    @pytest.mark.parametrize(
        ("url", "transport", "resolved"),
        [
            ("http://h:1/sse", "auto", "sse"),
            ("http://h:1/sse/", "auto", "sse"),
            ("http://h:1/mcp", "auto", "streamable-http"),
            ("http://h:1/mcp", "sse", "sse"),
        ],
    )
    def test_the_transport_follows_the_path_unless_given(self, url, transport, resolved):
        assert ServerConfig("s", ("k",), mcp_url=url, transport=transport).resolved_transport == (
            resolved
        )

    @pytest.mark.parametrize(
        ("kwargs", "words"),
        [
            ({"name": "", "secrets": ("k",)}, "Server name ''"),
            ({"name": "a b", "secrets": ("k",)}, "Server name 'a b'"),
            ({"name": "s", "secrets": ()}, "has no secret"),
            ({"name": "s", "secrets": ("",)}, "empty or not text"),
            ({"name": "s", "secrets": ("\ud800",)}, "UTF-8"),
            ({"name": "s", "secrets": ("k",), "mcp_url": "ftp://x/sse"}, "http(s)://"),
            ({"name": "s", "secrets": ("k",), "mcp_url": "not a url"}, "http(s)://"),
            ({"name": "s", "secrets": ("k",), "token": ""}, "non-empty string"),
            ({"name": "s", "secrets": ("k",), "transport": "stdio"}, "auto, sse or"),
        ],
    )
    def test_a_bad_entry_is_refused_in_one_sentence(self, kwargs, words):
        """Each mistake is a ConfigurationError saying what is wrong; no secret is quoted."""
        with pytest.raises(ConfigurationError) as info:
            ServerConfig(**kwargs)
        assert words in str(info.value)
        assert "\ud800" not in str(info.value)


class TestFromEnvironment:
    def test_servers_and_their_variables(self):
        """RVC_SERVERS lists names; RVC_<NAME>_SECRET[_NEXT] / _MCP_URL / _MCP_TOKEN."""
        env = {
            "RVC_SERVERS": "sleeper, nav-2",
            "RVC_SLEEPER_SECRET": "a",
            "RVC_SLEEPER_SECRET_NEXT": "b",
            "RVC_SLEEPER_MCP_URL": "http://127.0.0.1:9100/sse",
            "RVC_NAV_2_SECRET": "c",
            "RVC_NAV_2_MCP_TOKEN": "tok",
        }
        sleeper, nav = servers_from_env(env)
        assert (sleeper.name, sleeper.secrets, sleeper.mcp_url) == (
            "sleeper",
            ("a", "b"),
            "http://127.0.0.1:9100/sse",
        )
        assert (nav.name, nav.secrets, nav.mcp_url, nav.token) == ("nav-2", ("c",), None, "tok")

    def test_nothing_configured_says_what_to_set(self):
        with pytest.raises(ConfigurationError, match="RVC_RECEIVER_CONFIG"):
            servers_from_env({})

    def test_a_listed_server_without_a_secret_is_named(self):
        with pytest.raises(ConfigurationError, match="RVC_NAV_SECRET is unset"):
            servers_from_env({"RVC_SERVERS": "nav"})

    def test_two_names_reading_the_same_variables_are_refused(self):
        with pytest.raises(ConfigurationError, match="read the same variables"):
            servers_from_env({"RVC_SERVERS": "nav-1,nav.1", "RVC_NAV_1_SECRET": "x"})

    def test_the_config_file_wins(self, tmp_path: Path):
        path = tmp_path / "servers.json"
        path.write_text(json.dumps({"servers": {"sleeper": {"secret": "s"}}}))
        env = {"RVC_RECEIVER_CONFIG": str(path), "RVC_SERVERS": "other"}
        assert [s.name for s in servers_from_env(env)] == ["sleeper"]


class TestFromFile:
    def test_toml_with_rotation_and_variables(self, tmp_path: Path):
        """secrets list, url, token_env; a .toml file needs nothing installed."""
        path = tmp_path / "servers.toml"
        path.write_text(
            '[servers.sleeper]\nurl = "http://127.0.0.1:9100/sse"\n'
            'secrets = ["old", "new"]\ntoken_env = "SLEEPER_TOKEN"\n\n'
            '[servers.navigation]\nsecret_env = "NAV_SECRET"\n'
            'url = "http://127.0.0.1:9200/mcp"\n'
        )
        sleeper, nav = load_servers(path, environ={"SLEEPER_TOKEN": "tk", "NAV_SECRET": "ns"})
        assert (sleeper.secrets, sleeper.token) == (("old", "new"), "tk")
        assert (nav.secrets, nav.resolved_transport) == (("ns",), "streamable-http")

    def test_yaml_like_an_mcp_yaml(self, tmp_path: Path):
        path = tmp_path / "mcp.yaml"
        path.write_text("servers:\n  sleeper:\n    url: http://h:1/sse\n    secret: s3cret\n")
        (server,) = load_servers(path)
        assert (server.name, server.secrets) == ("sleeper", ("s3cret",))

    @pytest.mark.parametrize(
        ("name", "text", "words"),
        [
            ("s.toml", "servers = [", "not valid TOML"),
            ("s.json", "{", "not valid JSON (line 1)"),
            ("s.yaml", "a: [", "not valid YAML"),
            ("s.ini", "[servers]", "must end in .toml"),
            ("s.json", "{}", "needs a 'servers' table"),
            ("s.json", '{"servers": {"a": 1}}', "servers.a must be a table"),
            ("s.json", '{"servers": {"a": {}}}', "needs 'secret'"),
            ("s.json", '{"servers": {"a": {"secret": "x", "secret_env": "Y"}}}', "not both"),
            ("s.json", '{"servers": {"a": {"secret_env": "UNSET_VAR_X"}}}', "unset or empty"),
            ("s.json", '{"servers": {"a": {"secrets": ["", "x"]}}}', "list of non-empty"),
            ("s.json", '{"servers": {"a": {"secret": "x", "url": "nope"}}}', "http(s)://"),
        ],
    )
    def test_a_bad_file_is_one_sentence_naming_it(self, tmp_path: Path, name, text, words):
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(ConfigurationError) as info:
            load_servers(path, environ={})
        assert words in str(info.value)

    def test_a_missing_file_names_it(self, tmp_path: Path):
        with pytest.raises(ConfigurationError, match="Cannot read the servers file"):
            load_servers(tmp_path / "nope.toml")
