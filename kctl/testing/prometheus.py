"""A real Prometheus server (Debian's ``prometheus`` package) scraping brokers' ``/metrics``, for
tests that check what an operator's Prometheus sees, through its HTTP query API.

    with PrometheusServer(tmp_path / "prometheus", {1: url1, 2: url2, 3: url3}) as prometheus:
        prometheus.wait_for_targets(3)
        prometheus.value('sum(kafka_controller_kafkacontroller_activecontrollercount)')   # 1.0

The server listens on 127.0.0.1 and a free port, keeps its TSDB under its directory, scrapes every
``scrape_interval`` (1 s by default: tests wait seconds, not minutes), labels each target with its
``broker`` id, and loads ``rule_files`` (alert rules are then checked by the server at start).
A broker's target stays the same across restarts (kctl.localcluster.BrokerProcess keeps its metrics
port), so a killed broker is a target down, and its series go stale at the next failed scrape.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from kctl.localcluster import free_port
from kctl.testing.helpers import wait_for

PROMETHEUS = "prometheus"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0

__all__ = ["PrometheusServer", "PrometheusUnavailableError", "prometheus_binary"]


class PrometheusUnavailableError(RuntimeError):
    """No ``prometheus`` binary on this machine (scripts/install-system-deps.sh installs it)."""


def prometheus_binary() -> str:
    path = shutil.which(PROMETHEUS)
    if path is None:
        raise PrometheusUnavailableError(
            "prometheus is not installed: run scripts/install-system-deps.sh (Debian's prometheus package)"
        )
    return path


class PrometheusServer:
    """One Prometheus process scraping ``targets`` (broker id -> http://HOST:PORT/metrics)."""

    def __init__(
        self,
        directory: Path,
        targets: Mapping[int, str],
        *,
        scrape_interval: str = "1s",
        rule_files: Sequence[Path] = (),
    ) -> None:
        self.directory = Path(directory)
        self.targets = dict(targets)
        self.scrape_interval = scrape_interval
        self.rule_files = [Path(p).resolve() for p in rule_files]
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.log_file = self.directory / "prometheus.log"

    def __enter__(self) -> PrometheusServer:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def config(self) -> str:
        """prometheus.yml: one static target per broker, labelled with its id."""
        static = []
        for broker_id, metrics_url in sorted(self.targets.items()):
            parts = urllib.parse.urlsplit(metrics_url)
            static.append({"targets": [parts.netloc], "labels": {"broker": str(broker_id)}})
        document = {
            "global": {"scrape_interval": self.scrape_interval, "evaluation_interval": self.scrape_interval},
            "rule_files": [str(p) for p in self.rule_files],
            "scrape_configs": [
                {
                    "job_name": "kctl",
                    "metrics_path": "/metrics",
                    "scrape_timeout": self.scrape_interval,
                    "static_configs": static,
                }
            ],
        }
        return json.dumps(document, indent=2) + "\n"  # JSON is YAML

    def start(self) -> PrometheusServer:
        binary = prometheus_binary()
        self.directory.mkdir(parents=True, exist_ok=True)
        config = self.directory / "prometheus.yml"
        config.write_text(self.config())
        self.port = free_port()
        argv = [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={self.directory / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--web.enable-lifecycle",
        ]
        with open(self.log_file, "ab") as log:
            self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        try:
            wait_for(self._ready, f"Prometheus ready on {self.url}", START_TIMEOUT_S, interval=0.2,
                     describe=self.log_tail)  # fmt: skip
        except BaseException:
            self.stop()
            raise
        return self

    def _ready(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise RuntimeError(f"prometheus exited with status {self.process.returncode}\n{self.log_tail()}")
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_TIMEOUT_S)
        self.process = None

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    # -- the HTTP API ------------------------------------------------------------------------------
    def api(self, path: str, **params: str) -> Any:
        """GET /api/v1/<path>; the ``data`` of a successful answer."""
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=10) as response:
            answer = json.load(response)
        if answer.get("status") != "success":
            raise RuntimeError(f"Prometheus answered {answer}")
        return answer["data"]

    def query(self, expr: str) -> list[tuple[dict[str, str], float]]:
        """An instant query: (labels, value) of each series of the resulting vector."""
        data = self.api("query", query=expr)
        if data["resultType"] == "scalar":
            return [({}, float(data["result"][1]))]
        return [(item["metric"], float(item["value"][1])) for item in data["result"]]

    def value(self, expr: str) -> float | None:
        """The one value of ``expr`` (a sum, say); None when the result is empty."""
        result = self.query(expr)
        if not result:
            return None
        if len(result) != 1:
            raise AssertionError(f"{expr} has {len(result)} series: {result}")
        return result[0][1]

    def up_targets(self) -> set[str]:
        """The ``broker`` label of each target whose last scrape succeeded."""
        return {labels.get("broker", "") for labels, value in self.query('up{job="kctl"}') if value == 1}

    def wait_for_targets(self, count: int, timeout: float = 60.0) -> None:
        wait_for(lambda: len(self.up_targets()) == count, f"{count} targets up", timeout,
                 describe=lambda: json.dumps(self.api("targets"), indent=1)[:3000])  # fmt: skip

    def rules(self) -> list[dict[str, Any]]:
        """The rules Prometheus loaded (GET /api/v1/rules), each group's rules together."""
        return [rule for group in self.api("rules")["groups"] for rule in group["rules"]]
