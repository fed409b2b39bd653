"""Kafka's ZooKeeper layout: one definition per znode (its path, and how its data is encoded and
decoded), so that kctl and Apache Kafka's own brokers and tools read each other's znodes.

This module owns the bytes. The formats are those Apache Kafka 3.x writes in ZooKeeper mode
(``core/src/main/scala/kafka/zk/ZkData.scala``): compact JSON objects carrying a ``"version"``
field, except ``/controller_epoch`` (a bare decimal integer, as Kafka writes it). Decoders accept
the older versions Kafka still reads. Nothing here talks to ZooKeeper: the ZooKeeper registry's
parts (kctl.zk.zookeeper) do.

::

    /cluster/id                                    {"version":"1","id":"<22-char base64>"}
    /controller                   (ephemeral)      {"version":2,"brokerid":1,"timestamp":"<ms>",
                                                    "kraftControllerEpoch":-1}
    /controller_epoch                              7
    /brokers/ids/<id>             (ephemeral)      {"version":5,"host":..,"port":..,"endpoints":[..],
                                                    "listener_security_protocol_map":{..},
                                                    "jmx_port":-1,"timestamp":"<ms>","features":{},
                                                    "rack":..  (only when the broker has one)}
    /brokers/topics/<topic>                        {"version":3,"topic_id":"<base64>",
                                                    "partitions":{"0":[1,2]},
                                                    "adding_replicas":{},"removing_replicas":{}}
    /brokers/topics/<topic>/partitions/<p>/state   {"version":1,"leader":1,"leader_epoch":0,
                                                    "isr":[1,2],"controller_epoch":1}
                                                   (+ kctl's "eligible_leader_replicas":[3] when
                                                    there are any: KIP-966's ELR)
    /config/topics/<topic>                         {"version":1,"config":{"cleanup.policy":"compact"}}
    /config/brokers/<id>|<default>                 dynamic broker configs, same format
    /config/users/<u>[/clients/<c>], /config/clients/<c>
                                                   SCRAM credentials and client quotas, same format
    /config/changes/config_change_<seq> (seq.)     {"version":2,"entity_path":"topics/<topic>"}
    /admin/delete_topics/<topic>                   (no data: a topic marked for deletion)
    /admin/reassign_partitions                     {"version":1,"partitions":[{"topic":"t",
                                                    "partition":0,"replicas":[1,2]}]}
    /admin/preferred_replica_election              {"version":1,"partitions":[{"topic":"t",
                                                    "partition":0}]}
    /kctl/elect_leaders                            {"version":1,"election_type":"unclean",
                                                    "partitions":[{"topic":"t","partition":0}]}
                                                    (kctl's own)
    /kctl/controlled_shutdown/<id> (ephemeral)     {"version":1,"state":"requested"|"done",
                                                    "remaining_partitions":0}  (kctl's own)
    /kctl/unclean_restart/<id> (ephemeral)         (no data: restarted after an unclean shutdown;
                                                    kctl's own)
    /log_dir_event_notification/log_dir_event_<seq> (seq.)
                                                   {"version":1,"broker":1,"event":1}
    /kctl/offline_replicas/<id> (ephemeral)        {"version":1,"partitions":[{"topic":"t",
                                                    "partition":0}]}  (kctl's own)
    /kctl/unreachable_leaders/<id>-<leader> (eph.) (no data: broker <id> has had no answer from
                                                    broker <leader>, whose partitions it follows,
                                                    for replica.lag.time.max.ms; kctl's own)
    /kafka-acl/<type>/<name>                       {"version":1,"acls":[{"principal":"User:a",
    /kafka-acl-extended/prefixed/<type>/<name>      "permissionType":"Allow","operation":"Read",
                                                    "host":"*"}]}
    /kafka-acl-changes/acl_changes_<seq> (seq.)    Topic:<name>
    /kafka-acl-extended-changes/acl_changes_<seq>  {"version":1,"resourceType":"Topic","name":..,
                                                    "patternType":"PREFIXED"}
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from kctl.zk.model import (
    BrokerRegistration,
    PartitionState,
    RegistryError,
    decode_uuid,
    encode_uuid,
    parse_endpoint,
)

__all__ = [
    "PERSISTENT_PATHS",
    "BrokerIdZNode",
    "BrokerIdsZNode",
    "ClusterIdZNode",
    "ConfigEntityChangeNotificationSequenceZNode",
    "ConfigEntityChangeNotificationZNode",
    "ConfigEntityTypeZNode",
    "ConfigEntityZNode",
    "ControlledShutdownBrokerZNode",
    "ControlledShutdownZNode",
    "ControllerEpochZNode",
    "ControllerZNode",
    "DeleteTopicsTopicZNode",
    "DeleteTopicsZNode",
    "ElectLeadersZNode",
    "LogDirEventNotificationSequenceZNode",
    "LogDirEventNotificationZNode",
    "OfflineReplicasBrokerZNode",
    "OfflineReplicasZNode",
    "PreferredReplicaElectionZNode",
    "ReassignPartitionsZNode",
    "TopicPartitionStateZNode",
    "TopicPartitionZNode",
    "TopicPartitionsZNode",
    "TopicZNode",
    "TopicsZNode",
    "UncleanRestartBrokerZNode",
    "UncleanRestartZNode",
    "UnreachableLeaderZNode",
    "UnreachableLeadersZNode",
    "ZNodeDecodeError",
]


class ZNodeDecodeError(RegistryError):
    """A znode whose data is not in any format Kafka writes."""


def _dumps(value: Mapping[str, Any]) -> bytes:
    """Compact JSON, as Kafka's ``Json.encodeAsBytes`` (Jackson) writes it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _loads(path: str, data: bytes | None) -> dict[str, Any]:
    if not data:
        raise ZNodeDecodeError(f"{path}: no data")
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ZNodeDecodeError(f"{path}: not JSON: {data[:200]!r}") from error
    if not isinstance(value, dict):
        raise ZNodeDecodeError(f"{path}: not a JSON object: {data[:200]!r}")
    return value


