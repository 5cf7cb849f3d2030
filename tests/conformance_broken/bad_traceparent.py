"""Defect: the event POSTs carry a malformed traceparent header (contract §4.5)."""

import httpx
from _base import NAME, build, serve

from robot_mcp_kit import EventPoster


class BadTraceparent(httpx.AsyncBaseTransport):
    """Sends each request with ``traceparent: 00-not-a-trace-01`` through a real transport."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        request.headers["traceparent"] = "00-not-a-trace-01"
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


if __name__ == "__main__":
    serve(*build(poster=EventPoster(NAME, transport=BadTraceparent())))
