"""Exceptions raised by the wire-protocol codec.

This module owns the codec's error vocabulary. Everything derives from ``ProtocolError`` (a
``ValueError``), so a server can catch one class for "the peer sent something we cannot use", and
tell the cases apart when it must answer differently:

* ``ProtocolDecodeError`` — malformed bytes (truncated, garbage, bad UTF-8, trailing bytes, null
  where not allowed, a length or count larger than the bytes left). The connection should be closed.
* ``FrameTooLarge`` — a frame's size prefix exceeds the reader's limit (raised before buffering).
* ``UnsupportedApiError`` / ``UnsupportedVersionError`` — the header parsed, but the api key or
  version is outside the codec's range; they carry what the server needs to answer (api key,
  version, correlation id, client id, and for versions the supported range).
* ``ProtocolEncodeError`` — an object could not be encoded (missing field, value out of range,
  null in a non-nullable field); a programming error on our side.
"""

from __future__ import annotations


class ProtocolError(ValueError):
    """Base class of every codec error."""


class ProtocolDecodeError(ProtocolError):
    """Input bytes are not a valid encoding of the expected message."""


class FrameTooLarge(ProtocolDecodeError):
    """A frame announced a size above the reader's maximum."""

    def __init__(self, size: int, max_size: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds the maximum frame size of {max_size} bytes")
        self.size = size
        self.max_size = max_size


class UnsupportedApiError(ProtocolError):
    """The request header names an api key the codec does not know."""

    def __init__(
        self, api_key: int, api_version: int, correlation_id: int | None = None, client_id: str | None = None
    ) -> None:
        super().__init__(f"unsupported api key {api_key} (version {api_version})")
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id


class UnsupportedVersionError(ProtocolError):
    """The request header names a known api at a version outside the codec's range."""

    def __init__(
        self,
        api_key: int,
        api_version: int,
        min_version: int,
        max_version: int,
        correlation_id: int | None = None,
        client_id: str | None = None,
        api_name: str = "",
    ) -> None:
        label = api_name or f"api key {api_key}"
        super().__init__(
            f"unsupported version {api_version} of {label} (supported {min_version}-{max_version})"
        )
        self.api_key = api_key
        self.api_version = api_version
        self.min_version = min_version
        self.max_version = max_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.api_name = api_name


class ProtocolEncodeError(ProtocolError):
    """An object could not be encoded at the requested version."""
