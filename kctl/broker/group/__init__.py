"""The group coordinator: consumer-group membership (the classic rebalance protocol) and committed
offsets, persisted in the compacted internal topic ``__consumer_offsets``."""
