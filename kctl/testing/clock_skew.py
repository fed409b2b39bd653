"""Wall-clock jumps on one broker (issue 24's clock nemesis), forward and back, while it runs.

A broker run as ``python -m kctl.testing.clock_skew broker start ...`` (`clock_skewed_broker` makes a
`BrokerProcess` do so; kctl.testing.power_loss and kctl.testing.disk_faults install it too when its
control file is set) is kctl's own broker with Python's wall clock (``time.time``, ``time.time_ns``)
shifted by the number of seconds its control file (``KCTL_CLOCK_SKEW``) holds. A thread re-reads the
file when it changes and then writes the offset it applied to ``<control>.applied``, so `jump_clock`
knows when the jump has happened. The monotonic clock (``time.monotonic``, the event loop's time)
does not move: that is what a wall-clock jump looks like to a process (NTP stepping the clock, a VM
resumed). Kafka times intervals — ISR lag, session and request timeouts, delayed operations — with a
monotonic clock, and uses the wall clock for what users read as dates: record timestamps
(LogAppendTime), time-based retention and segment rolling, offset and producer-id expiry. kctl must
do the same: a jump may change which records are old, never lose or reorder acknowledged ones, and
never shrink or grow an ISR by itself.
"""

from __future__ import annotations

import os
import runpy
import sys
import threading
import time
from pathlib import Path

from kctl.localcluster import BrokerProcess

CONTROL_ENV = "KCTL_CLOCK_SKEW"
MODULE = "kctl.testing.clock_skew"
POLL_S = 0.02
"""How often the broker's thread looks at the control file (its modification time)."""
APPLY_TIMEOUT_S = 10.0


def _applied_path(control: Path) -> Path:
    return control.with_name(control.name + ".applied")


def install(control: Path) -> None:
    """Shift this process's wall clock by the control file's seconds, now and whenever it changes."""
    real_time, real_time_ns = time.time, time.time_ns
    skew = {"s": 0.0}

    def skewed_time() -> float:
        return real_time() + skew["s"]

    def skewed_time_ns() -> int:
        return real_time_ns() + int(skew["s"] * 1e9)

    def read() -> float:
        try:
            return float(control.read_text().strip() or 0)
        except (OSError, ValueError):
            return 0.0

    def follow() -> None:
        stamp: int | None = -1
        while True:
            try:
                now = os.stat(control).st_mtime_ns
            except OSError:
                now = None
            if now != stamp:
                stamp = now
                skew["s"] = read()
                applied = _applied_path(control)
                temporary = applied.with_name(applied.name + ".tmp")
                temporary.write_text(f"{skew['s']}\n")
                os.replace(temporary, applied)
            time.sleep(POLL_S)  # the follower thread's polling interval

    skew["s"] = read()
    time.time = skewed_time
    time.time_ns = skewed_time_ns
    threading.Thread(target=follow, name="clock-skew", daemon=True).start()


def install_from_environment() -> None:
    """`install` when ``KCTL_CLOCK_SKEW`` names a control file (for the other fault wrappers)."""
    if CONTROL_ENV in os.environ:
        install(Path(os.environ[CONTROL_ENV]))


def clock_skewed_broker(broker: BrokerProcess, control: Path) -> BrokerProcess:
    """Make ``broker`` (not started) run with its wall clock driven by ``control`` (under this module,
    unless another fault wrapper runs it: those install this one too)."""
    if broker.module == "kctl":
        broker.module = MODULE
    broker.env[CONTROL_ENV] = str(control)
    control.write_text("0\n")
    return broker


def set_clock_skew(broker: BrokerProcess, seconds: float, timeout: float = APPLY_TIMEOUT_S) -> None:
    """Set ``broker``'s wall clock ``seconds`` away from the real one and wait until it has applied
    it (when it runs)."""
    control = Path(broker.env[CONTROL_ENV])
    temporary = control.with_name(control.name + ".tmp")
    temporary.write_text(f"{seconds}\n")
    os.replace(temporary, control)
    if not broker.running:
        return
    applied = _applied_path(control)
    deadline = time.monotonic() + timeout
    while True:
        try:
            if float(applied.read_text().strip()) == float(seconds):
                return
        except (OSError, ValueError):
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"broker {broker.broker_id} did not apply a clock skew of {seconds} s")
        time.sleep(POLL_S)  # polling interval, bounded by the deadline


def jump_clock(broker: BrokerProcess, seconds: float, hold_s: float) -> str:
    """A fault: ``broker``'s wall clock jumps by ``seconds`` (negative: back), stays there ``hold_s``
    seconds (the fault's length, not a wait for a condition), then jumps back to the real time."""
    set_clock_skew(broker, seconds)
    try:
        time.sleep(hold_s)
    finally:
        set_clock_skew(broker, 0)
    direction = "forward" if seconds >= 0 else "back"
    return f"clock of broker {broker.broker_id} jumped {direction} {abs(seconds):g} s for {hold_s:g} s"


def main() -> None:
    """``python -m kctl.testing.clock_skew ARGS``: ``kctl ARGS`` on the control file's wall clock."""
    install(Path(os.environ[CONTROL_ENV]))
    sys.argv[0] = "kctl"
    runpy.run_module("kctl", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
