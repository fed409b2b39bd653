"""Transactional offset commits (TxnOffsetCommit, KIP-98 / KIP-447) on real broker processes, driven
with raw requests as the transaction coordinator and a transactional producer would send them: the
offsets are pending (OffsetFetch answers the last committed value, require_stable answers
UNSTABLE_OFFSET_COMMIT) until the producer's COMMIT marker on the group's ``__consumer_offsets``
partition (WriteTxnMarkers), and never visible after an ABORT; a plain OffsetCommit written while the
transaction is open wins over it, one written before does not (Kafka's rule); a SIGKILL with a commit
pending leaves it pending after the reload, and the marker then commits it; the group metadata of v3+
fences a stale generation, an unknown member and a fenced static member; an older producer epoch is
INVALID_PRODUCER_EPOCH; with the ACL authorizer, WRITE on the TransactionalId is checked first, then
READ on the group, then READ on each topic."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from group_clients import BROKER_PROPERTIES
from raw_kafka import RawConnection, create_topic, running_broker, unique
from txn_offsets_support import (
    UNSTABLE,
    coordinator_ready,
    fetch,
    join,
    plain_commit,
    producer_id,
    txn_commit,
)
from txn_offsets_support import marker as marker_to

import kctl.protocol as kp
from kctl.localcluster.broker import BrokerProcess
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.find_coordinator import FindCoordinatorRequest
from kctl.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from kctl.testing import wait_for

pytestmark = pytest.mark.timeout(120)

OFFSETS_PARTITIONS = int(BROKER_PROPERTIES["offsets.topic.num.partitions"])


def marker(conn: RawConnection, pid: int, group: str, *, commit: bool, epoch: int = 0) -> int:
    return marker_to(conn, pid, group, commit=commit, epoch=epoch, partitions=OFFSETS_PARTITIONS)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path_factory, BROKER_PROPERTIES, "txn-offsets") as process:
        yield process


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker of the test's own, for the tests that kill it."""
    process = BrokerProcess(tmp_path / "data", BROKER_PROPERTIES).start()
    yield process
    process.stop()


def setup(broker: BrokerProcess, partitions: int = 2) -> tuple[RawConnection, str, str, int]:
    """A connection, a new topic, a new group whose coordinator is ready, a new producer id."""
    conn = RawConnection(broker.bootstrap)
    topic, group = unique("txn-offsets"), unique("g")
    assert create_topic(broker.bootstrap, topic, partitions) == 0
    coordinator_ready(conn, group)
    return conn, topic, group, producer_id(conn)


# ---------------------------------------------------------------------------------------------- tests


def test_txn_offsets_are_visible_only_after_the_commit_marker(broker: BrokerProcess) -> None:
    conn, topic, group, pid = setup(broker)
    with conn:
        assert txn_commit(conn, group, pid, topic, {0: 5, 1: 6}) == {0: 0, 1: 0}
        assert fetch(conn, group, topic, [0, 1]) == (0, {0: (-1, 0), 1: (-1, 0)})
        assert fetch(conn, group, topic, [0, 1], stable=True) == (0, {0: (-1, UNSTABLE), 1: (-1, UNSTABLE)})
        assert fetch(conn, group, topic, [0], stable=True, version=7) == (0, {0: (-1, UNSTABLE)})
        assert marker(conn, pid, group, commit=True) == 0
        assert fetch(conn, group, topic, [0, 1]) == (0, {0: (5, 0), 1: (6, 0)})
        assert fetch(conn, group, topic, [0, 1], stable=True) == (0, {0: (5, 0), 1: (6, 0)})


def test_aborted_txn_offsets_are_never_visible(broker: BrokerProcess) -> None:
    conn, topic, group, pid = setup(broker)
    with conn:
        plain_commit(conn, group, topic, {0: 3})
        assert txn_commit(conn, group, pid, topic, {0: 7}) == {0: 0}
        assert fetch(conn, group, topic, [0]) == (0, {0: (3, 0)})
        assert fetch(conn, group, topic, [0], stable=True) == (0, {0: (-1, UNSTABLE)})
        assert marker(conn, pid, group, commit=False) == 0
        assert fetch(conn, group, topic, [0], stable=True) == (0, {0: (3, 0)})


