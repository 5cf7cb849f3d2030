"""The HTTP limits in process: header timeout, connection cap, fd budget, log rate limit.

The protocol is uvicorn's h11 protocol driven through asyncio's protocol interface with an
in-memory transport, on the test's real event loop; the end-to-end proof against a real
server process is tests/integration/test_memory_http_limits.py.
"""

from __future__ import annotations

import asyncio
import errno
import io
import json
import logging
import resource
import socket

import pytest
from uvicorn.config import Config
from uvicorn.server import ServerState

from robot_mcp_memory._exceptions import SettingsError
from robot_mcp_memory.http._limits import (
    ACCEPT_BACKLOG,
    FD_RESERVE,
    ensure_fd_limit,
    fd_budget,
    limited_h11_protocol,
)
from robot_mcp_memory.logs import (
    RateLimiter,
    RateLimitFilter,
    configure_logging,
)

HEAD = b"GET /fast HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
HALF_HEAD = b"GET /fast HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
HOLD_HEAD = b"GET /hold HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
DONE_WITHIN_S = 5.0  # a "did not hang" bound, never a timing claim


class MemoryTransport(asyncio.Transport):
    """A transport that keeps what is written and tells the protocol when it is closed."""

    _ports = iter(range(40000, 50000))

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self.loop = loop
        self.written = bytearray()
        self.closed = False
        self.aborted = False
        self.protocol: asyncio.Protocol | None = None
        self.lost = asyncio.Event()
        self._peer = ("127.0.0.1", next(self._ports))

    def write(self, data: bytes) -> None:
        self.written += data

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.loop.call_soon(self._lose)

    def abort(self) -> None:
        self.aborted = True
        self.close()

    def _lose(self) -> None:
        assert self.protocol is not None
        self.protocol.connection_lost(None)
        self.lost.set()

    def is_closing(self) -> bool:
        return self.closed

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_extra_info(self, name, default=None):
        return {"sockname": ("127.0.0.1", 9103), "peername": self._peer}.get(name, default)


class Server:
    """One uvicorn-like server: a protocol class with its tracker, and an app that can hold."""

    def __init__(self, *, max_connections: int, header_timeout_s: float) -> None:
        self.release = asyncio.Event()
        self.protocol_class = limited_h11_protocol(max_connections, header_timeout_s)
        self.tracker = self.protocol_class.tracker
        self.config = Config(
            app=self.app,
            http=self.protocol_class,
            ws="none",
            lifespan="off",
            log_config=None,
            interface="asgi3",
        )
        self.config.load()
        self.state = ServerState()

    async def app(self, scope, receive, send):
        if scope["type"] != "http":
            return
        if scope["path"] == "/hold":
            await self.release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    def connect(self):
        loop = asyncio.get_running_loop()
        protocol = self.protocol_class(
            config=self.config, server_state=self.state, app_state={}, _loop=loop
        )
        transport = MemoryTransport(loop)
        transport.protocol = protocol
        protocol.connection_made(transport)
        return protocol, transport


async def wait_closed(transport: MemoryTransport) -> None:
    await asyncio.wait_for(transport.lost.wait(), DONE_WITHIN_S)


async def until(predicate) -> None:
    async with asyncio.timeout(DONE_WITHIN_S):
        while not predicate():
            await asyncio.sleep(0.005)


