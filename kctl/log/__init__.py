"""Segmented log storage: segments, indexes, recovery, retention, compaction and the log manager.

Knows files only: never sockets, the wire protocol, ZooKeeper or asyncio.
"""
