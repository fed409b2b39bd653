"""``kctl.protocol.errors``: the Kafka error codes, checked against kafka-python's independent table."""

from __future__ import annotations

import inspect

import kafka.errors as kafka_errors
import pytest

from kctl.protocol.errors import ErrorCode, error_name, is_retriable

# Kafka's CorruptRecordException is a RetriableException; kafka-python marks it non-retriable.
_KNOWN_RETRIABLE_DIFFERENCES = {2}


def _kafka_python_codes() -> dict[int, bool]:
    codes: dict[int, bool] = {}
    for obj in vars(kafka_errors).values():
        if (
            inspect.isclass(obj)
            and issubclass(obj, kafka_errors.BrokerResponseError)
            and isinstance(getattr(obj, "errno", None), int)
        ):
            codes[obj.errno] = bool(obj.retriable)
    return codes


def test_same_codes_as_kafka_python() -> None:
    theirs = _kafka_python_codes()
    ours = {e.value for e in ErrorCode}
    assert ours == set(theirs)
    assert set(range(-1, 128)) == ours


def test_retriable_flags_match_kafka_python() -> None:
    theirs = _kafka_python_codes()
    for e in ErrorCode:
        if e.value in _KNOWN_RETRIABLE_DIFFERENCES:
            continue
        assert e.retriable == theirs[e.value], e.name


@pytest.mark.parametrize(
    ("code", "name", "retriable"),
    [
        (-1, "UNKNOWN_SERVER_ERROR", False),
        (0, "NONE", False),
        (1, "OFFSET_OUT_OF_RANGE", False),
        (2, "CORRUPT_MESSAGE", True),
        (3, "UNKNOWN_TOPIC_OR_PARTITION", True),
        (6, "NOT_LEADER_OR_FOLLOWER", True),
        (15, "COORDINATOR_NOT_AVAILABLE", True),
        (16, "NOT_COORDINATOR", True),
        (25, "UNKNOWN_MEMBER_ID", False),
        (27, "REBALANCE_IN_PROGRESS", False),
        (35, "UNSUPPORTED_VERSION", False),
        (36, "TOPIC_ALREADY_EXISTS", False),
        (42, "INVALID_REQUEST", False),
        (58, "SASL_AUTHENTICATION_FAILED", False),
        (79, "MEMBER_ID_REQUIRED", False),
        (99, "POSITION_OUT_OF_RANGE", False),
        (100, "UNKNOWN_TOPIC_ID", True),
        (120, "TRANSACTION_ABORTABLE", False),
    ],
)
def test_well_known_codes(code: int, name: str, retriable: bool) -> None:
    e = ErrorCode(code)
    assert e.name == name and e == code and e.retriable is retriable
    assert ErrorCode[name] is e
    assert error_name(code) == name and is_retriable(code) is retriable
    assert e.description


def test_unknown_codes() -> None:
    assert error_name(4000) == "UNKNOWN_ERROR_CODE_4000"
    assert is_retriable(4000) is False
    with pytest.raises(ValueError):
        ErrorCode(4000)