class TestHeaderTimeout:
    async def test_half_sent_head_is_answered_408_and_closed(self):
        """A connection that never completes its head is closed by the timer, with 408."""
        server = Server(max_connections=8, header_timeout_s=0.05)
        protocol, transport = server.connect()
        protocol.data_received(HALF_HEAD)
        await wait_closed(transport)
        assert transport.written.startswith(b"HTTP/1.1 408 ")
        assert server.tracker.timed_out == 1
        assert not server.tracker.open

    async def test_silent_connection_is_closed_without_a_reply(self):
        """Connected and said nothing: closed, nothing written (no reply to a non-request)."""
        server = Server(max_connections=8, header_timeout_s=0.05)
        _, transport = server.connect()
        await wait_closed(transport)
        assert transport.written == b""

    async def test_trickling_does_not_extend_the_deadline(self):
        """One byte at a time, each well inside the timeout: closed all the same."""
        server = Server(max_connections=8, header_timeout_s=0.2)
        protocol, transport = server.connect()
        async with asyncio.timeout(DONE_WITHIN_S):
            for byte in HALF_HEAD * 100:
                if transport.closed:
                    break
                protocol.data_received(bytes([byte]))
                await asyncio.sleep(0.01)
        await wait_closed(transport)
        assert transport.written.startswith(b"HTTP/1.1 408 ")

    async def test_complete_head_cancels_the_timer(self):
        """A request whose head arrived is served even if it takes longer than the timeout."""
        server = Server(max_connections=8, header_timeout_s=0.05)
        protocol, transport = server.connect()
        protocol.data_received(HOLD_HEAD)
        await asyncio.sleep(0.2)  # four header timeouts
        assert not transport.closed
        server.release.set()
        await until(lambda: b"200 OK" in transport.written)
        assert server.tracker.timed_out == 0

    async def test_next_request_on_a_kept_alive_connection_is_timed_too(self):
        """After one request is served, a half-sent second head is timed out as well."""
        server = Server(max_connections=8, header_timeout_s=0.05)
        protocol, transport = server.connect()
        protocol.data_received(HEAD)
        await until(lambda: b"200 OK" in transport.written)
        protocol.data_received(HALF_HEAD)
        await wait_closed(transport)
        assert transport.written.endswith(
            b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        )
        assert server.tracker.timed_out == 1


class TestConnectionCap:
    async def test_at_the_cap_the_longest_waiting_connection_is_shed(self):
        """Cap 3, three half-open connections: a fourth is admitted and the oldest goes."""
        server = Server(max_connections=3, header_timeout_s=60)
        conns = [server.connect() for _ in range(3)]
        for protocol, _ in conns:
            protocol.data_received(HALF_HEAD)
        newcomer, newcomer_transport = server.connect()
        await wait_closed(conns[0][1])
        assert not any(t.closed for _, t in conns[1:])
        newcomer.data_received(HEAD)
        await until(lambda: b"200 OK" in newcomer_transport.written)
        assert server.tracker.shed == 1
        assert len(server.tracker.open) == 3

    async def test_connections_serving_a_request_are_never_shed(self):
        """Cap 2, both serving a request: a third is refused with 503, the two go on."""
        server = Server(max_connections=2, header_timeout_s=60)
        busy = [server.connect() for _ in range(2)]
        for protocol, _ in busy:
            protocol.data_received(HOLD_HEAD)
        await until(lambda: not server.tracker.waiting)
        _, refused = server.connect()
        assert refused.written.startswith(b"HTTP/1.1 503 ")
        await wait_closed(refused)
        assert server.tracker.refused == 1
        assert not any(t.closed for _, t in busy)
        server.release.set()
        for _, transport in busy:
            await until(lambda t=transport: b"200 OK" in t.written)

    async def test_an_idle_kept_alive_connection_is_shed_before_a_busy_one(self):
        """Cap 2: one busy, one idle after its response; a newcomer sheds the idle one."""
        server = Server(max_connections=2, header_timeout_s=60)
        busy, busy_transport = server.connect()
        busy.data_received(HOLD_HEAD)
        idle, idle_transport = server.connect()
        idle.data_received(HEAD)
        await until(lambda: b"200 OK" in idle_transport.written)
        server.connect()
        await wait_closed(idle_transport)
        assert not busy_transport.closed
        server.release.set()

    async def test_a_closed_connection_frees_its_slot(self):
        """Slots are given back on connection_lost: open connections never exceed the cap."""
        server = Server(max_connections=2, header_timeout_s=60)
        for _ in range(10):
            protocol, transport = server.connect()
            protocol.data_received(HEAD)
            await until(lambda t=transport: b"200 OK" in t.written)
            transport.close()
            await wait_closed(transport)
        assert not server.tracker.open
        assert server.tracker.shed == server.tracker.refused == 0

    def test_bad_arguments_are_refused(self):
        with pytest.raises(ValueError, match="max_connections"):
            limited_h11_protocol(0, 1.0)
        with pytest.raises(ValueError, match="header_timeout_s"):
            limited_h11_protocol(8, 0)


