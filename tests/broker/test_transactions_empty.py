"""DescribeTransactions / ListTransactions (issue 16 §2) on a broker without transactions: the list is
empty (unknown state filters reported back, as Kafka does), every transactional id is
TRANSACTIONAL_ID_NOT_FOUND, and `kctl transactions list` prints only its header and exits 0."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from cli_support import kctl

from kctl.client import AdminClient
from kctl.protocol import ApiKey
from kctl.protocol.errors import ErrorCode
from kctl.protocol.messages.transactions import ListTransactionsRequest

if TYPE_CHECKING:
    from kctl.testing import BrokerProcess


@pytest.fixture(scope="module")
def txn_broker(module_broker_factory: Any) -> BrokerProcess:
    broker: BrokerProcess = module_broker_factory()
    return broker


def test_admin_lists_and_describes_nothing(txn_broker: BrokerProcess) -> None:
    with AdminClient(txn_broker.bootstrap) as admin:
        assert admin.list_transactions() == []
        assert admin.list_transactions(states=["Ongoing"], producer_ids=[1]) == []
        [described] = admin.describe_transactions(["orders-txn"])
        assert (described.transactional_id, described.error_code) == (
            "orders-txn",
            ErrorCode.TRANSACTIONAL_ID_NOT_FOUND,
        )
        conn = admin.cluster.any_connection()
        r = conn.request(
            ApiKey.LIST_TRANSACTIONS,
            ListTransactionsRequest(state_filters=["Ongoing", "Bogus"], producer_id_filters=[]),
        )
        assert (r.error_code, r.unknown_state_filters, r.transaction_states) == (0, ["Bogus"], [])


def test_kctl_transactions_list_prints_the_header_only(txn_broker: BrokerProcess) -> None:
    b = txn_broker.bootstrap
    table = kctl("transactions", "list", "-b", b)
    assert table.returncode == 0, table.stderr
    assert table.stdout.split() == ["TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "STATE"]
    as_json = kctl("transactions", "list", "-b", b, "-f", "json")
    assert (as_json.returncode, json.loads(as_json.stdout)) == (0, [])
    as_jsonl = kctl("transactions", "list", "-b", b, "-f", "jsonl", "--state", "Ongoing")
    assert (as_jsonl.returncode, as_jsonl.stdout) == (0, "")
    described = kctl("transactions", "describe", "--transactional-id", "t1", "-b", b, "-f", "json")
    assert described.returncode == 3
    assert json.loads(described.stdout)[0]["error"] == "TRANSACTIONAL_ID_NOT_FOUND"