def test_a_plain_commit_written_after_the_txn_commit_wins_one_written_before_does_not(
    broker: BrokerProcess,
) -> None:
    conn, topic, group, pid = setup(broker)
    with conn:
        plain_commit(conn, group, topic, {1: 1})  # before the transactional commit: replaced by it
        assert txn_commit(conn, group, pid, topic, {0: 10, 1: 11}) == {0: 0, 1: 0}
        plain_commit(conn, group, topic, {0: 20})  # after it, before the marker: accepted, and wins
        assert fetch(conn, group, topic, [0, 1]) == (0, {0: (20, 0), 1: (1, 0)})
        assert fetch(conn, group, topic, [0], stable=True) == (0, {0: (-1, UNSTABLE)})
        assert marker(conn, pid, group, commit=True) == 0
        assert fetch(conn, group, topic, [0, 1], stable=True) == (0, {0: (20, 0), 1: (11, 0)})


def test_group_metadata_fences_stale_generations_unknown_and_fenced_members(broker: BrokerProcess) -> None:
    conn, topic, group, pid = setup(broker)
    with conn:
        member_id, generation = join(conn, group)
        assert txn_commit(
            conn, group, pid, topic, {0: 1}, generation=generation + 1, member_id=member_id
        ) == {0: ErrorCode.ILLEGAL_GENERATION}
        assert txn_commit(conn, group, pid, topic, {0: 1}, generation=generation, member_id="nobody") == {
            0: ErrorCode.UNKNOWN_MEMBER_ID
        }
        assert fetch(conn, group, topic, [0], stable=True) == (0, {0: (-1, 0)})  # nothing pending
        assert txn_commit(conn, group, pid, topic, {0: 2}, generation=generation, member_id=member_id) == {
            0: 0
        }
        # v0-2 carry no group metadata: accepted whatever the group's state
        assert txn_commit(conn, group, pid, topic, {1: 3}, version=2) == {1: 0}
        assert marker(conn, pid, group, commit=True) == 0
        assert fetch(conn, group, topic, [0, 1]) == (0, {0: (2, 0), 1: (3, 0)})

    conn, topic, static_group, pid = setup(broker)
    with conn:
        member_id, generation = join(conn, static_group, instance_id="instance-1")
        fenced = txn_commit(
            conn,
            static_group,
            pid,
            topic,
            {0: 1},
            generation=generation,
            member_id="old",
            instance_id="instance-1",
        )
        assert fenced == {0: ErrorCode.FENCED_INSTANCE_ID}
        assert txn_commit(
            conn,
            static_group,
            pid,
            topic,
            {0: 4},
            generation=generation,
            member_id=member_id,
            instance_id="instance-1",
        ) == {0: 0}


def test_an_older_producer_epoch_and_unknown_partitions_are_refused(broker: BrokerProcess) -> None:
    conn, topic, group, pid = setup(broker)
    with conn:
        assert txn_commit(conn, group, pid, topic, {0: 1}, epoch=1) == {0: 0}
        assert txn_commit(conn, group, pid, topic, {0: 2}, epoch=0) == {0: ErrorCode.INVALID_PRODUCER_EPOCH}
        assert txn_commit(conn, group, pid, topic, {0: 3, 7: 3}, epoch=1) == {
            0: 0,
            7: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }
        assert marker(conn, pid, group, commit=True, epoch=1) == 0
        assert fetch(conn, group, topic, [0]) == (0, {0: (3, 0)})


def test_a_pending_commit_survives_a_kill_then_the_marker_commits_it(own_broker: BrokerProcess) -> None:
    conn, topic, group, pid = setup(own_broker)
    with conn:
        plain_commit(conn, group, topic, {0: 1})
        assert txn_commit(conn, group, pid, topic, {0: 42}) == {0: 0}
    own_broker.restart(clean=False)  # SIGKILL
    with RawConnection(own_broker.bootstrap) as conn:
        coordinator_ready(conn, group)
        assert fetch(conn, group, topic, [0]) == (0, {0: (1, 0)})
        assert fetch(conn, group, topic, [0], stable=True) == (0, {0: (-1, UNSTABLE)})
        assert marker(conn, pid, group, commit=True) == 0
        assert fetch(conn, group, topic, [0], stable=True) == (0, {0: (42, 0)})
        assert txn_commit(conn, group, pid, topic, {0: 99}) == {0: 0}  # the producer's next transaction
    own_broker.restart(clean=False)
    with RawConnection(own_broker.bootstrap) as conn:
        coordinator_ready(conn, group)
        assert fetch(conn, group, topic, [0]) == (0, {0: (42, 0)})  # committed survives, next one pending
        assert fetch(conn, group, topic, [0], stable=True) == (0, {0: (-1, UNSTABLE)})
        assert marker(conn, pid, group, commit=False) == 0
    own_broker.restart(clean=False)
    with RawConnection(own_broker.bootstrap) as conn:
        coordinator_ready(conn, group)
        assert fetch(conn, group, topic, [0], stable=True) == (0, {0: (42, 0)})


