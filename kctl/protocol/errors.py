"""Kafka's error codes: the ``ErrorCode`` enum with each code's retriable flag and a short description.

This module owns the numbers that go in every ``error_code`` field. The codes and the retriable
flags (whether Kafka's client treats the error as retriable) follow Apache Kafka 3.9; the
descriptions are ours.
"""

from __future__ import annotations

from enum import IntEnum


class ErrorCode(IntEnum):
    """A Kafka error code. ``ErrorCode(3).retriable`` / ``.description`` give its properties."""

    retriable: bool
    description: str

    def __new__(cls, code: int, retriable: bool, description: str) -> ErrorCode:
        obj = int.__new__(cls, code)
        obj._value_ = code
        obj.retriable = retriable
        obj.description = description
        return obj

    UNKNOWN_SERVER_ERROR = -1, False, "Unexpected server error while processing the request."
    NONE = 0, False, "No error."
    OFFSET_OUT_OF_RANGE = 1, False, "The requested offset is outside the partition's range of offsets."
    CORRUPT_MESSAGE = 2, True, "A message failed its CRC check, is too large, or is otherwise corrupt."
    UNKNOWN_TOPIC_OR_PARTITION = 3, True, "This server does not host this topic-partition."
    INVALID_FETCH_SIZE = 4, False, "The requested fetch size is invalid."
    LEADER_NOT_AVAILABLE = 5, True, "The partition has no leader right now (an election is under way)."
    NOT_LEADER_OR_FOLLOWER = 6, True, "This broker is not the leader (or a replica) of the partition."
    REQUEST_TIMED_OUT = 7, True, "The request timed out."
    BROKER_NOT_AVAILABLE = 8, False, "The broker is not available."
    REPLICA_NOT_AVAILABLE = 9, True, "The replica is not available for the requested partition."
    MESSAGE_TOO_LARGE = 10, False, "A message is larger than the maximum the server accepts."
    STALE_CONTROLLER_EPOCH = 11, False, "The controller has moved to another broker."
    OFFSET_METADATA_TOO_LARGE = 12, False, "The committed offset's metadata is too large."
    NETWORK_EXCEPTION = 13, True, "The server disconnected before a response was received."
    COORDINATOR_LOAD_IN_PROGRESS = 14, True, "The coordinator is still loading its state."
    COORDINATOR_NOT_AVAILABLE = 15, True, "The coordinator is not available."
    NOT_COORDINATOR = 16, True, "This broker is not the coordinator for the group or transaction."
    INVALID_TOPIC_EXCEPTION = 17, False, "The topic name is invalid or the operation is not allowed on it."
    RECORD_LIST_TOO_LARGE = 18, False, "A message batch is larger than the configured segment size."
    NOT_ENOUGH_REPLICAS = 19, True, "Fewer in-sync replicas than required: messages rejected."
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20, True, "Written, but to fewer in-sync replicas than required."
    INVALID_REQUIRED_ACKS = 21, False, "The produce request's acks value is invalid."
    ILLEGAL_GENERATION = 22, False, "The group generation id is not valid."
    INCONSISTENT_GROUP_PROTOCOL = 23, False, "The member's protocols do not match the group's."
    INVALID_GROUP_ID = 24, False, "The group id is invalid."
    UNKNOWN_MEMBER_ID = 25, False, "The coordinator does not know this member."
    INVALID_SESSION_TIMEOUT = 26, False, "The session timeout is outside the broker's allowed range."
    REBALANCE_IN_PROGRESS = 27, False, "The group is rebalancing; the member must rejoin."
    INVALID_COMMIT_OFFSET_SIZE = 28, False, "The committed offset data size is invalid."
    TOPIC_AUTHORIZATION_FAILED = 29, False, "Not authorized to access the topic."
    GROUP_AUTHORIZATION_FAILED = 30, False, "Not authorized to access the group."
    CLUSTER_AUTHORIZATION_FAILED = 31, False, "Not authorized for this cluster operation."
    INVALID_TIMESTAMP = 32, False, "A message timestamp is outside the acceptable range."
    UNSUPPORTED_SASL_MECHANISM = 33, False, "The broker does not support the requested SASL mechanism."
    ILLEGAL_SASL_STATE = 34, False, "The request is not valid in the current SASL state."
    UNSUPPORTED_VERSION = 35, False, "The API version is not supported."
    TOPIC_ALREADY_EXISTS = 36, False, "A topic with this name already exists."
    INVALID_PARTITIONS = 37, False, "The number of partitions is invalid."
    INVALID_REPLICATION_FACTOR = 38, False, "The replication factor is invalid for the available brokers."
    INVALID_REPLICA_ASSIGNMENT = 39, False, "The replica assignment is invalid."
    INVALID_CONFIG = 40, False, "The configuration is invalid."
    NOT_CONTROLLER = 41, True, "This broker is not the controller."
    INVALID_REQUEST = 42, False, "The request is malformed or not valid for this broker."
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43, False, "The message format version does not support the request."
    POLICY_VIOLATION = 44, False, "The request violates the configured policy."
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45, False, "The broker received an out-of-order sequence number."
    DUPLICATE_SEQUENCE_NUMBER = 46, False, "The broker received a duplicate sequence number."
    INVALID_PRODUCER_EPOCH = 47, False, "The producer's epoch is old (fenced)."
    INVALID_TXN_STATE = 48, False, "The transactional operation is invalid in the current state."
    INVALID_PRODUCER_ID_MAPPING = 49, False, "The producer id is not assigned to this transactional id."
    INVALID_TRANSACTION_TIMEOUT = 50, False, "The transaction timeout exceeds the broker's maximum."
    CONCURRENT_TRANSACTIONS = 51, True, "Another operation on the same transaction is in progress."
    TRANSACTION_COORDINATOR_FENCED = 52, False, "The transaction coordinator is no longer current."
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53, False, "Not authorized for this transactional id."
    SECURITY_DISABLED = 54, False, "Security features are disabled."
    OPERATION_NOT_ATTEMPTED = 55, False, "Not attempted: another part of the request failed."
    KAFKA_STORAGE_ERROR = 56, True, "Disk error while accessing the log."
    LOG_DIR_NOT_FOUND = 57, False, "The log directory is not in the broker's configuration."
    SASL_AUTHENTICATION_FAILED = 58, False, "SASL authentication failed."
    UNKNOWN_PRODUCER_ID = 59, False, "The broker has no metadata for this producer id."
    REASSIGNMENT_IN_PROGRESS = 60, False, "A partition reassignment is in progress."
    DELEGATION_TOKEN_AUTH_DISABLED = 61, False, "Delegation tokens are not enabled."
    DELEGATION_TOKEN_NOT_FOUND = 62, False, "The delegation token was not found."
    DELEGATION_TOKEN_OWNER_MISMATCH = 63, False, "The principal is not the token's owner or renewer."
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64, False, "Delegation token requests not allowed on this channel."
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65, False, "Delegation token authorization failed."
    DELEGATION_TOKEN_EXPIRED = 66, False, "The delegation token has expired."
    INVALID_PRINCIPAL_TYPE = 67, False, "The principal type is not supported."
    NON_EMPTY_GROUP = 68, False, "The group is not empty."
    GROUP_ID_NOT_FOUND = 69, False, "The group id does not exist."
    FETCH_SESSION_ID_NOT_FOUND = 70, True, "The fetch session id was not found."
    INVALID_FETCH_SESSION_EPOCH = 71, True, "The fetch session epoch is invalid."
    LISTENER_NOT_FOUND = 72, True, "The leader has no listener matching the one the request came on."
    TOPIC_DELETION_DISABLED = 73, False, "Topic deletion is disabled."
    FENCED_LEADER_EPOCH = 74, True, "The request's leader epoch is older than the broker's."
    UNKNOWN_LEADER_EPOCH = 75, True, "The request's leader epoch is newer than the broker's."
    UNSUPPORTED_COMPRESSION_TYPE = 76, False, "The client does not support the partition's compression type."
    STALE_BROKER_EPOCH = 77, False, "The broker epoch has changed."
    OFFSET_NOT_AVAILABLE = 78, True, "The leader's high watermark has not caught up since its election."
    MEMBER_ID_REQUIRED = 79, False, "The member must rejoin with the member id it was given."
    PREFERRED_LEADER_NOT_AVAILABLE = 80, True, "The preferred leader is not available."
    GROUP_MAX_SIZE_REACHED = 81, False, "The group has reached its maximum size."
    FENCED_INSTANCE_ID = 82, False, "Another member registered with the same group.instance.id."
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83, True, "No eligible leader is available for the partition."
    ELECTION_NOT_NEEDED = 84, True, "Leader election is not needed for the partition."
    NO_REASSIGNMENT_IN_PROGRESS = 85, False, "No partition reassignment is in progress."
    GROUP_SUBSCRIBED_TO_TOPIC = 86, False, "Cannot delete offsets of a topic the group is subscribed to."
    INVALID_RECORD = 87, False, "A record failed the broker's validation."
    UNSTABLE_OFFSET_COMMIT = 88, True, "There are pending (unstable) offset commits."
    THROTTLING_QUOTA_EXCEEDED = 89, True, "The throttling quota has been exceeded."
    PRODUCER_FENCED = 90, False, "A newer producer with the same transactional id fenced this one."
    RESOURCE_NOT_FOUND = 91, False, "The referenced resource does not exist."
    DUPLICATE_RESOURCE = 92, False, "The request names the same resource twice."
    UNACCEPTABLE_CREDENTIAL = 93, False, "The credential does not meet the acceptability criteria."
    INCONSISTENT_VOTER_SET = 94, False, "The sender or recipient is not one of the expected voters."
    INVALID_UPDATE_VERSION = 95, False, "The update version is invalid."
    FEATURE_UPDATE_FAILED = 96, False, "Updating the finalized features failed."
    PRINCIPAL_DESERIALIZATION_FAILURE = 97, False, "The forwarded request's principal could not be read."
    SNAPSHOT_NOT_FOUND = 98, False, "The requested snapshot was not found."
    POSITION_OUT_OF_RANGE = 99, False, "The requested position is outside the snapshot."
    UNKNOWN_TOPIC_ID = 100, True, "This server does not host this topic id."
    DUPLICATE_BROKER_REGISTRATION = 101, False, "The broker id is already registered."
    BROKER_ID_NOT_REGISTERED = 102, False, "The broker id is not registered."
    INCONSISTENT_TOPIC_ID = 103, True, "The log's topic id does not match the request's."
    INCONSISTENT_CLUSTER_ID = 104, False, "The cluster id does not match the server's."
    TRANSACTIONAL_ID_NOT_FOUND = 105, False, "The transactional id was not found."
    FETCH_SESSION_TOPIC_ID_ERROR = 106, True, "The fetch session mixes topic ids inconsistently."
    INELIGIBLE_REPLICA = 107, False, "The new ISR contains an ineligible replica."
    NEW_LEADER_ELECTED = 108, False, "The partition state was updated but the leader changed."
    OFFSET_MOVED_TO_TIERED_STORAGE = 109, False, "The requested offset has moved to tiered storage."
    FENCED_MEMBER_EPOCH = 110, False, "The member epoch is fenced; the member must rejoin."
    UNRELEASED_INSTANCE_ID = 111, False, "The instance id is still used by another member."
    UNSUPPORTED_ASSIGNOR = 112, False, "The assignor or its version range is not supported."
    STALE_MEMBER_EPOCH = 113, False, "The member epoch is stale."
    MISMATCHED_ENDPOINT_TYPE = 114, False, "The request was sent to the wrong type of endpoint."
    UNSUPPORTED_ENDPOINT_TYPE = 115, False, "This endpoint type is not supported yet."
    UNKNOWN_CONTROLLER_ID = 116, False, "The controller id is not known."
    UNKNOWN_SUBSCRIPTION_ID = 117, False, "The telemetry subscription id is invalid or outdated."
    TELEMETRY_TOO_LARGE = 118, False, "The telemetry push is larger than the broker accepts."
    INVALID_REGISTRATION = 119, False, "The controller considers the broker registration invalid."
    TRANSACTION_ABORTABLE = 120, False, "The transaction failed and can be aborted to continue."
    INVALID_RECORD_STATE = 121, False, "The record state is invalid; the acknowledgement failed."
    SHARE_SESSION_NOT_FOUND = 122, True, "The share session was not found."
    INVALID_SHARE_SESSION_EPOCH = 123, True, "The share session epoch is invalid."
    FENCED_STATE_EPOCH = 124, False, "The share-group state epoch did not match."
    INVALID_VOTER_KEY = 125, False, "The voter key does not match the receiving replica's."
    DUPLICATE_VOTER = 126, False, "The voter is already in the voter set."
    VOTER_NOT_FOUND = 127, False, "The voter is not in the voter set."


_BY_CODE: dict[int, ErrorCode] = {e.value: e for e in ErrorCode}


def error_name(code: int) -> str:
    """``"UNKNOWN_TOPIC_OR_PARTITION"`` for 3; ``"UNKNOWN_ERROR_CODE_<n>"`` for a code we do not know."""
    e = _BY_CODE.get(code)
    return e.name if e is not None else f"UNKNOWN_ERROR_CODE_{code}"


def is_retriable(code: int) -> bool:
    """Whether Kafka clients retry on ``code`` (False for unknown codes)."""
    e = _BY_CODE.get(code)
    return e.retriable if e is not None else False
