"""Varint, varlong and unsigned varint encodings (kctl.records.varint)."""

from __future__ import annotations

import random

import pytest
from kafka.record import util as kafka_util

from kctl.records.varint import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    VarintError,
    decode_uvarint,
    decode_uvarlong,
    decode_varint,
    decode_varlong,
    encode_uvarint,
    encode_uvarlong,
    encode_varint,
    encode_varlong,
    uvarint_size,
    varint_size,
    varlong_size,
)

# Known encodings from the zigzag definition: 0→0, -1→1, 1→2, -2→3, ...
KNOWN_VARINTS = [
    (0, b"\x00"),
    (-1, b"\x01"),
    (1, b"\x02"),
    (-2, b"\x03"),
    (63, b"\x7e"),
    (-64, b"\x7f"),
    (64, b"\x80\x01"),
    (-65, b"\x81\x01"),
    (8191, b"\xfe\x7f"),
    (8192, b"\x80\x80\x01"),
    (INT32_MAX, b"\xfe\xff\xff\xff\x0f"),
    (INT32_MIN, b"\xff\xff\xff\xff\x0f"),
]


@pytest.mark.parametrize(("value", "encoded"), KNOWN_VARINTS)
def test_varint_known_encodings(value: int, encoded: bytes) -> None:
    assert encode_varint(value) == encoded
    assert decode_varint(encoded) == (value, len(encoded))
    assert varint_size(value) == len(encoded)
    # a varint is also a valid varlong with the same bytes
    assert encode_varlong(value) == encoded
    assert decode_varlong(encoded) == (value, len(encoded))


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (INT64_MAX, b"\xfe" + b"\xff" * 8 + b"\x01"),
        (INT64_MIN, b"\xff" * 9 + b"\x01"),
        (INT32_MAX + 1, b"\x80\x80\x80\x80\x10"),
        (INT32_MIN - 1, b"\x81\x80\x80\x80\x10"),
    ],
)
def test_varlong_extremes(value: int, encoded: bytes) -> None:
    assert encode_varlong(value) == encoded
    assert decode_varlong(encoded) == (value, len(encoded))
    assert varlong_size(value) == len(encoded)


def test_varint_and_varlong_match_kafka_python() -> None:
    rng = random.Random(7)
    values = [rng.randint(INT32_MIN, INT32_MAX) for _ in range(500)]
    values += [rng.randint(-300, 300) for _ in range(200)]
    for value in values:
        expected = bytearray()
        kafka_util.encode_varint(value, expected.append)
        assert encode_varint(value) == bytes(expected)
        assert kafka_util.decode_varint(encode_varint(value), 0) == decode_varint(bytes(expected))
    for value in [rng.randint(INT64_MIN, INT64_MAX) for _ in range(500)]:
        expected = bytearray()
        kafka_util.encode_varint(value, expected.append)
        assert encode_varlong(value) == bytes(expected)
        assert decode_varlong(bytes(expected)) == (value, len(expected))


def test_decode_at_position_returns_new_position() -> None:
    buf = b"\xaa\xbb" + encode_varint(300) + encode_varlong(-5) + b"\xcc"
    value, pos = decode_varint(buf, 2)
    assert (value, pos) == (300, 4)
    assert decode_varlong(buf, pos) == (-5, 5)
    assert decode_varint(bytearray(buf), 2) == (300, 4)
    assert decode_varint(memoryview(buf), 2) == (300, 4)


@pytest.mark.parametrize("value", [INT32_MAX + 1, INT32_MIN - 1, 1 << 40])
def test_encode_varint_out_of_range(value: int) -> None:
    with pytest.raises(ValueError):
        encode_varint(value)
    with pytest.raises(ValueError):
        varint_size(value)


@pytest.mark.parametrize("value", [INT64_MAX + 1, INT64_MIN - 1])
def test_encode_varlong_out_of_range(value: int) -> None:
    with pytest.raises(ValueError):
        encode_varlong(value)
    with pytest.raises(ValueError):
        varlong_size(value)


@pytest.mark.parametrize(
    ("decoder", "buf"),
    [
        (decode_varint, b""),
        (decode_varint, b"\x80"),
        (decode_varint, b"\xff\xff\xff"),
        (decode_varlong, b"\x80" * 9),
        (decode_uvarint, b"\x80\x80"),
        (decode_uvarlong, b""),
    ],
)
def test_truncated_input(decoder, buf: bytes) -> None:
    with pytest.raises(VarintError, match="truncated"):
        decoder(buf)


@pytest.mark.parametrize(
    ("decoder", "buf"),
    [
        (decode_varint, b"\x80" * 5 + b"\x00"),  # 6 bytes
        (decode_uvarint, b"\xff" * 5 + b"\x01"),
        (decode_varlong, b"\x80" * 10 + b"\x00"),  # 11 bytes
        (decode_uvarlong, b"\xff" * 100),
        (decode_varint, b"\xff" * 100_000),  # never scans the whole run
    ],
)
def test_over_long_input(decoder, buf: bytes) -> None:
    with pytest.raises(VarintError, match="longer than"):
        decoder(buf)


@pytest.mark.parametrize(
    ("decoder", "buf"),
    [
        (decode_varint, b"\xff\xff\xff\xff\x1f"),  # 35 significant bits in 5 bytes
        (decode_uvarint, b"\x80\x80\x80\x80\x10"),  # 2**32
        (decode_varlong, b"\xff" * 9 + b"\x03"),  # 65 bits
    ],
)
def test_value_too_wide_for_type(decoder, buf: bytes) -> None:
    with pytest.raises(VarintError, match="does not fit"):
        decoder(buf)


def test_varint_error_is_value_error() -> None:
    assert issubclass(VarintError, ValueError)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (1, b"\x01"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (300, b"\xac\x02"),
        ((1 << 32) - 1, b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_uvarint_known_encodings(value: int, encoded: bytes) -> None:
    assert encode_uvarint(value) == encoded
    assert decode_uvarint(encoded) == (value, len(encoded))
    assert uvarint_size(value) == len(encoded)
    assert encode_uvarlong(value) == encoded
    assert decode_uvarlong(encoded) == (value, len(encoded))


def test_uvarlong_max() -> None:
    encoded = encode_uvarlong((1 << 64) - 1)
    assert encoded == b"\xff" * 9 + b"\x01"
    assert decode_uvarlong(encoded) == ((1 << 64) - 1, 10)


@pytest.mark.parametrize("value", [-1, 1 << 32])
def test_encode_uvarint_out_of_range(value: int) -> None:
    with pytest.raises(ValueError):
        encode_uvarint(value)


def test_uvarint_size_rejects_negative() -> None:
    with pytest.raises(ValueError):
        uvarint_size(-1)
