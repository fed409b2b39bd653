"""Coordination: the ZooKeeper registry (kazoo) and the embedded single-node registry."""
