"""The embedded registry's own concerns: its one JSON document (format, atomic rewrite, refusal of
unknown versions and corrupt files), the lock that keeps a second process off the same
metadata, and the admin requests a cluster of one refuses. Its behaviour as a registry is in
test_zk_registry.py, shared with ZooKeeper."""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path

import pytest

from kctl.zk.embedded import LOCK_FILE_NAME, METADATA_FILE_NAME, EmbeddedRegistry
from kctl.zk.model import (
    BrokerRegistration,
    OngoingReassignment,
    PartitionState,
    RegistryError,
    RegistryUnavailableError,
    encode_uuid,
)


def test_the_document_format(tmp_path: Path) -> None:
    topic_id = uuid.UUID("0123456789abcdeffedcba9876543210")
    with EmbeddedRegistry(tmp_path) as registry:
        cluster_id = registry.cluster_id()
        registry.register_broker(BrokerRegistration(1, "127.0.0.1", 9092))
        registry.try_become_controller(1)
        registry.create_topic("t", {0: (1,), 1: (1,)}, {"cleanup.policy": "compact"}, topic_id=topic_id)
        registry.set_partition_state("t", 1, PartitionState(1, 2, (1,), controller_epoch=1))
    document = json.loads((tmp_path / METADATA_FILE_NAME).read_text())
    assert document == {
        "version": 1,
        "cluster_id": cluster_id,
        "controller_epoch": 1,
        "topics": {
            "t": {
                "topic_id": encode_uuid(topic_id),
                "partitions": {"0": [1], "1": [1]},
                "configs": {"cleanup.policy": "compact"},
                "partition_states": {
                    "1": {
                        "leader": 1,
                        "leader_epoch": 2,
                        "isr": [1],
                        "controller_epoch": 1,
                        "partition_epoch": 0,
                    }
                },
            }
        },
    }  # no brokers and no controller: they are ephemeral


def test_nothing_is_written_before_the_first_change(tmp_path: Path) -> None:
    with EmbeddedRegistry(tmp_path) as registry:
        assert registry.topics() == {}
        assert not (tmp_path / METADATA_FILE_NAME).exists()
        registry.cluster_id()
        assert (tmp_path / METADATA_FILE_NAME).exists()


def test_writes_are_atomic_and_a_leftover_temporary_file_is_ignored(tmp_path: Path) -> None:
    with EmbeddedRegistry(tmp_path) as registry:
        registry.create_topic("t", {0: (1,)}, {})
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([LOCK_FILE_NAME, METADATA_FILE_NAME])
    # A crash in the middle of a write leaves the temporary file; the document is the old one.
    (tmp_path / (METADATA_FILE_NAME + ".tmp")).write_text('{"version": 1, "topics": {"half-writ')
    with EmbeddedRegistry(tmp_path) as registry:
        assert list(registry.topics()) == ["t"]
    assert not (tmp_path / (METADATA_FILE_NAME + ".tmp")).exists()


def test_a_failed_write_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with EmbeddedRegistry(tmp_path) as registry:
        registry.create_topic("t", {0: (1,)}, {"retention.ms": "1"})

        def disk_full(*args: object) -> None:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr("kctl.zk.embedded.os.replace", disk_full)
        with pytest.raises(OSError):
            registry.create_topic("u", {0: (1,)}, {})
        with pytest.raises(OSError):
            registry.set_topic_configs("t", {})
        with pytest.raises(OSError):
            registry.add_partitions("t", {1: (1,)})
        with pytest.raises(OSError):
            registry.delete_topic("t")
        assert list(registry.topics()) == ["t"]
        assert registry.get_topic("t").configs == {"retention.ms": "1"}  # type: ignore[union-attr]
        assert registry.get_topic("t").partitions == 1  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"version": 2, "topics": {}}', "unsupported metadata format version 2"),
        ("{not json", "corrupt cluster metadata"),
        ("[]", "corrupt cluster metadata"),
        ('{"version": 1, "topics": {"t": {"partitions": {"0": [1]}}}}', "corrupt cluster metadata"),
    ],
)
def test_an_unreadable_document_is_refused(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / METADATA_FILE_NAME).write_text(text)
    registry = EmbeddedRegistry(tmp_path)
    with pytest.raises(RegistryError, match=message):
        registry.start()
    # The lock was released: after a fix, the registry opens.
    (tmp_path / METADATA_FILE_NAME).unlink()
    with registry:
        assert registry.topics() == {}