def _field(path: str, obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    try:
        value = obj[key]
    except KeyError:
        raise ZNodeDecodeError(f"{path}: missing field {key!r}") from None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ZNodeDecodeError(f"{path}: field {key!r} has the wrong type: {value!r}")
    return value


def _now_ms() -> str:
    return str(int(time.time() * 1000))


# -- cluster --------------------------------------------------------------------------------------
class ClusterIdZNode:
    """``/cluster/id``: the cluster id, created by the first broker that finds none."""

    path = "/cluster/id"

    @staticmethod
    def encode(cluster_id: str) -> bytes:
        return _dumps({"version": "1", "id": cluster_id})  # Kafka writes this version as a string

    @classmethod
    def decode(cls, data: bytes | None) -> str:
        return _field(cls.path, _loads(cls.path, data), "id", str)


class ControllerZNode:
    """``/controller`` (ephemeral): the broker that won the controller election. Kafka 3.4+ writes
    version 2 (with ``kraftControllerEpoch`` -1 for a ZooKeeper-mode controller); version 1 lacks
    that field; Kafka 0.8 wrote a bare integer. All three decode."""

    path = "/controller"

    @staticmethod
    def encode(broker_id: int, timestamp_ms: int | None = None) -> bytes:
        timestamp = _now_ms() if timestamp_ms is None else str(timestamp_ms)
        return _dumps(
            {"version": 2, "brokerid": broker_id, "timestamp": timestamp, "kraftControllerEpoch": -1}
        )

    @classmethod
    def decode(cls, data: bytes | None) -> int:
        text = (data or b"").decode("utf-8", "replace").strip()
        if text.lstrip("-").isdigit():
            return int(text)
        return _field(cls.path, _loads(cls.path, data), "brokerid", int)


class ControllerEpochZNode:
    """``/controller_epoch``: bumped by every newly elected controller (a bare integer)."""

    path = "/controller_epoch"

    @staticmethod
    def encode(epoch: int) -> bytes:
        return str(epoch).encode("ascii")

    @classmethod
    def decode(cls, data: bytes | None) -> int:
        try:
            return int((data or b"").decode("ascii"))
        except (UnicodeDecodeError, ValueError) as error:
            raise ZNodeDecodeError(f"{cls.path}: not an integer: {data!r}") from error


# -- brokers --------------------------------------------------------------------------------------
class BrokerIdsZNode:
    """``/brokers/ids``: the parent of the live brokers' registrations."""

    path = "/brokers/ids"


class BrokerIdZNode:
    """``/brokers/ids/<id>`` (ephemeral): a live broker. Written as version 5 (Kafka 2.7+); the
    top-level host/port are for clients that predate ``endpoints``."""

    VERSION = 5

    @staticmethod
    def path(broker_id: int) -> str:
        return f"{BrokerIdsZNode.path}/{broker_id}"

    @staticmethod
    def encode(registration: BrokerRegistration, timestamp_ms: int | None = None) -> bytes:
        document: dict[str, Any] = {
            "version": BrokerIdZNode.VERSION,
            "host": registration.host,
            "port": registration.port,
            "endpoints": list(registration.listeners),
            "listener_security_protocol_map": registration.security_protocol_map,
            "jmx_port": -1,
            "timestamp": _now_ms() if timestamp_ms is None else str(timestamp_ms),
            "features": {},
        }
        if registration.rack is not None:
            document["rack"] = registration.rack
        return _dumps(document)

    @classmethod
    def decode(cls, broker_id: int, data: bytes | None) -> BrokerRegistration:
        path = cls.path(broker_id)
        obj = _loads(path, data)
        version = _field(path, obj, "version", int)
        if version < 1:
            raise ZNodeDecodeError(f"{path}: unsupported version of broker registration: {version}")
        host = obj.get("host")
        port = obj.get("port", -1)
        if version == 1:
            listeners: tuple[str, ...] = ()
        else:
            listeners = tuple(str(e) for e in _field(path, obj, "endpoints", list))
            for endpoint in listeners:
                try:
                    parse_endpoint(endpoint)
                except ValueError as error:
                    raise ZNodeDecodeError(f"{path}: {error}") from error
        if (not isinstance(host, str) or not isinstance(port, int) or port < 0) and listeners:
            # No PLAINTEXT listener: Kafka writes host null and port -1; use the first endpoint.
            _, host, port = parse_endpoint(listeners[0])
        if not isinstance(host, str) or not isinstance(port, int):
            raise ZNodeDecodeError(f"{path}: no host and port")
        rack = obj.get("rack")
        return BrokerRegistration(
            broker_id=broker_id,
            host=host,
            port=port,
            rack=rack if isinstance(rack, str) else None,
            listeners=listeners,
        )

    @classmethod
    def security_protocols(cls, broker_id: int, data: bytes | None) -> dict[str, str]:
        """The registration's ``listener_security_protocol_map`` (listener name -> protocol, upper
        case), as the broker wrote it; empty when it has none (version 1, or not a JSON object)."""
        mapping = _loads(cls.path(broker_id), data).get("listener_security_protocol_map")
        if not isinstance(mapping, dict):
            return {}
        return {str(k).upper(): str(v).upper() for k, v in mapping.items()}


# -- topics ---------------------------------------------------------------------------------------
class TopicsZNode:
    """``/brokers/topics``: one child per topic."""

    path = "/brokers/topics"


class TopicZNode:
    """``/brokers/topics/<topic>``: the topic id and replica assignment. Written as version 3 (the
    Kafka 3.x format); older versions without ``topic_id`` decode with topic id None."""

    VERSION = 3

    @staticmethod
    def path(topic: str) -> str:
        return f"{TopicsZNode.path}/{topic}"

    @staticmethod
    def encode(
        topic_id: uuid.UUID,
        assignment: Mapping[int, tuple[int, ...]],
        adding_replicas: Mapping[int, tuple[int, ...]] | None = None,
        removing_replicas: Mapping[int, tuple[int, ...]] | None = None,
    ) -> bytes:
        return _dumps(
            {
                "version": TopicZNode.VERSION,
                "topic_id": encode_uuid(topic_id),
                "partitions": {str(p): list(r) for p, r in sorted(assignment.items())},
                "adding_replicas": {str(p): list(r) for p, r in sorted((adding_replicas or {}).items())},
                "removing_replicas": {
                    str(p): list(r) for p, r in sorted((removing_replicas or {}).items())
                },
            }
        )

    @classmethod
    def decode_reassignment(
        cls, topic: str, data: bytes | None
    ) -> tuple[dict[int, tuple[int, ...]], dict[int, tuple[int, ...]]]:
        """(adding_replicas, removing_replicas) of an ongoing reassignment ({} when none)."""
        path = cls.path(topic)
        obj = _loads(path, data)
        out: list[dict[int, tuple[int, ...]]] = []
        for key in ("adding_replicas", "removing_replicas"):
            raw = obj.get(key) or {}
            if not isinstance(raw, dict):
                raise ZNodeDecodeError(f"{path}: {key!r} is not an object")
            out.append(
                {
                    int(p): tuple(int(b) for b in r)
                    for p, r in raw.items()
                    if str(p).isdigit() and isinstance(r, list) and r
                }
            )
        return out[0], out[1]

    @classmethod
    def decode(cls, topic: str, data: bytes | None) -> tuple[uuid.UUID | None, dict[int, tuple[int, ...]]]:
        """(topic id or None, partition -> replicas). Ongoing reassignments (``adding_replicas``,
        ``removing_replicas``) are not modelled: the replicas listed under ``partitions`` count."""
        path = cls.path(topic)
        obj = _loads(path, data)
        raw_id = obj.get("topic_id")
        try:
            topic_id = decode_uuid(raw_id) if isinstance(raw_id, str) else None
        except ValueError as error:
            raise ZNodeDecodeError(f"{path}: bad topic_id: {error}") from error
        partitions = obj.get("partitions") or {}
        if not isinstance(partitions, dict):
            raise ZNodeDecodeError(f"{path}: 'partitions' is not an object")
        assignment: dict[int, tuple[int, ...]] = {}
        for key, replicas in partitions.items():
            if not str(key).isdigit() or not isinstance(replicas, list):
                raise ZNodeDecodeError(f"{path}: bad partition entry {key!r}: {replicas!r}")
            if not all(isinstance(r, int) and not isinstance(r, bool) for r in replicas):
                raise ZNodeDecodeError(f"{path}: bad replica list for partition {key}: {replicas!r}")
            assignment[int(key)] = tuple(replicas)
        return topic_id, dict(sorted(assignment.items()))


class TopicPartitionsZNode:
    """``/brokers/topics/<topic>/partitions``."""

    @staticmethod
    def path(topic: str) -> str:
        return f"{TopicZNode.path(topic)}/partitions"


class TopicPartitionZNode:
    """``/brokers/topics/<topic>/partitions/<partition>``."""

    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"{TopicPartitionsZNode.path(topic)}/{partition}"


class TopicPartitionStateZNode:
    """``/brokers/topics/<topic>/partitions/<partition>/state``: leader, leader epoch, ISR and the
    writing controller's epoch. The partition epoch is not in the data: it is the znode's version
    (Kafka's ``LeaderAndIsr.partitionEpoch`` is that zkVersion in ZooKeeper mode)."""

    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"{TopicPartitionZNode.path(topic, partition)}/state"

    @staticmethod
    def encode(state: PartitionState) -> bytes:
        obj: dict[str, Any] = {
            "version": 1,
            "leader": state.leader,
            "leader_epoch": state.leader_epoch,
            "isr": list(state.isr),
            "controller_epoch": state.controller_epoch,
        }
        if state.elr:  # kctl's own field (KIP-966), only when there are eligible leader replicas
            obj["eligible_leader_replicas"] = list(state.elr)
        return _dumps(obj)

    @classmethod
    def decode(cls, topic: str, partition: int, data: bytes | None, zk_version: int) -> PartitionState:
        path = cls.path(topic, partition)
        obj = _loads(path, data)
        isr = _field(path, obj, "isr", list)
        if not all(isinstance(r, int) and not isinstance(r, bool) for r in isr):
            raise ZNodeDecodeError(f"{path}: bad isr {isr!r}")
        elr = obj.get("eligible_leader_replicas", [])
        if not isinstance(elr, list) or not all(isinstance(r, int) and not isinstance(r, bool) for r in elr):
            raise ZNodeDecodeError(f"{path}: bad eligible_leader_replicas {elr!r}")
        return PartitionState(
            leader=_field(path, obj, "leader", int),
            leader_epoch=_field(path, obj, "leader_epoch", int),
            isr=tuple(isr),
            controller_epoch=_field(path, obj, "controller_epoch", int),
            partition_epoch=zk_version,
            elr=tuple(elr),
        )


# -- configs --------------------------------------------------------------------------------------
class ConfigEntityTypeZNode:
    """``/config/<entity type>``: the parent of one type's entities (topics, brokers, users,
    clients)."""

    @staticmethod
    def path(entity_type: str) -> str:
        return f"/config/{entity_type}"


class ConfigEntityZNode:
    """``/config/<entity type>/<entity name>``: an entity's config overrides, e.g.
    ``/config/topics/<topic>``. A user's znode holds its SCRAM credentials and its client quotas
    (kctl.zk.security_store, kctl.zk.quota_store); a user's client id is the entity
    ``<user>/clients/<client id>`` of type ``users``."""

    TOPICS = "topics"
    BROKERS = "brokers"
    USERS = "users"
    CLIENTS = "clients"
    #: The entity name of the cluster-wide default broker configs (``/config/brokers/<default>``).
    DEFAULT_BROKER = "<default>"

    @staticmethod
    def path(entity_type: str, entity_name: str) -> str:
        return f"{ConfigEntityTypeZNode.path(entity_type)}/{entity_name}"

    @staticmethod
    def encode(configs: Mapping[str, str]) -> bytes:
        return _dumps({"version": 1, "config": {str(k): str(v) for k, v in configs.items()}})

    @staticmethod
    def decode(entity_type: str, entity_name: str, data: bytes | None) -> dict[str, str]:
        """The overrides; no data or no ``config`` object means none (as Kafka reads it)."""
        if not data:
            return {}
        obj = _loads(ConfigEntityZNode.path(entity_type, entity_name), data)
        config = obj.get("config")
        if not isinstance(config, dict):
            return {}
        return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}


