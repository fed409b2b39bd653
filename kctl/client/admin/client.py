"""The admin client: topics, partitions, configs, offsets, records and the cluster, over Kafka's admin APIs.

::

    with AdminClient("127.0.0.1:9092") as admin:
        results = admin.create_topics([NewTopic("orders", 6, 1, {"retention.ms": "86400000"})])
        raise_for_errors(results)                       # or look at each result's .error
        [orders] = admin.describe_topics(["orders"])
        offsets = admin.list_offsets([TopicPartition("orders", 0)], "latest")

Where an operation names several topics or partitions, each gets its own result carrying Kafka's
error name and the broker's message (``error``, ``error_code``, ``error_message``), so a caller can
report partial failures; ``raise_for_errors`` turns the first failure into an exception.

Routing follows Kafka's admin client: CreateTopics, DeleteTopics and CreatePartitions go to the
controller, and so do ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments;
ListOffsets and DeleteRecords to each partition's leader (one pipelined request per
leader); the rest to any broker. Retriable failures (NOT_CONTROLLER, NOT_LEADER_OR_FOLLOWER,
LEADER_NOT_AVAILABLE, lost connections, ...) are retried for the items they concern, with backoff,
until the operation's deadline (``timeout`` seconds, default ``default.api.timeout.ms``).
"""

from __future__ import annotations

from kctl.client.admin.cluster import ClusterAdmin
from kctl.client.admin.configs import ConfigAdmin
from kctl.client.admin.log_dirs import LogDirAdmin
from kctl.client.admin.quotas import QuotaAdmin
from kctl.client.admin.reassignments import ReassignmentAdmin
from kctl.client.admin.records import RecordAdmin
from kctl.client.admin.security import SecurityAdmin
from kctl.client.admin.topics import TopicAdmin
from kctl.client.admin.transactions import TransactionAdmin


class AdminClient(
    TopicAdmin,
    ConfigAdmin,
    RecordAdmin,
    ClusterAdmin,
    ReassignmentAdmin,
    SecurityAdmin,
    QuotaAdmin,
    TransactionAdmin,
    LogDirAdmin,
):
    """Kafka's admin operations. ``bootstrap_servers`` may also be an existing ``ClusterClient``
    (shared, then not closed by ``close``). ``config``/``overrides`` as for ``ClusterClient``.

    The operations live by subject beside this module: ``topics``, ``configs``, ``records``
    (offsets, delete records), ``cluster``, ``reassignments`` (leader elections, reassignments) and
    ``security`` (ACLs, SCRAM users);
    ``base`` holds the connection and the retry engine
    they share."""
