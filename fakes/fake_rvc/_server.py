"""Serve the fake over real HTTP: :class:`FakeRvcServer` (a thread) and the CLI's config.

Uvicorn runs with :class:`DroppableH11Protocol`, which puts a ``fake_rvc.close_connection``
callable into each request's ASGI scope extensions. An injected ``drop`` fault calls it:
the TCP connection is closed without a response and the client sees a connection error
(httpx: ``RemoteProtocolError: Server disconnected without sending a response``), not a
500. Stock uvicorn has no such hook: an app that raises or returns without responding
gets a 500 written for it.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Mapping
from types import TracebackType
from typing import Any

import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.http.h11_impl import H11Protocol

from fake_rvc._app import DROP_EXTENSION, EVENTS_PATH, create_app
from fake_rvc._dependencies import UnixClock
from fake_rvc._exceptions import ServerError
from fake_rvc._recorder import Recorder

__all__ = ["DroppableH11Protocol", "FakeRvcServer", "bind_socket", "uvicorn_config"]


class DroppableH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, plus a scope extension that closes the connection."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        inner = self.app

        async def app(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                scope.setdefault("extensions", {})[DROP_EXTENSION] = self._close_connection
            await inner(scope, receive, send)

        self.app = app

    def _close_connection(self) -> None:
        if not self.transport.is_closing():
            self.transport.close()


def bind_socket(host: str, port: int) -> socket.socket:
    """Bind a listening TCP socket (port 0 picks a free one); the caller owns it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not the default 0: asyncio sets TCP_NODELAY only on connections whose
    # socket says it is TCP. Without it an answer's body (written after its head) waits for
    # the client's delayed ACK, about 40 ms per POST.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def uvicorn_config(app: FastAPI, *, log_level: str = "warning") -> uvicorn.Config:
    """The uvicorn settings fake_rvc runs with (h11 with the drop hook, no access log)."""
    return uvicorn.Config(
        app,
        http=DroppableH11Protocol,
        lifespan="on",
        log_level=log_level,
        access_log=False,
        timeout_graceful_shutdown=2,
    )


class FakeRvcServer:
    """The fake brain on ``127.0.0.1:<free port>``, served by uvicorn in a thread.

    Use as a context manager, or call :meth:`start` and :meth:`stop`. ``state`` is the
    :class:`Recorder` the app records into: read it, wait on it and inject faults through
    it from the test thread (its sync waits are thread-safe).

    Example::

        with FakeRvcServer({"sleeper": "s3cret"}) as rvc:
            env = {"RVC_CALLBACK_URL": rvc.events_url, "RVC_EVENT_SECRET": "s3cret"}
            ...
            rvc.state.wait_for_event(task_id, "task_done", timeout_s=10)
    """

    def __init__(
        self,
        secrets: Mapping[str, str],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        state: Recorder | None = None,
        clock: UnixClock | None = None,
        **app_options: Any,
    ) -> None:
        self.state = state if state is not None else Recorder()
        self.app = create_app(secrets, state=self.state, clock=clock, **app_options)
        self._host = host
        self._port = port
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._bound_port: int | None = None

    def __repr__(self) -> str:
        where = self.url if self._bound_port is not None else "stopped"
        return f"<FakeRvcServer {where} {self.state!r}>"

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:54321``."""
        if self._bound_port is None:
            raise ServerError("FakeRvcServer is not started; call start() first.")
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self._bound_port}"

    @property
    def events_url(self) -> str:
        """The callback URL servers post to: ``<url>/api/agent/events``."""
        return self.url + EVENTS_PATH

    @property
    def port(self) -> int:
        """The bound port."""
        if self._bound_port is None:
            raise ServerError("FakeRvcServer is not started; call start() first.")
        return self._bound_port

    def start(self, timeout_s: float = 10.0) -> FakeRvcServer:
        """Bind, serve in a daemon thread and return once uvicorn accepts connections.

        Raises:
            ServerError: (a ``RuntimeError``) already started, or uvicorn did not start
                within ``timeout_s``.
        """
        if self._thread is not None:
            raise ServerError("FakeRvcServer is already started.")
        sock = bind_socket(self._host, self._port)
        self._bound_port = sock.getsockname()[1]
        server = uvicorn.Server(uvicorn_config(self.app))
        self._server = server

        def run() -> None:
            try:
                asyncio.run(server.serve(sockets=[sock]))
            finally:
                sock.close()

        self._thread = threading.Thread(
            target=run, name=f"fake-rvc:{self._bound_port}", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise ServerError(f"fake_rvc did not start on {self._host}:{self._port}.")
            time.sleep(0.01)
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        """End live page streams, shut uvicorn down and join the thread. Idempotent."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        self.state.close_streams()
        server.should_exit = True
        thread.join(timeout_s)
        self._server = None
        self._thread = None
        if thread.is_alive():
            raise ServerError(f"fake_rvc thread did not stop within {timeout_s} s.")

    def __enter__(self) -> FakeRvcServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