def test_two_registries_cannot_share_a_directory(tmp_path: Path) -> None:
    first = EmbeddedRegistry(tmp_path)
    first.start()
    with pytest.raises(RegistryError, match="in use by another registry"):
        EmbeddedRegistry(tmp_path).start()
    first.close()
    with EmbeddedRegistry(tmp_path) as second:
        assert second.topics() == {}


def test_not_started_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(RegistryUnavailableError, match="not started"):
        EmbeddedRegistry(tmp_path).cluster_id()


def test_listeners_run_synchronously_on_the_changing_thread(tmp_path: Path) -> None:
    calls: list[tuple[str, str]] = []
    with EmbeddedRegistry(tmp_path) as registry:
        registry.add_listener(lambda reason: calls.append((reason, threading.current_thread().name)))
        registry.register_broker(BrokerRegistration(1, "h", 1))
        registry.try_become_controller(1)
        registry.create_topic("t", {0: (1,)}, {})
        registry.set_topic_configs("t", {"a": "b"})
        registry.set_partition_state("t", 0, PartitionState(1, 0, (1,)))
        registry.add_partitions("t", {1: (1,)})
        registry.delete_topic("t")
        registry.unregister_broker(1)
    me = threading.current_thread().name
    assert calls == [
        ("brokers", me),
        ("controller", me),
        ("topics", me),
        ("configs", me),
        ("partitions", me),
        ("topics", me),
        ("topics", me),
        ("brokers", me),
        ("controller", me),  # close: the controller is gone
    ]


def test_concurrent_changes_are_all_kept(tmp_path: Path) -> None:
    with EmbeddedRegistry(tmp_path, fsync=False) as registry:

        def create(worker: int) -> None:
            for i in range(20):
                registry.create_topic(f"t-{worker}-{i}", {0: (1,)}, {})

        threads = [threading.Thread(target=create, args=(w,)) for w in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(registry.topics()) == 80
    with EmbeddedRegistry(tmp_path) as registry:
        assert len(registry.topics()) == 80


def test_a_cluster_of_one_moves_and_elects_nothing(tmp_path: Path) -> None:
    with EmbeddedRegistry(tmp_path, fsync=False) as registry:
        registry.create_topic("t", {0: (0,), 1: (0,)}, {})
        requests = registry.admin_requests
        assert requests.request_reassignments({("t", 0): [0], ("t", 1): [1], ("u", 0): [0]}) == {
            ("t", 1): "an embedded broker cannot move replicas",  # t-0: its replicas already
            ("u", 0): "an embedded broker cannot move replicas",
        }
        assert requests.reassignment_requests() == {}
        assert requests.withdraw_reassignments([("t", 0)]) == set()
        assert requests.ongoing_reassignments({"t": {0: (0,), 1: (0,)}}) == {}
        assert requests.request_elections("unclean", [("t", 0)]) == {("t", 0): "no other replica to elect"}
        assert requests.request_elections("preferred", [("t", 1)]) == {("t", 1): "no other replica to elect"}
        with pytest.raises(ValueError):
            requests.request_elections("random", [("t", 0)])
        assert requests.unclean_election_requests() == set()
        assert requests.preferred_election_requests() is None


def test_a_reassignment_the_controller_started_is_ongoing(tmp_path: Path) -> None:
    """What the topic holds of a started reassignment (adding and removing replicas) is reported, as
    the ZooKeeper backend reports it; a requested one that moves nothing as Kafka describes it."""
    with EmbeddedRegistry(tmp_path, fsync=False) as registry:
        registry.create_topic("t", {0: (0,), 1: (0,)}, {})
        assert registry.try_become_controller(0)
        fence = registry.controller_fence()
        assert fence is not None
        registry.set_topic_assignment("t", {0: (0,), 1: (1, 0)}, {1: (1,)}, {1: (0,)}, fence)
        requests = registry.admin_requests
        requests.set_reassignment_requests({("t", 0): (0,)})
        assert requests.ongoing_reassignments({"t": {0: (0,), 1: (1, 0)}}) == {
            ("t", 0): OngoingReassignment("t", 0, (0,), (), ()),
            ("t", 1): OngoingReassignment("t", 1, (1, 0), (1,), (0,)),
        }
