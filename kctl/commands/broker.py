"""`kctl broker`: run a broker in the foreground or as a daemon, and stop it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from kctl.commands.errors import ExitCode, KctlError
from kctl.commands.options import ConfigFileOption, ConfigOverrideOption, load_config
from kctl.commands.output import info, warn

app = typer.Typer(help="Run and stop a kctl broker.", no_args_is_help=True)

PID_FILE_NAME = "kctl-broker.pid"
PidFileOption = Annotated[
    Path | None,
    typer.Option("--pid-file", metavar="FILE", help="Pid file (default: <first log dir>/kctl-broker.pid)."),
]


def _broker_config(config_file: Path | None, overrides: list[str] | None):
    from kctl.broker.config import BrokerConfig, BrokerConfigError

    resolved = load_config(config_file, overrides)
    try:
        config = BrokerConfig(dict(resolved))
    except BrokerConfigError as error:
        raise KctlError(f"invalid broker configuration: {error}", ExitCode.USAGE) from None
    for name in config.ignored:
        warn(f"ignoring unknown broker property {name!r}")
    return config


def _default_pid_file(config_file: Path | None, overrides: list[str] | None) -> Path:
    config = _broker_config(config_file, overrides)
    return Path(config.log_dirs[0]) / PID_FILE_NAME


def _setup_logging(level: str, log_file: Path | None) -> None:
    handler: logging.Handler = (
        logging.FileHandler(log_file) if log_file else logging.StreamHandler(sys.stderr)
    )
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("kazoo").setLevel(logging.WARNING)


async def _run(config, ready_fd: int | None) -> None:
    from kctl.broker.broker import Broker

    broker = Broker(config)
    loop = asyncio.get_running_loop()
    await broker.start()
    stopping = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    address = ",".join(broker.bootstrap_addresses)
    if ready_fd is not None:
        os.write(ready_fd, (address + "\n").encode())
        os.close(ready_fd)
    else:
        print(address, flush=True)
        info(f"broker {config.broker_id} ready on {address} (Ctrl-C or SIGTERM to stop)")
    await stopping.wait()
    logging.getLogger("kctl.broker").info("stopping: flushing logs and writing checkpoints")
    await broker.stop()


@app.command("start")
def start(
    config_file: ConfigFileOption = None,
    overrides: ConfigOverrideOption = None,
    daemon: Annotated[
        bool, typer.Option("--daemon", "-d", help="Run in the background; print the address and exit.")
    ] = False,
    pid_file: PidFileOption = None,
    log_file: Annotated[
        Path | None,
        typer.Option(
            "--log-file",
            metavar="FILE",
            help="Write the broker log here (default: stderr; with --daemon: <log dir>/kctl-broker.log).",
        ),
    ] = None,
    log_level: Annotated[str, typer.Option("--log-level", help="DEBUG, INFO, WARNING or ERROR.")] = "INFO",
) -> None:
    """Start a broker with Kafka's broker properties (server.properties and -X).

    Defaults: listeners=PLAINTEXT://127.0.0.1:9092, log.dirs=./data, embedded metadata (no ZooKeeper;
    set zookeeper.connect to use one). Prints the bootstrap address on stdout once it accepts
    connections. SIGTERM or Ctrl-C stops it cleanly (logs flushed, checkpoints written); after an unclean
    stop the next start recovers the logs."""
    config = _broker_config(config_file, overrides)
    if log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise KctlError(f"unknown log level {log_level!r}", ExitCode.USAGE)
    log_dir = Path(config.log_dirs[0])
    log_dir.mkdir(parents=True, exist_ok=True)
    pid_path = pid_file or log_dir / PID_FILE_NAME
    if daemon:
        _start_daemon(config, pid_path, log_file or log_dir / "kctl-broker.log", log_level)
        return
    _setup_logging(log_level, log_file)
    pid_path.write_text(f"{os.getpid()}\n")
    try:
        asyncio.run(_run(config, None))
    except OSError as error:
        raise KctlError(f"cannot start the broker: {error}") from None
    except Exception as error:
        if type(error).__name__ in (
            "LogDirLockedError",
            "InconsistentMetadataError",
            "BrokerIdInUseError",
            "RegistryUnavailableError",
        ):
            raise KctlError(str(error)) from None
        raise
    finally:
        with contextlib.suppress(FileNotFoundError):
            if pid_path.read_text().strip() == str(os.getpid()):
                pid_path.unlink()


def _start_daemon(config, pid_path: Path, log_file: Path, log_level: str) -> None:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the daemon
        os.close(read_fd)
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        _setup_logging(log_level, log_file)
        pid_path.write_text(f"{os.getpid()}\n")
        code = 0
        try:
            asyncio.run(_run(config, write_fd))
        except BaseException:
            logging.getLogger("kctl.broker").exception("the broker failed")
            code = 1
        finally:
            with contextlib.suppress(FileNotFoundError):
                pid_path.unlink()
        os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as ready:
        line = ready.readline().decode().strip()
    if not line:
        _, _status = os.waitpid(pid, 0)
        raise KctlError(f"the broker did not start (see {log_file})")
    print(line, flush=True)
    info(
        f"broker {config.broker_id} running in the background "
        f"(pid {pid}, log {log_file}, pid file {pid_path})"
    )


@app.command("stop")
def stop(
    config_file: ConfigFileOption = None,
    overrides: ConfigOverrideOption = None,
    pid_file: PidFileOption = None,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0, help="Seconds to wait for a clean stop.")
    ] = 60.0,
) -> None:
    """Stop a broker started with --daemon (SIGTERM, then wait for it to exit).

    Exit status 0 when it stopped, 3 when no broker is running for the pid file, 1 on timeout."""
    path = pid_file or _default_pid_file(config_file, overrides)
    try:
        pid = int(path.read_text().strip())
    except FileNotFoundError:
        raise KctlError(f"no pid file at {path}: is a broker running?", ExitCode.NOT_FOUND) from None
    except ValueError:
        raise KctlError(f"pid file {path} does not hold a pid") from None
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        path.unlink(missing_ok=True)
        raise KctlError(f"no process {pid} (stale pid file {path} removed)", ExitCode.NOT_FOUND) from None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            info(f"broker (pid {pid}) stopped")
            return
        time.sleep(0.05)
    raise KctlError(f"broker (pid {pid}) did not stop within {timeout:g} s")
