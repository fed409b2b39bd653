"""A real ``kctl broker start`` in a subprocess: for end-to-end tests and for benchmarks.

    broker = BrokerProcess(tmp_path / "data", {"num.partitions": "3"}).start()
    client = AdminClient(broker.bootstrap)
    broker.kill()              # SIGKILL: an unclean stop; the next start recovers the logs
    broker.restart()           # same port, same data directory
    broker.stop()              # SIGTERM: a clean stop

The broker listens on 127.0.0.1 on a port the kernel picks (``listeners=PLAINTEXT://127.0.0.1:0``,
so two brokers never race for one port) and keeps that port across restarts. ``properties`` are
broker properties passed as ``-X key=value`` and win over the defaults (``listeners``, ``log.dirs``).
``python -m kctl`` runs in ``cwd`` (default: the data directory's parent), so a checkout's kctl
is the one started when ``cwd`` is that checkout. ``start()`` waits, until a deadline and without
sleeping, for the bootstrap address the broker prints as its first stdout line (and, with
``metrics.listener`` among ``properties``, for the metrics URL it prints as its second:
``metrics_url``, whose port restarts keep); the broker's stderr goes to ``log_file`` and is quoted
when it fails to start. ``pause()``/``resume()`` send SIGSTOP/SIGCONT: a broker that is alive but
does not answer.

``detached=True`` (``kctl cluster up``): the broker runs in a session of its own and writes its
stdout to ``stdout_file`` instead of a pipe, so it outlives the process that started it; ``start()``
then waits for the address in that file.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO

from kctl.localcluster import guard

START_TIMEOUT = 30.0
STOP_TIMEOUT = 15.0


class BrokerStartError(RuntimeError):
    """The broker exited or stayed silent instead of printing its address."""


class BrokerProcess:
    """One broker subprocess; ``bootstrap`` is its HOST:PORT once started."""

    def __init__(
        self,
        data_dir: Path,
        properties: Mapping[str, str] | None = None,
        *,
        log_file: Path | None = None,
        host: str = "127.0.0.1",
        python: str = sys.executable,
        cwd: Path | None = None,
        detached: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.properties = {key: str(value) for key, value in (properties or {}).items()}
        self.host = host
        self.port = 0
        self.python = python
        self.cwd = Path(cwd) if cwd is not None else None  # None: the data directory's parent
        self.log_file = (
            Path(log_file) if log_file is not None else self.data_dir.with_name(self.data_dir.name + ".log")
        )
        self.detached = detached
        self.env = dict(env or {})  # added to this process's environment
        self.module = "kctl"  # what `python -m` runs (a fault test may wrap kctl: kctl.testing.power_loss)
        #: put before the command line, e.g. `ip netns exec NS` (kctl.testing.netns), which execs it
        self.command_prefix: list[str] = []
        self.stdout_file = self.data_dir.with_name(self.data_dir.name + ".out")
        self.process: subprocess.Popen[bytes] | None = None
        self.bootstrap = ""
        self.addresses: list[str] = []
        self.metrics_url: str | None = None  # http://HOST:PORT/metrics, with metrics.listener
        self.starts = 0

    def __repr__(self) -> str:
        state = f"pid {self.process.pid}" if self.process is not None and self.running else "stopped"
        return f"<BrokerProcess {self.bootstrap or '-'} {state} {self.data_dir}>"

    def __enter__(self) -> BrokerProcess:
        return self if self.running else self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def broker_id(self) -> int:
        return int(self.properties.get("broker.id", "0"))

    def argv(self) -> list[str]:
        props = {
            "listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "log.dirs": str(self.data_dir),
            **self.properties,
        }
        metrics = props.get("metrics.listener", "")
        if self.metrics_url and metrics.rstrip("/").endswith(":0"):
            # a restart keeps the metrics port the kernel picked at the first start, as the listener's
            # (a Prometheus scraping it keeps its target)
            props["metrics.listener"] = self.metrics_url.removesuffix("/metrics")
        args = [self.python, "-m", self.module, "broker", "start"]
        for key, value in props.items():
            args += ["-X", f"{key}={value}"]
        return args

    def start_timeout(self) -> float:
        """How long `start` waits by default: START_TIMEOUT, plus, with ZooKeeper, the longest the
        broker waits for a stale registration of its id (a previous run killed with SIGKILL: its
        session's timeout and a margin) before it listens."""
        if "zookeeper.connect" not in self.properties:
            return START_TIMEOUT
        from kctl.zk.zookeeper import DEFAULT_SESSION_TIMEOUT_MS, STALE_REGISTRATION_MARGIN_S

        session_ms = int(self.properties.get("zookeeper.session.timeout.ms", DEFAULT_SESSION_TIMEOUT_MS))
        return START_TIMEOUT + session_ms / 1000 + STALE_REGISTRATION_MARGIN_S

    def start(self, timeout: float | None = None) -> BrokerProcess:
        """Start the broker and wait for its address (at most ``timeout``, default `start_timeout`);
        raises `BrokerStartError` if it does not come up. Right after a `kill`, the broker itself
        waits for its previous run's ZooKeeper registration to expire: nothing to wait for here."""
        if timeout is None:
            timeout = self.start_timeout()
        if self.running:
            raise RuntimeError(f"{self!r} is already running")
        guard.check("e2e", "a broker process")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        with open(self.log_file, "ab") as log:
            log.write(f"---- start {self.starts}: {' '.join(self.argv())}\n".encode())
            log.flush()
            with contextlib.ExitStack() as files:
                stdout: int | IO[bytes] = subprocess.PIPE
                if self.detached:
                    stdout = files.enter_context(open(self.stdout_file, "wb"))
                self.process = subprocess.Popen(
                    [*self.command_prefix, *self.argv()],
                    stdin=subprocess.DEVNULL,
                    stdout=stdout,
                    stderr=log,
                    cwd=self.cwd or self.data_dir.parent,
                    env={**os.environ, **self.env, "PYTHONUNBUFFERED": "1"},
                    start_new_session=self.detached,
                )
        try:
            lines = self._first_lines(timeout)
        except BaseException:
            self.kill()
            raise
        line = lines[0]
        if len(lines) > 1:
            self.metrics_url = lines[1].strip()
        #: every listener's HOST:PORT, in the order of ``listeners``
        self.addresses = [a.strip().split("://", 1)[-1] for a in line.split(",") if a.strip()]
        address = line.split(",")[0].strip()
        if "://" in address:
            address = address.split("://", 1)[1]
        host, _, port = address.rpartition(":")
        self.host, self.port = host.strip("[]") or self.host, int(port)
        self.bootstrap = address
        if not self.detached:
            threading.Thread(target=self._drain, args=(self.process,), daemon=True).start()
        return self

    def _first_lines(self, timeout: float) -> list[str]:
        """The lines the broker prints once it listens: its address, then its metrics URL when
        ``metrics.listener`` is set."""
        count = 2 if self.properties.get("metrics.listener") else 1
        if self.detached:
            return self._first_lines_of_file(timeout, count)
        return self._first_lines_of_pipe(timeout, count)

    def _first_lines_of_file(self, timeout: float, count: int) -> list[str]:
        """The first ``count`` lines of ``stdout_file``, polled until the deadline (a detached broker)."""
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(OSError):
                data = self.stdout_file.read_bytes()
                if data.count(b"\n") >= count:
                    return [line.decode() for line in data.split(b"\n")[:count]]
            if self.process.poll() is not None:
                raise BrokerStartError(
                    f"the broker exited with status {self.process.returncode} before printing its "
                    f"address\n{self.log_tail()}"
                )
            if time.monotonic() >= deadline:
                raise BrokerStartError(f"no address from the broker within {timeout:g}s\n{self.log_tail()}")
            time.sleep(0.05)  # polling interval, bounded by the deadline

    def _first_lines_of_pipe(self, timeout: float, count: int) -> list[str]:
        assert self.process is not None and self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + timeout
        data = b""
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while data.count(b"\n") < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise BrokerStartError(
                        f"no address from the broker within {timeout:g}s\n{self.log_tail()}"
                    )
                if not selector.select(remaining):
                    continue
                chunk = os.read(fd, 4096)
                if not chunk:
                    code = self.process.wait(timeout=STOP_TIMEOUT)
                    raise BrokerStartError(
                        f"the broker exited with status {code} before printing its address\n{self.log_tail()}"
                    )
                data += chunk
        return [line.decode() for line in data.split(b"\n")[:count]]

    @staticmethod
    def _drain(process: subprocess.Popen[bytes]) -> None:
        """Keep reading stdout so the broker never blocks on a full pipe."""
        stream = process.stdout
        if stream is None:
            return
        try:
            while stream.read(65536):
                pass
        except (OSError, ValueError):
            pass

    def log_tail(self, lines: int = 40) -> str:
        """The last lines the broker wrote to stderr."""
        try:
            text = self.log_file.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _wait(self, timeout: float) -> int | None:
        assert self.process is not None
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(timeout=timeout)

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """SIGTERM, wait for a clean exit (SIGKILL after ``timeout``); returns the exit status."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)  # a paused broker cannot handle SIGTERM
            self.process.send_signal(signal.SIGTERM)
        code = self._wait(timeout)
        self._close_pipe()
        return code

    def kill(self) -> int | None:
        """SIGKILL: an unclean stop."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.kill()
        code = self._wait(STOP_TIMEOUT)
        self._close_pipe()
        return code

    def pause(self) -> None:
        """SIGSTOP: the process stays, its sockets stay open, nothing is answered."""
        assert self.process is not None and self.running, f"{self!r} is not running"
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after `pause()`."""
        assert self.process is not None and self.running, f"{self!r} is not running"
        self.process.send_signal(signal.SIGCONT)

    def _close_pipe(self) -> None:
        if self.process is not None and self.process.stdout is not None:
            with contextlib.suppress(OSError):
                self.process.stdout.close()

    def restart(self, *, clean: bool = True, timeout: float | None = None) -> BrokerProcess:
        """Stop (SIGTERM, or SIGKILL with ``clean=False``) and start again on the same port."""
        if clean:
            self.stop()
        else:
            self.kill()
        return self.start(timeout)

    def cpu_seconds(self) -> float:
        """The broker process's CPU time so far (user + system, from /proc), for benchmarks."""
        assert self.process is not None, f"{self!r} was never started"
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