class ConfigEntityChangeNotificationZNode:
    """``/config/changes``: the parent of config change notifications."""

    path = "/config/changes"


class ConfigEntityChangeNotificationSequenceZNode:
    """``/config/changes/config_change_<seq>`` (persistent sequential): "the configs of this entity
    changed, re-read them". Brokers delete notifications older than 15 minutes."""

    PREFIX = "config_change_"
    create_path = f"{ConfigEntityChangeNotificationZNode.path}/{PREFIX}"
    EXPIRATION_MS = 15 * 60 * 1000

    @staticmethod
    def encode(entity_type: str, entity_name: str) -> bytes:
        return _dumps({"version": 2, "entity_path": f"{entity_type}/{entity_name}"})

    @staticmethod
    def decode(data: bytes | None) -> tuple[str, str]:
        """(entity type, entity name) of a version 2 notification."""
        obj = _loads(ConfigEntityChangeNotificationZNode.path, data)
        entity_path = _field(ConfigEntityChangeNotificationZNode.path, obj, "entity_path", str)
        entity_type, _, entity_name = entity_path.partition("/")
        return entity_type, entity_name

    @classmethod
    def sequence_number(cls, child_name: str) -> int | None:
        """The sequence number in a child's name, or None when it is not a notification."""
        if not child_name.startswith(cls.PREFIX):
            return None
        digits = child_name[len(cls.PREFIX) :]
        return int(digits) if digits.isdigit() else None


