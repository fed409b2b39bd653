"""A SparkSession for kctl's own jobs (``kctl spark load``, the tests, the benchmark): the master
given (``local[*]`` by default, ``spark://host:7077`` for a cluster), this Python interpreter for
the Python workers (so they find kctl and PyArrow), and the ``kctl`` format registered.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

__all__ = ["DEFAULT_MASTER", "spark_session"]

DEFAULT_MASTER = "local[*]"


def spark_session(
    master: str = DEFAULT_MASTER,
    app_name: str = "kctl",
    conf: Mapping[str, str] | None = None,
) -> Any:
    """Get or create the SparkSession (``conf``: more Spark settings), with ``kctl`` registered.

    On ``local`` masters the workers run this interpreter; on a cluster they run what the cluster's
    ``spark.pyspark.python`` (or ``PYSPARK_PYTHON``) says, which must have kctl installed too."""
    from pyspark.sql import SparkSession

    from kctl.spark import register

    builder = SparkSession.builder.master(master).appName(app_name)
    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
    }
    if master.startswith("local"):
        settings["spark.pyspark.python"] = sys.executable
        settings["spark.pyspark.driver.python"] = sys.executable
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark
