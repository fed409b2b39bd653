"""The whole machine: ``kctl broker start --processes N`` runs N broker processes on one host from one
configuration, and this supervisor starts them, restarts one that dies, and stops them all.

A kctl broker is one Python process and so uses one core; N processes sharing one ZooKeeper use N.
Child ``i`` (0 ≤ i < N) gets its configuration from the operator's by this rule (`child_properties`):

- ``broker.id``: the configured id plus ``i`` (ids base..base+N-1);
- every port of ``listeners`` and ``advertised.listeners``, and the port of ``metrics.listener``:
  the configured port plus ``i`` (port 0 stays 0: the kernel picks one per child, kept on restart);
- every directory of ``log.dirs``: ``<dir>/broker-<id>`` (absolute);
- ``broker.rack``: the host name, unless the operator set a rack, so that rack-aware placement
  (kctl.broker.controller.placement) never puts two replicas of a partition on one host while
  another host has a broker;
- everything else as given.

Each child is a `BrokerProcess` (the one ``kctl cluster up`` and the tests use), its stderr appended
to ``<its first log dir>/kctl-broker.log``. The supervisor prints the children's bootstrap addresses
on one stdout line once all of them listen. A child that exits while the supervisor is not stopping
is logged and started again after a backoff (1 s, doubling up to 30 s, back to 1 s once a child ran
for a minute), for as long as the supervisor runs, as a service manager would. SIGTERM or SIGINT
stops every child at once (each does its own controlled shutdown: stopping them one after another
would only multiply the time by N, and the leaders they hand over to are on other hosts anyway); the
supervisor waits for them (SIGKILL after `STOP_TIMEOUT` each) and exits 0 when every child exited
cleanly, 1 otherwise.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from kctl.localcluster.broker import STOP_TIMEOUT, BrokerProcess, BrokerStartError

__all__ = ["Supervisor", "child_properties", "process_count", "usable_cores"]

log = logging.getLogger("kctl.broker.supervisor")

DEFAULT_LISTENERS = "PLAINTEXT://127.0.0.1:9092"  # the broker's default (kctl.broker.properties.server)
POLL_S = 0.2  # how often the supervisor looks at its children
BACKOFF_MIN_S = 1.0
BACKOFF_MAX_S = 30.0
STABLE_S = 60.0  # a child up this long is healthy again: its next restart waits BACKOFF_MIN_S
CLEAN_EXITS = (0, 128 + signal.SIGTERM)  # a stopped broker; 128+15: stopped while starting
_PORT = re.compile(r"(?P<head>://[^,]*:)(?P<port>\d+)")


def usable_cores() -> int:
    """The cores this process may run on (``auto``): its CPU affinity, not the machine's count."""
    return len(os.sched_getaffinity(0))


def process_count(text: str, zookeeper_connect: str | None, daemon: bool = False) -> int:
    """The number of children ``--processes TEXT`` asks for; ValueError (its message for the
    operator) when it is not a positive number or ``auto``, without ZooKeeper, or with --daemon."""
    count = usable_cores() if text.strip().lower() == "auto" else int(text) if text.strip().isdigit() else 0
    if count < 1:
        raise ValueError(f"--processes takes a positive number or 'auto', not {text!r}")
    if not zookeeper_connect:
        raise ValueError(
            "--processes needs zookeeper.connect: the brokers of one machine share the cluster's "
            "metadata through ZooKeeper (the embedded metadata serves one broker)"
        )
    if daemon:
        raise ValueError(
            "--processes runs in the foreground (under your service manager); --daemon starts one broker"
        )
    return count


def _shift_ports(listeners: str, offset: int) -> str:
    def shift(match: re.Match[str]) -> str:
        port = int(match["port"])
        return f"{match['head']}{port + offset if port else 0}"

    return _PORT.sub(shift, listeners)


def child_properties(properties: Mapping[str, str], index: int, host: str | None = None) -> dict[str, str]:
    """The broker properties of child ``index`` derived from the operator's (see the module docstring)."""
    derived = dict(properties)
    broker_id = int(properties.get("broker.id", "0")) + index
    derived["broker.id"] = str(broker_id)
    derived["listeners"] = properties.get("listeners") or DEFAULT_LISTENERS
    for key in ("listeners", "advertised.listeners", "metrics.listener"):
        if derived.get(key):
            derived[key] = _shift_ports(derived[key], index)
    dirs = [d.strip() for d in properties.get("log.dirs", "./data").split(",") if d.strip()]
    derived["log.dirs"] = ",".join(str(Path(d).absolute() / f"broker-{broker_id}") for d in dirs)
    if not properties.get("broker.rack"):
        derived["broker.rack"] = host or socket.gethostname()
    return derived