# -- admin ----------------------------------------------------------------------------------------
class DeleteTopicsZNode:
    """``/admin/delete_topics``: topics marked for deletion (by Kafka's admin tools)."""

    path = "/admin/delete_topics"


class DeleteTopicsTopicZNode:
    """``/admin/delete_topics/<topic>``: a deletion marker (no data)."""

    @staticmethod
    def path(topic: str) -> str:
        return f"{DeleteTopicsZNode.path}/{topic}"


def _partition_list(path: str, data: bytes | None, with_replicas: bool) -> list[dict[str, Any]]:
    """The ``partitions`` entries of an admin znode; none when the znode has no data or no list
    (what a request without partitions looks like to the tools that write them)."""
    if not data:
        return []
    obj = _loads(path, data)
    entries = obj.get("partitions", [])
    if not isinstance(entries, list):
        raise ZNodeDecodeError(f"{path}: field 'partitions' has the wrong type: {entries!r}")
    out = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise ZNodeDecodeError(f"{path}: bad entry {entry!r}")
        _field(path, entry, "topic", str)
        _field(path, entry, "partition", int)
        if with_replicas:
            replicas = _field(path, entry, "replicas", list)
            if not all(isinstance(r, int) and not isinstance(r, bool) for r in replicas):
                raise ZNodeDecodeError(f"{path}: bad replicas {replicas!r}")
        out.append(entry)
    return out


