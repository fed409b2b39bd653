"""How long the log's fsyncs take, for the broker's metrics (Kafka's LogFlushStats
LogFlushRateAndTimeMs): every segment flush (`LogSegment.flush`: the data file's fsync and its
indexes') is timed into one process-wide histogram, `LOG_FLUSHES`. A flush of a log spanning
several unflushed segments (rare: right after a roll) counts once per segment."""

from __future__ import annotations

from kctl.common.time_histogram import TimeHistogram

LOG_FLUSHES = TimeHistogram()
"""Every segment flush of this process, in seconds."""
