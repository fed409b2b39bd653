"""The ``/metrics`` endpoint: a small HTTP/1.1 server on the broker's event loop, answering each GET
with prometheus_client's exposition of the broker's registry (``choose_encoder``: the text format, or
OpenMetrics when the scraper asks for it) and closing the connection.

Why the event loop and not prometheus_client's own threaded server (``start_http_server``): the
collector reads the broker's live state — the hosted partitions, ISRs, groups and their offsets —
which only the event loop changes. On the loop a scrape sees it consistent, with no lock on the
request path and no "dictionary changed size during iteration"; a thread would need both, and would
contend with the loop for the GIL all the same. A scrape costs the loop about as long as the
collection (a few milliseconds for thousands of partitions), once per scrape interval."""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import urlsplit

from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import CollectorRegistry

log = logging.getLogger("kctl.broker.metrics")

MAX_HEADER_BYTES = 16 * 1024
READ_TIMEOUT_S = 10.0


class MetricsServer:
    """Serves ``registry`` at ``/metrics`` on ``host``:``port``; ``url`` once started."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        self.registry = registry
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None
        self.scrapes = 0

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port, reuse_address=True)
        sockets = self._server.sockets or ()
        if sockets:
            self.port = sockets[0].getsockname()[1]
        log.info("serving metrics on %s", self.url)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            status, content_type, body, is_head = self._answer(head)
            writer.write(
                (
                    f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
                ).encode("latin-1")
                + (b"" if is_head else body)
            )
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()

    def _answer(self, head: bytes) -> tuple[str, str, bytes, bool]:
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or parts[0] not in ("GET", "HEAD"):
            return "405 Method Not Allowed", "text/plain", b"GET /metrics\n", False
        path = urlsplit(parts[1]).path
        if path not in ("/metrics", "/"):
            return "404 Not Found", "text/plain", b"not found: try /metrics\n", parts[0] == "HEAD"
        accept = ""
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "accept":
                accept = value.strip()
        encoder, content_type = choose_encoder(accept)
        self.scrapes += 1
        return "200 OK", content_type, encoder(self.registry), parts[0] == "HEAD"
