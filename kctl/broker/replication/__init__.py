"""Replication between brokers: the inter-broker client (``channel``) and the replica fetcher a
follower copies its leaders' logs with (``fetcher``). The leader's side — follower state, ISR, high
watermark — lives in ``kctl.broker.partition`` and ``kctl.broker.replica_manager``."""