class TestFdBudget:
    def test_budget_is_cap_plus_backlog_plus_reserve(self):
        assert fd_budget(256) == 256 + ACCEPT_BACKLOG + FD_RESERVE

    def test_enough_soft_limit_is_left_alone(self, monkeypatch):
        monkeypatch.setattr(resource, "getrlimit", lambda _: (100_000, 100_000))
        monkeypatch.setattr(resource, "setrlimit", _must_not_be_called)
        assert ensure_fd_limit(256) is None

    def test_low_soft_limit_is_raised_to_the_budget(self, monkeypatch):
        calls = []
        monkeypatch.setattr(resource, "getrlimit", lambda _: (200, 4096))
        monkeypatch.setattr(resource, "setrlimit", lambda which, limits: calls.append(limits))
        assert ensure_fd_limit(256) == (200, fd_budget(256))
        assert calls == [(fd_budget(256), 4096)]

    def test_low_hard_limit_refuses_in_one_line(self, monkeypatch):
        monkeypatch.setattr(resource, "getrlimit", lambda _: (200, 300))
        monkeypatch.setattr(resource, "setrlimit", _must_not_be_called)
        with pytest.raises(SettingsError) as info:
            ensure_fd_limit(256)
        message = str(info.value)
        assert info.value.variable == "MEMORY_MAX_CONNECTIONS"
        assert "\n" not in message
        assert f"needs {fd_budget(256)} file descriptors" in message
        assert "hard limit is 300" in message
        assert "LimitNOFILE" in message


def _must_not_be_called(*_args):
    raise AssertionError("setrlimit must not be called")


class TestLogRateLimit:
    def test_limiter_allows_one_per_interval_and_counts_the_rest(self):
        now = [0.0]
        limiter = RateLimiter(10.0, clock=lambda: now[0])
        assert limiter.allow("k") == 0
        assert [limiter.allow("k") for _ in range(5)] == [None] * 5
        assert limiter.allow("other") == 0
        now[0] = 10.0
        assert limiter.allow("k") == 5
        assert limiter.allow("k") is None

    def test_accept_errors_from_asyncio_are_rate_limited(self):
        """The real asyncio path: 1 000 EMFILE accept errors make one line, not 1 000."""
        stream = io.StringIO()
        configure_logging(json=True, stream=stream)
        # An in-process uvicorn started by an earlier test (fake_rvc's server) leaves its own
        # logging config behind (levels, and "uvicorn" not propagating to the root); this
        # test is about the filter on the root handler, not about that.
        loggers = [logging.getLogger(name) for name in ("uvicorn", "uvicorn.error", "asyncio")]
        saved = [(lg.level, lg.disabled, lg.propagate) for lg in loggers]
        for lg in loggers:
            lg.setLevel(logging.NOTSET)
            lg.disabled = False
            lg.propagate = True
        loop = asyncio.new_event_loop()
        sock = socket.socket()
        try:
            for _ in range(1000):
                loop.call_exception_handler(
                    {
                        "message": "socket.accept() out of system resource",
                        "exception": OSError(errno.EMFILE, "Too many open files"),
                        "socket": sock,
                    }
                )
            logging.getLogger("uvicorn.error").warning("an ordinary warning")
        finally:
            sock.close()
            loop.close()
            configure_logging()
            for lg, (level, disabled, propagate) in zip(loggers, saved, strict=True):
                lg.setLevel(level)
                lg.disabled = disabled
                lg.propagate = propagate
        lines = [json.loads(line) for line in stream.getvalue().splitlines()]
        accept = [e for e in lines if e["event"].startswith("socket.accept()")]
        assert len(accept) == 1
        assert "Too many open files" in accept[0]["exception"]
        assert any(e["event"] == "an ordinary warning" for e in lines)

    def test_next_allowed_record_says_how_many_were_dropped(self):
        now = [0.0]
        rate_filter = RateLimitFilter(limiter=RateLimiter(10.0, clock=lambda: now[0]))
        logger = logging.getLogger("uvicorn.error")

        def record() -> logging.LogRecord:
            return logger.makeRecord(
                "uvicorn.error",
                logging.WARNING,
                __file__,
                1,
                "Invalid HTTP request received.",
                (),
                None,
            )

        assert rate_filter.filter(record())
        assert [rate_filter.filter(record()) for _ in range(3)] == [False] * 3
        now[0] = 11.0
        passed = record()
        assert rate_filter.filter(passed)
        assert passed.suppressed == 3

    def test_other_records_pass_untouched(self):
        rate_filter = RateLimitFilter()
        logger = logging.getLogger("robot_mcp_memory.app")
        for _ in range(5):
            rec = logger.makeRecord(
                "robot_mcp_memory.app", logging.ERROR, __file__, 1, "boom", (), None
            )
            assert rate_filter.filter(rec)
