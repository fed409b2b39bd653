#!/usr/bin/env python3
"""Benchmark of the wire-protocol codec (kctl.protocol) on the broker's two hot paths.

Prints, does not assert:

* decode of a Produce v9 request frame carrying one 1 MiB and one 16 KiB records blob (header + body;
  records come out as zero-copy memoryviews, so this is the per-request overhead, independent of
  the blob sizes) — requests/s, and the MB/s of frame bytes that rate amounts to; and, separately,
  ``FrameReceiver`` reassembling that frame from 64 KiB socket reads (the one copy a request costs);
* encode of a Fetch v12 response with 10 partitions: ``encode_response_chunks`` with file-region
  records (what the broker hands to sendfile), and ``encode_response`` to bytes with 4 KiB records;
* decode of ``__consumer_offsets`` records as the group coordinator loads them (key + value of
  offset commits; group metadata values with 10 members) — versioned data messages, same codec;
* for reference in the same run, kafka-python 3.x doing the same decode and encode, when installed.

Usage: python bench/bench_protocol.py [--seconds 1.0]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import kctl.protocol as kp
from kctl.broker.group import records
from kctl.protocol.messages.fetch import FetchableTopicResponse, FetchResponse, PartitionData
from kctl.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData


@dataclass
class Region:
    """Stand-in for the broker's file region: what sendfile will send."""

    fd: int
    offset: int
    size: int


def rate(fn: Callable[[], Any], seconds: float) -> float:
    """Calls per second of ``fn`` over about ``seconds`` (after a warm-up)."""
    for _ in range(50):
        fn()
    n = 0
    batch = 100
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(batch):
            fn()
        n += batch
        now = time.perf_counter()
        if now >= deadline:
            return n / (now - start)


def produce_frame() -> bytes:
    big, small = os.urandom(1 << 20), os.urandom(16 << 10)
    request = ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            TopicProduceData("events", [PartitionProduceData(0, big), PartitionProduceData(1, small)]),
        ],
    )
    return kp.encode_request(kp.RequestHeader(0, 9, 1, "bench-producer"), request)[4:]


def fetch_response(records: list[Any]) -> FetchResponse:
    return FetchResponse(
        throttle_time_ms=0,
        error_code=0,
        session_id=0,
        responses=[
            FetchableTopicResponse(
                topic="events",
                partitions=[
                    PartitionData(
                        partition_index=i,
                        error_code=0,
                        high_watermark=1_000_000 + i,
                        last_stable_offset=1_000_000 + i,
                        log_start_offset=0,
                        aborted_transactions=None,
                        records=r,
                    )
                    for i, r in enumerate(records)
                ],
            )
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="time per measurement")
    args = parser.parse_args()
    s = args.seconds

    frame = produce_frame()
    frame_mb = len(frame) / 1e6
    header = kp.RequestHeader(1, 12, 7, "bench-consumer")
    regions = fetch_response([Region(3, i * 65536, 65536) for i in range(10)])
    blobs = fetch_response([os.urandom(4096) for _ in range(10)])

    print(f"kctl.protocol ({time.strftime('%Y-%m-%d %H:%M')}, {s:.1f}s per figure)")
    r = rate(lambda: kp.decode_request(frame), s)
    print(f"  Produce v9 request decode, 1 MiB + 16 KiB records : {r:>10,.0f} req/s", end="")
    print(f"  ({r * frame_mb:,.0f} MB/s of frames, zero-copy)")
    framed = kp.frame(frame)
    pieces = [framed[i : i + 65536] for i in range(0, len(framed), 65536)]

    def reassemble() -> None:
        reader = kp.FrameReceiver()
        for piece in pieces:
            reader.feed(piece)

    r = rate(reassemble, s)
    print(f"  FrameReceiver, same request fed in 64 KiB reads    : {r:>10,.0f} req/s", end="")
    print(f"  ({r * frame_mb:,.0f} MB/s, one copy)")
    r = rate(lambda: kp.parse_request_header(frame), s)
    print(f"  request header parse only                          : {r:>10,.0f} req/s")
    r = rate(lambda: kp.encode_response_chunks(header, regions), s)
    print(
        f"  Fetch v12 response encode, 10 partitions, regions  : {r:>10,.0f} resp/s  (encode_response_chunks)"
    )
    r = rate(lambda: kp.encode_response(header, blobs), s)
    print(f"  Fetch v12 response encode, 10 x 4 KiB bytes        : {r:>10,.0f} resp/s  (encode_response)")
    r = rate(lambda: kp.encode_response(header, fetch_response([b""] * 10)), s)
    print(
        f"  Fetch v12 response build+encode, 10 empty partitions: {r:>9,.0f} resp/s  (incl. building objects)"
    )

    offset_records = [
        (
            records.encode_offset_key(records.OffsetKey(f"group-{i % 50}", f"topic-{i % 20}", i % 64)),
            records.encode_offset_value(records.OffsetValue(i * 7, 3, "", 1_700_000_000_000 + i)),
        )
        for i in range(1000)
    ]

    def load_offsets() -> None:
        for key, value in offset_records:
            records.decode_key(key)
            records.decode_offset_value(value)

    r = rate(load_offsets, s) * len(offset_records)
    print(f"  __consumer_offsets offset commit key+value decode  : {r:>10,.0f} records/s")
    members = [
        records.MemberValue(f"m-{j}", None, "client", "/10.0.0.1", 300_000, 45_000, b"s" * 60, b"a" * 40)
        for j in range(10)
    ]
    group = records.encode_group_value(records.GroupValue("consumer", 5, "range", "m-0", 0, members))
    r = rate(lambda: records.decode_group_value(group), s)
    print(f"  __consumer_offsets group value decode, 10 members  : {r:>10,.0f} records/s")

    try:
        from kafka.protocol.consumer import FetchResponse as KPFetchResponse
        from kafka.protocol.producer import ProduceRequest as KPProduceRequest
    except ImportError:
        print("kafka-python not installed: no peer reference")
        return
    print("kafka-python 3.x, same messages (peer reference)")
    r = rate(lambda: KPProduceRequest.decode(frame, version=9, header=True), s)
    print(f"  Produce v9 request decode, 1 MiB + 16 KiB records : {r:>10,.0f} req/s")
    kp_fetch = KPFetchResponse.decode(kp.encode_response(header, blobs)[4:], version=12, header=True)
    kp_fetch._header = None
    r = rate(lambda: kp_fetch.encode(version=12), s)
    print(f"  Fetch v12 response encode, 10 x 4 KiB bytes        : {r:>10,.0f} resp/s")


if __name__ == "__main__":
    main()
