"""Record batches (RecordBatch v2, magic 2, CRC-32C) and compression codecs.

Shared by the log, the protocol layer and the clients. ``header`` holds the header-only operations
used on the broker's hot path; the record codec encodes and decodes individual records.
"""

from kctl.records.builder import RecordBatchBuilder, encode_batch
from kctl.records.compression import CompressionType, DecompressionError, compress, decompress
from kctl.records.header import BatchHeader, InvalidRecordBatch
from kctl.records.reader import decode_batch, iter_batches
from kctl.records.record import ControlRecord, ControlRecordType, DecodedBatch, Record

__all__ = [
    "BatchHeader",
    "CompressionType",
    "ControlRecord",
    "ControlRecordType",
    "DecodedBatch",
    "DecompressionError",
    "InvalidRecordBatch",
    "Record",
    "RecordBatchBuilder",
    "compress",
    "decode_batch",
    "decompress",
    "encode_batch",
    "iter_batches",
]
