"""CRC-32C (Castagnoli) used by record batches v2, computed by a hardware-accelerated C package."""

from __future__ import annotations

import crc32c as _crc32c


def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """Return the CRC-32C of ``data``, continuing from ``value`` (0 to start)."""
    return _crc32c.crc32c(data, value)