def _partitions(partitions: Iterable[tuple[str, int]]) -> list[dict[str, Any]]:
    return [{"topic": t, "partition": p} for t, p in sorted(set(partitions))]


class ReassignPartitionsZNode:
    """``/admin/reassign_partitions``: partition reassignments the controller is asked to carry out
    (Kafka's format; the controller removes each entry when its reassignment completes, and the
    znode when none is left)."""

    path = "/admin/reassign_partitions"

    @staticmethod
    def encode(requests: Mapping[tuple[str, int], Iterable[int]]) -> bytes:
        return _dumps(
            {
                "version": 1,
                "partitions": [
                    {"topic": t, "partition": p, "replicas": [int(r) for r in replicas]}
                    for (t, p), replicas in sorted(requests.items())
                ],
            }
        )

    @classmethod
    def decode(cls, data: bytes | None) -> dict[tuple[str, int], tuple[int, ...]]:
        """(topic, partition) -> target replicas; {} for no data."""
        return {
            (e["topic"], e["partition"]): tuple(e["replicas"])
            for e in _partition_list(cls.path, data, with_replicas=True)
        }


class PreferredReplicaElectionZNode:
    """``/admin/preferred_replica_election``: partitions whose leadership should move to their
    preferred (first) replica (Kafka's format; deleted by the controller once handled). A znode
    without partitions asks for every partition."""

    path = "/admin/preferred_replica_election"

    @staticmethod
    def encode(partitions: Iterable[tuple[str, int]]) -> bytes:
        return _dumps({"version": 1, "partitions": _partitions(partitions)})

    @classmethod
    def decode(cls, data: bytes | None) -> set[tuple[str, int]]:
        return {(e["topic"], e["partition"]) for e in _partition_list(cls.path, data, with_replicas=False)}


