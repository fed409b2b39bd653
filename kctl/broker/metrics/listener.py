"""``metrics.listener``: ``http://HOST:PORT`` (port 0: a free one), empty for no metrics endpoint;
parsed here (without prometheus_client, which the broker imports only when metrics are on)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from kctl.common.config_def import Validator


def parse_metrics_listener(value: str) -> tuple[str, int]:
    """``http://HOST:PORT`` -> (host, port); ValueError otherwise."""
    parts = urlsplit(value.strip())
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "http" or not parts.hostname or port is None or parts.path not in ("", "/"):
        raise ValueError(f"must be http://HOST:PORT (or empty), got {value!r}")
    return parts.hostname, port


@dataclass(frozen=True)
class MetricsListener(Validator):
    """Empty, or http://HOST:PORT."""

    def __call__(self, value: Any) -> Any:
        if value:
            parse_metrics_listener(value)
        return value

    def describe(self) -> str:
        return "empty, or http://HOST:PORT"
