"""The Spark pipeline: a PySpark data source for kctl topics (format ``kctl``: batch and streaming,
read and write, with the options and rows of Spark's Kafka source) and the warehouse load behind
``kctl spark load``. Installed with ``pip install 'kctl[spark]'`` (PySpark 4.2 or later, PyArrow).

    from kctl.spark import register
    register(spark)      # then spark.read.format("kctl"), spark.readStream.format("kctl"), df.write...

Modules: ``options`` (the Kafka-source option names, parsed without Spark), ``planning`` (partitions,
offsets and task ranges, with ``kctl.client``), ``reading`` / ``writing`` (one task's consumer or
producer), ``source`` (the Data Source API classes), ``session`` (a SparkSession for kctl's own
jobs) and ``load`` (the exactly-once load into Parquet).

``kctl.spark.options``, ``planning``, ``reading`` and ``writing`` import no pyspark; ``register``
imports it when called.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(spark: Any) -> None:
    """Register the ``kctl`` format with ``spark`` (a SparkSession): needed once per session."""
    from kctl.spark.source import KctlDataSource

    spark.dataSource.register(KctlDataSource)