class ElectLeadersZNode:
    """``/kctl/elect_leaders`` (kctl's own): partitions ElectLeaders asked to elect uncleanly, whatever
    their topic's ``unclean.leader.election.enable`` says (Kafka's controller took those over an
    RPC; it has no znode). ``election_type`` is "unclean" ("preferred" is read too, for the same
    request). The controller removes the partitions it handled, and the znode when none is left."""

    path = "/kctl/elect_leaders"
    ELECTION_TYPE = "unclean"
    ELECTION_TYPES = ("preferred", "unclean")

    @classmethod
    def encode(cls, partitions: Iterable[tuple[str, int]]) -> bytes:
        document = {"version": 1, "election_type": cls.ELECTION_TYPE, "partitions": _partitions(partitions)}
        return _dumps(document)

    @classmethod
    def decode(cls, data: bytes | None) -> set[tuple[str, int]]:
        if data:
            election_type = _loads(cls.path, data).get("election_type", "preferred")
            if election_type not in cls.ELECTION_TYPES:
                raise ZNodeDecodeError(f"{cls.path}: unknown election_type {election_type!r}")
        return {(e["topic"], e["partition"]) for e in _partition_list(cls.path, data, with_replicas=False)}


class ControlledShutdownZNode:
    """``/kctl/controlled_shutdown``: kctl's parent of controlled shutdown requests (Kafka sends a
    ControlledShutdown RPC instead; kctl brokers talk to the controller only through ZooKeeper)."""

    path = "/kctl/controlled_shutdown"


class ControlledShutdownBrokerZNode:
    """``/kctl/controlled_shutdown/<broker id>`` (ephemeral, owned by the shutting-down broker):
    ``state`` is "requested" until the controller has moved leadership off the broker and answered
    "done" with the number of partitions it still leads."""

    REQUESTED = "requested"
    DONE = "done"

    @staticmethod
    def path(broker_id: int) -> str:
        return f"{ControlledShutdownZNode.path}/{broker_id}"

    @staticmethod
    def encode(state: str, remaining_partitions: int = -1) -> bytes:
        return _dumps({"version": 1, "state": state, "remaining_partitions": remaining_partitions})

    @classmethod
    def decode(cls, broker_id: int, data: bytes | None) -> tuple[str, int]:
        path = cls.path(broker_id)
        obj = _loads(path, data)
        return _field(path, obj, "state", str), int(obj.get("remaining_partitions", -1))


class UncleanRestartZNode:
    """``/kctl/unclean_restart``: kctl's parent of unclean restart announcements."""

    path = "/kctl/unclean_restart"