class _Child:
    """One supervised broker: its process, its restart backoff, whether a restart is under way."""

    def __init__(self, process: BrokerProcess) -> None:
        self.process = process
        self.backoff = BACKOFF_MIN_S
        self.started_at = 0.0
        self.restarting: threading.Thread | None = None


class Supervisor:
    """N broker processes from one configuration: `run` starts them, keeps them running until
    SIGTERM/SIGINT, stops them and returns the exit status."""

    def __init__(
        self,
        properties: Mapping[str, str],
        count: int,
        *,
        cwd: Path | None = None,
        on_ready: Callable[[list[str]], None] | None = None,
    ) -> None:
        self.count = count
        self.on_ready = on_ready or (lambda addresses: print(",".join(addresses), flush=True))
        self.stopping = threading.Event()
        host = socket.gethostname()
        self.children: list[_Child] = []
        for index in range(count):
            props = child_properties(properties, index, host)
            first_dir = Path(props["log.dirs"].split(",")[0])
            process = BrokerProcess(
                first_dir, props, log_file=first_dir / "kctl-broker.log", cwd=cwd or Path.cwd()
            )
            self.children.append(_Child(process))

    def _stop_signal(self, signum: int, frame: object) -> None:
        log.info("%s: stopping %d broker(s)", signal.Signals(signum).name, self.count)
        self.stopping.set()

    def run(self) -> int:
        """Start every child, supervise them until a stop signal, stop them; the exit status."""
        previous = {s: signal.signal(s, self._stop_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            try:
                for child in self.children:
                    if self.stopping.is_set():
                        break
                    self._start(child)
            except BrokerStartError as error:
                log.error("broker %d did not start: %s", child.process.broker_id, error)
                self._stop_all()
                return 1
            if not self.stopping.is_set():
                self.on_ready([child.process.bootstrap for child in self.children])
            while not self.stopping.wait(POLL_S):
                for child in self.children:
                    if child.restarting is None and not child.process.running:
                        self._schedule_restart(child)
            return self._stop_all()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _start(self, child: _Child) -> None:
        process = child.process
        process.start()
        child.started_at = time.monotonic()
        if process.properties.get("listeners"):
            # keep the ports the kernel picked for `:0` listeners across restarts
            ports = iter(address.rpartition(":")[2] for address in process.addresses)
            process.properties["listeners"] = _PORT.sub(
                lambda m: f"{m['head']}{next(ports, m['port'])}", process.properties["listeners"]
            )

    def _schedule_restart(self, child: _Child) -> None:
        process = child.process
        code = process.process.returncode if process.process is not None else None
        if time.monotonic() - child.started_at >= STABLE_S:
            child.backoff = BACKOFF_MIN_S
        log.warning(
            "broker %d (pid %s) exited with status %s; restarting it in %gs",
            process.broker_id,
            process.pid,
            code,
            child.backoff,
        )
        thread = threading.Thread(target=self._restart, args=(child, child.backoff), daemon=True)
        child.backoff = min(child.backoff * 2, BACKOFF_MAX_S)
        child.restarting = thread
        thread.start()

    def _restart(self, child: _Child, delay: float) -> None:
        try:
            if self.stopping.wait(delay):
                return
            self._start(child)
            log.info("broker %d restarted (pid %s)", child.process.broker_id, child.process.pid)
        except BrokerStartError as error:
            log.error("broker %d did not restart: %s", child.process.broker_id, error)
        finally:
            child.restarting = None

    def _stop_all(self) -> int:
        """SIGTERM to every running child at once (once: a second SIGTERM reaching a broker after its
        own handler is gone would kill it), then wait for each; 0 when all exited cleanly, a child
        stopped during its start (status 128+SIGTERM) included."""
        for child in self.children:
            if child.process.running and child.process.process is not None:
                child.process.process.send_signal(signal.SIGCONT)
                child.process.process.send_signal(signal.SIGTERM)
        status = 0
        for child in self.children:
            restarting = child.restarting
            if restarting is not None:
                restarting.join(STOP_TIMEOUT)
            popen = child.process.process
            if popen is None:
                continue
            code: int | None
            try:
                code = popen.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                log.error(
                    "broker %d did not stop within %gs: killing it", child.process.broker_id, STOP_TIMEOUT
                )
                code = child.process.kill()
            child.process.stop()  # closes its pipe (it has exited)
            if code not in CLEAN_EXITS:
                log.error("broker %d exited with status %s", child.process.broker_id, code)
                status = 1
        return status
