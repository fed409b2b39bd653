"""Raw requests for the transactional offset commit tests (tests/broker/test_txn_offset_commit.py,
tests/cluster/test_cluster_txn_offsets.py), sent as a transactional producer and the transaction
coordinator would: InitProducerId, TxnOffsetCommit, WriteTxnMarkers to a group's ``__consumer_offsets``
partition, plain OffsetCommit and OffsetFetch (require_stable), and a one-member group (JoinGroup,
SyncGroup) for the KIP-447 checks. Waits poll with a deadline."""

from __future__ import annotations

from typing import Any

from raw_kafka import RawConnection

import kctl.protocol as kp
from kctl.broker.group.records import partition_for_group
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.find_coordinator import FindCoordinatorRequest
from kctl.protocol.messages.init_producer_id import InitProducerIdRequest
from kctl.protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from kctl.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kctl.protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from kctl.protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from kctl.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from kctl.protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from kctl.testing import wait_for

UNSTABLE = ErrorCode.UNSTABLE_OFFSET_COMMIT


def coordinator_ready(conn: RawConnection, group: str, *, coordinator_only: bool = False) -> None:
    """FindCoordinator (creating __consumer_offsets) until it names a coordinator for ``group``; then,
    unless ``coordinator_only``, until the broker of ``conn`` has loaded the group's partition
    (OffsetFetch answers it: not NOT_COORDINATOR nor COORDINATOR_LOAD_IN_PROGRESS)."""
    wait_for(
        lambda: (
            conn.request(kp.ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key=group)).error_code == 0
        ),
        f"the coordinator of {group}",
        60,
    )
    if not coordinator_only:
        wait_for(
            lambda: fetch(conn, group, "-", [0])[0] == ErrorCode.NONE, "the group's partition loaded", 60
        )


def producer_id(conn: RawConnection) -> int:
    response = conn.request(
        kp.ApiKey.INIT_PRODUCER_ID,
        4,
        InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000),
    )
    assert response.error_code == 0, response
    return int(response.producer_id)


def txn_commit(
    conn: RawConnection,
    group: str,
    pid: int,
    topic: str,
    offsets: dict[int, int],
    *,
    epoch: int = 0,
    version: int = 3,
    generation: int = -1,
    member_id: str = "",
    instance_id: str | None = None,
) -> dict[int, int]:
    """TxnOffsetCommit of ``offsets`` (partition -> offset); partition -> error code."""
    body = TxnOffsetCommitRequest(
        transactional_id=f"txn-{pid}",
        group_id=group,
        producer_id=pid,
        producer_epoch=epoch,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance_id,
        topics=[
            TxnOffsetCommitRequestTopic(
                name=topic,
                partitions=[
                    TxnOffsetCommitRequestPartition(
                        partition_index=p, committed_offset=o, committed_metadata="m"
                    )
                    for p, o in offsets.items()
                ],
            )
        ],
    )
    [answer] = conn.request(kp.ApiKey.TXN_OFFSET_COMMIT, version, body).topics
    assert answer.name == topic
    return {p.partition_index: p.error_code for p in answer.partitions}


def plain_commit(conn: RawConnection, group: str, topic: str, offsets: dict[int, int]) -> None:
    """OffsetCommit v8 as a simple consumer (no member, generation -1)."""
    body = OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[
            OffsetCommitRequestTopic(
                name=topic,
                partitions=[
                    OffsetCommitRequestPartition(partition_index=p, committed_offset=o, committed_metadata="")
                    for p, o in offsets.items()
                ],
            )
        ],
    )
    [answer] = conn.request(kp.ApiKey.OFFSET_COMMIT, 8, body).topics
    assert [p.error_code for p in answer.partitions] == [0] * len(offsets)


def fetch(
    conn: RawConnection,
    group: str,
    topic: str,
    partitions: list[int],
    *,
    stable: bool = False,
    version: int = 8,
) -> tuple[int, dict[int, tuple[int, int]]]:
    """OffsetFetch (v8 batched, or v7); (group error, partition -> (committed offset, error code))."""
    if version >= 8:
        body = OffsetFetchRequest(
            groups=[
                OffsetFetchRequestGroup(
                    group_id=group,
                    topics=[OffsetFetchRequestTopics(name=topic, partition_indexes=partitions)],
                )
            ],
            require_stable=stable,
        )
        [answer] = conn.request(kp.ApiKey.OFFSET_FETCH, version, body).groups
    else:
        body = OffsetFetchRequest(
            group_id=group,
            topics=[OffsetFetchRequestTopic(name=topic, partition_indexes=partitions)],
            require_stable=stable,
        )
        answer = conn.request(kp.ApiKey.OFFSET_FETCH, version, body)
    return answer.error_code, {
        p.partition_index: (p.committed_offset, p.error_code) for t in answer.topics for p in t.partitions
    }


def marker(
    conn: RawConnection, pid: int, group: str, *, commit: bool, epoch: int = 0, partitions: int = 5
) -> int:
    """WriteTxnMarkers of ``pid``'s COMMIT or ABORT to ``group``'s __consumer_offsets partition (of
    ``partitions``), as the transaction coordinator sends it to its leader; the partition's error code."""
    request = WriteTxnMarkersRequest(
        markers=[
            WritableTxnMarker(
                producer_id=pid,
                producer_epoch=epoch,
                transaction_result=commit,
                topics=[
                    WritableTxnMarkerTopic(
                        name="__consumer_offsets",
                        partition_indexes=[partition_for_group(group, partitions)],
                    )
                ],
                coordinator_epoch=0,
            )
        ]
    )
    [result] = conn.request(kp.ApiKey.WRITE_TXN_MARKERS, 1, request).markers
    [topic] = result.topics
    [part] = topic.partitions
    return int(part.error_code)


def join(conn: RawConnection, group: str, instance_id: str | None = None) -> tuple[str, int]:
    """The only member of ``group`` (JoinGroup v5, MEMBER_ID_REQUIRED first unless static, then
    SyncGroup as leader): (member id, generation)."""

    def join_once(member_id: str) -> Any:
        body = JoinGroupRequest(
            group_id=group,
            session_timeout_ms=30000,
            rebalance_timeout_ms=30000,
            member_id=member_id,
            group_instance_id=instance_id,
            protocol_type="consumer",
            protocols=[
                JoinGroupRequestProtocol(name="range", metadata=b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff")
            ],
        )
        return conn.request(kp.ApiKey.JOIN_GROUP, 5, body)

    response = join_once("")
    if response.error_code == ErrorCode.MEMBER_ID_REQUIRED:
        response = join_once(response.member_id)
    assert response.error_code == 0, response
    member_id, generation = response.member_id, response.generation_id
    sync = SyncGroupRequest(
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance_id,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[SyncGroupRequestAssignment(member_id=member_id, assignment=b"")],
    )
    assert conn.request(kp.ApiKey.SYNC_GROUP, 5, sync).error_code == 0
    return member_id, generation