class UncleanRestartBrokerZNode:
    """``/kctl/unclean_restart/<broker id>`` (ephemeral, owned by the restarted broker; empty): the
    broker shut down uncleanly and may have lost what it had not fsynced. The controller takes it out
    of every ISR, then deletes the znode; the broker takes its roles only then."""

    @staticmethod
    def path(broker_id: int) -> str:
        return f"{UncleanRestartZNode.path}/{broker_id}"


class LogDirEventNotificationZNode:
    """``/log_dir_event_notification``: Kafka's parent of log dir event notifications (KIP-112)."""

    path = "/log_dir_event_notification"


class LogDirEventNotificationSequenceZNode:
    """``/log_dir_event_notification/log_dir_event_<seq>`` (persistent sequential), as Kafka's
    brokers write it when a log dir fails: ``{"version":1,"broker":<id>,"event":1}`` (1: the log dir
    failed). The controller handles it and deletes it."""

    PREFIX = "log_dir_event_"
    LOG_DIR_FAILURE = 1

    @classmethod
    def create_path(cls) -> str:
        return f"{LogDirEventNotificationZNode.path}/{cls.PREFIX}"

    @classmethod
    def encode(cls, broker_id: int) -> bytes:
        return _dumps({"version": 1, "broker": broker_id, "event": cls.LOG_DIR_FAILURE})

    @classmethod
    def decode(cls, name: str, data: bytes | None) -> int:
        """The broker the event is about."""
        path = f"{LogDirEventNotificationZNode.path}/{name}"
        return int(_field(path, _loads(path, data), "broker", int))


class OfflineReplicasZNode:
    """``/kctl/offline_replicas``: kctl's parent of the offline replica lists of brokers."""

    path = "/kctl/offline_replicas"


class OfflineReplicasBrokerZNode:
    """``/kctl/offline_replicas/<broker id>`` (ephemeral, owned by the broker; kctl's own): every
    replica of the broker whose log dir failed. Kafka's controller learns them from the broker's
    LeaderAndIsr answers; kctl's reads them here. Gone with the broker's session: a restarted
    broker opens its dirs again."""

    @staticmethod
    def path(broker_id: int) -> str:
        return f"{OfflineReplicasZNode.path}/{broker_id}"

    @staticmethod
    def encode(partitions: Iterable[tuple[str, int]]) -> bytes:
        return _dumps({"version": 1, "partitions": _partitions(partitions)})

    @classmethod
    def decode(cls, broker_id: int, data: bytes | None) -> set[tuple[str, int]]:
        entries = _partition_list(cls.path(broker_id), data, with_replicas=False)
        return {(e["topic"], e["partition"]) for e in entries}


class UnreachableLeadersZNode:
    """``/kctl/unreachable_leaders``: kctl's parent of the followers' reports of leaders they cannot
    reach."""

    path = "/kctl/unreachable_leaders"


class UnreachableLeaderZNode:
    """``/kctl/unreachable_leaders/<follower id>-<leader id>`` (ephemeral, owned by the follower;
    empty): the follower has had no answer from that leader for ``replica.lag.time.max.ms`` while it
    had partitions to fetch there. The controller moves a partition's leadership to a reporting ISR
    (or ELR) member once a majority of the partition's replicas report its leader (kctl's own: a
    leader cut from its followers while it keeps its ZooKeeper session)."""

    @staticmethod
    def path(follower_id: int, leader_id: int) -> str:
        return f"{UnreachableLeadersZNode.path}/{follower_id}-{leader_id}"

    @staticmethod
    def parse(child: str) -> tuple[int, int] | None:
        """(follower id, leader id) of a child's name; None for a name kctl did not write."""
        follower, dash, leader = child.partition("-")
        if not dash or not follower.isdigit() or not leader.isdigit():
            return None
        return int(follower), int(leader)


PERSISTENT_PATHS: tuple[str, ...] = (
    BrokerIdsZNode.path,
    TopicsZNode.path,
    f"/config/{ConfigEntityZNode.TOPICS}",
    ConfigEntityChangeNotificationZNode.path,
    DeleteTopicsZNode.path,
    ControlledShutdownZNode.path,
    UncleanRestartZNode.path,
    LogDirEventNotificationZNode.path,
    OfflineReplicasZNode.path,
    UnreachableLeadersZNode.path,
)
"""The parents a registry creates at start, as Kafka's brokers do (``KafkaZkClient.createTopLevelPaths``)."""
