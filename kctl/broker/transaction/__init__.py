"""The transaction coordinator (KIP-98): transactional ids hashed to partitions of
``__transaction_state``, their state machine and its records, the markers that end a transaction on
its partitions, and the periodic abort of timed-out transactions (docs/architecture.md, section 6d)."""
