"""The in-process way in: an ``httpx2`` transport that hands each request to the emulator.

anthropic 2.x sends requests through ``httpx2`` (``anthropic/_base_client.py`` imports it; the
``Anthropic(http_client=...)`` argument takes an ``httpx2.Client``), so
``httpx2.Client(transport=EmulatorTransport(emulator))`` makes the official SDK talk to the emulator
with no server and no sockets.
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol

import httpx2


class Handler(Protocol):
    """What the transport calls: :meth:`gitmem.emulator.app.Emulator.handle` (the app builds on no transport)."""

    def handle(self, method: str, path: str, headers: Mapping[str, str], body: bytes, query: str = "") -> Any: ...


class EmulatorTransport(httpx2.BaseTransport):
    def __init__(self, emulator: Handler):
        self.emulator = emulator

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        body = request.read()
        query = request.url.query
        response = self.emulator.handle(
            request.method,
            request.url.path,
            {key.lower(): value for key, value in request.headers.items()},
            body,
            query.decode("latin-1") if isinstance(query, bytes) else str(query),
        )
        if response.chunks is None:
            return httpx2.Response(response.status, headers=response.headers, content=response.body, request=request)
        # A stream: the SDK reads the events one by one as the emulator produces them.
        return httpx2.Response(response.status, headers=response.headers, stream=_Chunks(response), request=request)


class _Chunks(httpx2.SyncByteStream):
    def __init__(self, response):
        self.response = response

    def __iter__(self):
        return self.response.iter_chunks()
