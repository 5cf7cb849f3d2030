"""--transport auto: one GET tells SSE from streamable HTTP, or says why it is neither.

A real loopback HTTP server answers each case the way a server of that kind does.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from robot_mcp_conformance import TargetError, build_pytest_args, detect_transport
from robot_mcp_kit.testing import free_port

# path -> (status, content type) the fake endpoint answers a GET with
ANSWERS = {
    "/sse": (200, "text/event-stream"),  # an SSE endpoint opens its stream
    "/mcp": (400, "application/json"),  # mcp 1.x streamable HTTP: no session id
    "/mcp-405": (405, "text/plain"),  # a stateless streamable-HTTP endpoint
    "/page": (200, "text/html"),  # a web page, not MCP
}


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        status, ctype = ANSWERS.get(self.path, (404, "text/plain"))
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.mark.parametrize(
    ("path", "transport"),
    [("/sse", "sse"), ("/mcp", "streamable-http"), ("/mcp-405", "streamable-http")],
)
def test_the_endpoint_kind_is_detected(base_url, path, transport):
    """200 text/event-stream is SSE; a refused session-less GET is streamable HTTP."""
    assert detect_transport(base_url + path) == transport


@pytest.mark.parametrize(
    ("path", "seen"), [("/nowhere", "404 text/plain"), ("/page", "200 text/html")]
)
def test_a_non_mcp_answer_is_one_line_naming_url_and_answer(base_url, path, seen):
    """A 404 or a web page is not an MCP endpoint: one line with the URL and what came back."""
    with pytest.raises(TargetError) as caught:
        detect_transport(base_url + path)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(
        f"{base_url}{path} is not an MCP endpoint: GET {path} answered {seen}"
    )


def test_an_unreachable_url_is_one_line_naming_the_cause():
    """Nothing listening: 'cannot reach URL: ConnectError: ...' on one line."""
    url = f"http://127.0.0.1:{free_port()}/mcp"
    with pytest.raises(TargetError) as caught:
        detect_transport(url, timeout_s=2)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"cannot reach {url}: ConnectError")


def test_the_console_script_forwards_its_options_and_the_rest_to_pytest():
    """URL and options become the plugin's options; unknown arguments reach pytest as given."""
    args = build_pytest_args(
        [
            "http://h:1/mcp",
            "--transport",
            "sse",
            "--secret",
            "x",
            "--junitxml=r.xml",
            "-k",
            "cancel",
        ]
    )
    assert args[args.index("--pyargs") + 1] == "robot_mcp_conformance"
    assert args[args.index("--server-url") + 1] == "http://h:1/mcp"
    assert args[args.index("--transport") + 1] == "sse"
    assert args[args.index("--secret") + 1] == "x"
    assert args[-3:] == ["--junitxml=r.xml", "-k", "cancel"]