# ------------------------------------------------------------------------------------- authorization

ADMIN_PASSWORD, ALICE_PASSWORD = "admin-secret", "alice-secret"


def sasl(user: str, password: str) -> dict[str, str]:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": password,
    }


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """SASL_PLAINTEXT with PLAIN users admin (a super user) and alice, and the ACL authorizer; alice may
    WRITE on the TransactionalId txn-ok, READ the group g-ok and READ the topic acl-ok."""
    from kctl.client.admin import AdminClient, NewTopic
    from kctl.client.admin.security import AclBinding
    from kctl.protocol.acl_types import AclOperation, AclPermissionType, AclResourceType, PatternType

    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="admin" password="{ADMIN_PASSWORD}" user_admin="{ADMIN_PASSWORD}" '
        f'user_alice="{ALICE_PASSWORD}";'
    )
    properties = {
        **BROKER_PROPERTIES,
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.jaas.config": jaas,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
    }
    broker = BrokerProcess(tmp_path_factory.mktemp("txn-offsets-acl") / "data", properties).start()
    try:
        allow = AclPermissionType.ALLOW
        with AdminClient(broker.bootstrap, sasl("admin", ADMIN_PASSWORD)) as admin:
            admin.create_topics([NewTopic(name, 1, 1) for name in ("acl-ok", "acl-hidden")])
            bindings = [
                AclBinding(AclResourceType.TRANSACTIONAL_ID, "txn-ok", PatternType.LITERAL, "User:alice", "*",
                           AclOperation.WRITE, allow),
                AclBinding(AclResourceType.GROUP, "g-ok", PatternType.LITERAL, "User:alice", "*",
                           AclOperation.READ, allow),
                AclBinding(AclResourceType.TOPIC, "acl-ok", PatternType.LITERAL, "User:alice", "*",
                           AclOperation.READ, allow),
            ]  # fmt: skip
            assert all(result.error_code == 0 for result in admin.create_acls(bindings))
        yield broker
    finally:
        broker.stop()


def test_authorization_in_kafkas_order(secured: BrokerProcess) -> None:
    from kctl.client.config import ClientConfig
    from kctl.client.connection import BrokerConnection, parse_address
    from kctl.client.security import SecuritySettings

    def connect(user: str, password: str) -> BrokerConnection:
        security = SecuritySettings.from_config(ClientConfig.from_properties(sasl(user, password)))
        return BrokerConnection(*parse_address(secured.bootstrap), security=security)

    def commit(conn: BrokerConnection, transactional_id: str, group: str) -> dict[str, int]:
        body = TxnOffsetCommitRequest(
            transactional_id=transactional_id,
            group_id=group,
            producer_id=1000,
            producer_epoch=0,
            topics=[
                TxnOffsetCommitRequestTopic(
                    name=name,
                    partitions=[
                        TxnOffsetCommitRequestPartition(
                            partition_index=0, committed_offset=1, committed_metadata=""
                        )
                    ],
                )
                for name in ("acl-ok", "acl-hidden")
            ],
        )
        response = conn.request(kp.ApiKey.TXN_OFFSET_COMMIT, body, 3)
        return {t.name: t.partitions[0].error_code for t in response.topics}

    with connect("admin", ADMIN_PASSWORD) as admin:
        wait_for(
            lambda: (
                admin.request(kp.ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(key="g-ok"), 3).error_code
                == 0
            ),
            "the coordinator of g-ok",
            30,
        )
    with connect("alice", ALICE_PASSWORD) as conn:
        denied = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert commit(conn, "txn-denied", "g-ok") == {"acl-ok": denied, "acl-hidden": denied}
        denied = ErrorCode.GROUP_AUTHORIZATION_FAILED
        assert commit(conn, "txn-ok", "g-denied") == {"acl-ok": denied, "acl-hidden": denied}
        wait_for(
            lambda: commit(conn, "txn-ok", "g-ok")["acl-ok"] != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
            "the group's partition loaded",
            30,
        )
        assert commit(conn, "txn-ok", "g-ok") == {
            "acl-ok": ErrorCode.NONE,
            "acl-hidden": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        }
