"""The `kctl` entry point: exit codes, stdout/stderr separation, Ctrl-C, closed pipes, registration."""

from __future__ import annotations

import importlib
import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import typer
import typer.main

import kctl
from kctl.__main__ import main
from kctl.commands import app as app_module
from kctl.commands import config as config_module
from kctl.commands.errors import ExitCode, KctlError
from kctl.commands.options import BOOTSTRAP_SERVER_ENV, DEFAULT_BOOTSTRAP_SERVER

COMMANDS_DIR = Path(app_module.__file__).parent


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BOOTSTRAP_SERVER_ENV, raising=False)
    monkeypatch.delenv("KCTL_DEBUG", raising=False)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def failing_command(monkeypatch: pytest.MonkeyPatch, exc: BaseException) -> None:
    """Make `kctl config show` raise `exc` from inside the command."""

    def boom(*args: object, **kwargs: object) -> None:
        raise exc

    monkeypatch.setattr(config_module, "load_config", boom)


def kctl_process(
    *args: str, stdout: int | None = subprocess.PIPE, **kwargs: object
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kctl", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k not in (BOOTSTRAP_SERVER_ENV, "KCTL_DEBUG")},
        **kwargs,  # type: ignore[arg-type]
    )


def test_exit_codes_are_the_documented_ones() -> None:
    assert {code.name: int(code) for code in ExitCode} == {
        "OK": 0,
        "FAILURE": 1,
        "USAGE": 2,
        "NOT_FOUND": 3,
        "INTERRUPTED": 130,
        "TERMINATED": 143,
    }
    assert all(code.description.endswith(".") for code in ExitCode)


# -- success, help, version ------------------------------------------------------------------------
def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--help")
    assert (code, err) == (0, "")
    assert "Usage" in out and "config" in out and "--version" in out
    code, out, _ = run(capsys, "config", "show", "-h")
    assert code == 0 and "--bootstrap-server" in out and "KCTL_BOOTSTRAP_SERVER" in out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "--version") == (0, f"kctl {kctl.__version__}\n", "")


def test_no_arguments_shows_help_as_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys)
    assert code == ExitCode.USAGE
    assert "Usage" in out + err and "kctl: error" not in err


def test_data_goes_to_stdout_and_nothing_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "config", "show", "-f", "jsonl")
    assert (code, err) == (0, "")
    assert DEFAULT_BOOTSTRAP_SERVER in out


# -- usage errors: 2 -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("confg",), "No such command 'confg'"),
        (("config", "show", "--nope"), "No such option: --nope"),
        (("config", "show", "--format", "xml"), "'xml' is not one of"),
        (("config", "show", "-X", "novalue"), "expected KEY=VALUE"),
    ],
)
def test_usage_errors(capsys: pytest.CaptureFixture[str], args: tuple[str, ...], message: str) -> None:
    code, out, err = run(capsys, *args)
    assert code == ExitCode.USAGE
    assert out == ""
    assert message in err
    assert err.count("kctl: error: ") == 1
    assert "Usage: kctl" in err and "--help' for help." in err
    assert "Traceback" not in err


# -- domain errors, findings and unexpected errors -----------------------------------------------------
@pytest.mark.parametrize("exit_code", [ExitCode.FAILURE, ExitCode.USAGE, ExitCode.NOT_FOUND])
def test_kctl_error_prints_its_message_and_exits_with_its_code(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, exit_code: ExitCode
) -> None:
    failing_command(monkeypatch, KctlError("topic 'orders' does not exist", exit_code))
    assert run(capsys, "config", "show") == (exit_code, "", "kctl: error: topic 'orders' does not exist\n")


def test_a_finding_exits_1_through_typer_exit(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    failing_command(monkeypatch, typer.Exit(ExitCode.FAILURE))
    assert run(capsys, "config", "show") == (1, "", "")


def test_unexpected_error_is_short_unless_debugging(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    failing_command(monkeypatch, RuntimeError("kaput"))
    code, out, err = run(capsys, "config", "show")
    assert (code, out) == (ExitCode.FAILURE, "")
    assert err == "kctl: error: unexpected RuntimeError: kaput (set KCTL_DEBUG=1 for a traceback)\n"
    monkeypatch.setenv("KCTL_DEBUG", "1")
    code, _, err = run(capsys, "config", "show")
    assert code == ExitCode.FAILURE
    assert "Traceback (most recent call last)" in err and "RuntimeError: kaput" in err
    assert err.endswith("kctl: error: unexpected RuntimeError: kaput\n")


@pytest.mark.parametrize(
    ("exc", "exit_code", "message"),
    [
        (
            FileNotFoundError(2, "No such file or directory", "/data/t_0"),
            3,
            "No such file or directory: /data/t_0",
        ),
        (ConnectionRefusedError(111, "Connection refused"), 3, "Connection refused"),
        (PermissionError(13, "Permission denied", "/data"), 1, "Permission denied: /data"),
    ],
)
def test_os_errors_map_to_not_found_or_failure(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    exc: OSError,
    exit_code: int,
    message: str,
) -> None:
    failing_command(monkeypatch, exc)
    assert run(capsys, "config", "show") == (exit_code, "", f"kctl: error: {message}\n")


def test_abort_is_a_failure(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    failing_command(monkeypatch, typer.Abort())
    assert run(capsys, "config", "show") == (1, "", "kctl: error: aborted\n")


# -- Ctrl-C: 130, quietly --------------------------------------------------------------------------
def test_keyboard_interrupt_in_a_command_exits_130_quietly(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    failing_command(monkeypatch, KeyboardInterrupt())
    assert run(capsys, "config", "show") == (130, "", "")


def test_sigint_to_a_real_process_exits_130_without_traceback() -> None:
    # The command sends SIGINT to its own process; Python raises KeyboardInterrupt right after
    # os.kill returns, so no timing is involved.
    script = textwrap.dedent(
        """
        import os, signal, sys
        from kctl.__main__ import main
        from kctl.commands import config

        def interrupted(*args, **kwargs):
            os.kill(os.getpid(), signal.SIGINT)
            raise AssertionError("SIGINT was not delivered")

        config.load_config = interrupted
        sys.exit(main(["config", "show"]))
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert proc.returncode == 130
    assert proc.stdout == b""
    assert proc.stderr == b""


# -- closed stdout (`kctl ... | head -1`): 0, quietly --------------------------------------------------
MANY_OVERRIDES = [arg for i in range(4000) for arg in ("-X", f"key.{i:05d}=value-{i}")]


@pytest.mark.parametrize(
    "args",
    [
        ("config", "show"),  # small output: the pipe breaks on the final flush
        ("config", "show", *MANY_OVERRIDES),  # large output: the pipe breaks mid-write
        ("config", "show", "-f", "jsonl", *MANY_OVERRIDES),
        ("config", "show", "-f", "json", *MANY_OVERRIDES),
        ("--help",),
        ("--version",),
    ],
    ids=["small", "table", "jsonl", "json", "help", "version"],
)
def test_closed_stdout_exits_0_quietly(args: tuple[str, ...]) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # closed before the process starts: every write to stdout fails with EPIPE
    try:
        proc = kctl_process(*args, stdout=write_end)
    finally:
        os.close(write_end)
    assert proc.stderr == b""
    assert proc.returncode == 0


def test_head_in_a_shell_pipeline() -> None:
    command = shlex.join([sys.executable, "-m", "kctl", "config", "show", "-f", "jsonl", *MANY_OVERRIDES])
    proc = subprocess.run(
        ["bash", "-c", f"{command} | head -1; exit ${{PIPESTATUS[0]}}"],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != BOOTSTRAP_SERVER_ENV},
    )
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout.startswith('{"key":"bootstrap.servers"')
    assert proc.stdout.count("\n") == 1


def test_real_process_separates_stdout_and_stderr(tmp_path: Path) -> None:
    ok = kctl_process("config", "show", "-f", "jsonl")
    assert (ok.returncode, ok.stderr) == (0, b"")
    assert DEFAULT_BOOTSTRAP_SERVER.encode() in ok.stdout
    missing = kctl_process("config", "show", "-c", str(tmp_path / "missing.properties"))
    assert missing.returncode == ExitCode.NOT_FOUND
    assert missing.stdout == b""
    assert missing.stderr.decode().startswith("kctl: error: config file not found")


# -- command group registration --------------------------------------------------------------------
def test_groups_register_from_one_list() -> None:
    names = [name for _, name in app_module.COMMAND_GROUPS]
    assert {"config", "log"} <= set(names)
    assert "config" in app_module.REGISTERED_GROUPS
    root = typer.main.get_command(app_module.app)
    assert set(app_module.REGISTERED_GROUPS) <= set(root.commands)  # type: ignore[attr-defined]


def test_every_group_module_is_registered() -> None:
    listed = {module for module, _ in app_module.COMMAND_GROUPS}
    listed |= {module for module, _, _ in app_module.SUBGROUPS}
    for path in sorted(COMMANDS_DIR.glob("*.py")):
        source = path.read_text(encoding="utf-8")
        if path.stem != "app" and "\napp = typer.Typer(" in source:
            assert f"kctl.commands.{path.stem}" in listed, (
                f"{path.name} defines a group missing from COMMAND_GROUPS"
            )


def test_a_subgroup_is_registered_under_its_parent_once() -> None:
    root = typer.main.get_command(app_module.app)
    for _, parent, name in app_module.SUBGROUPS:
        assert name in root.commands[parent].commands  # type: ignore[attr-defined]
        single = typer.main.get_command(app_module.app_for([parent, name]))
        assert name in single.commands[parent].commands  # type: ignore[attr-defined]
        modules = {group: module for module, group in app_module.COMMAND_GROUPS}
        parent_app = importlib.import_module(modules[parent]).app
        assert [info.name for info in parent_app.registered_groups].count(name) == 1


def test_a_group_module_that_fails_to_import_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "kctl_broken_group.py").write_text("import kctl_module_that_does_not_exist\n")
    (tmp_path / "kctl_good_group.py").write_text("import typer\napp = typer.Typer(help='Good.')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    root = typer.Typer()
    assert app_module.register_groups(root, [("kctl_good_group", "good")]) == ["good"]
    with pytest.raises(ModuleNotFoundError, match=r"kctl\.commands\.not_written_yet"):
        app_module.register_groups(root, [("kctl.commands.not_written_yet", "later")])
    with pytest.raises(ModuleNotFoundError, match="kctl_module_that_does_not_exist"):
        app_module.register_groups(root, [("kctl_broken_group", "broken")])


def _all_options(command: object, path: str = "kctl") -> list[tuple[str, object]]:
    found = [(path, param) for param in getattr(command, "params", [])]
    for name, sub in (getattr(command, "commands", None) or {}).items():
        found += _all_options(sub, f"{path} {name}")
    return found


def test_shared_options_are_the_same_everywhere() -> None:
    """Every command that has --format, --config, -X or --bootstrap-server uses the shared alias."""
    root = typer.main.get_command(app_module.app)
    seen = set()
    for path, param in _all_options(root):
        opts = set(param.opts)  # type: ignore[attr-defined]
        where = f"{path}: {sorted(opts)}"
        if "--format" in opts:
            seen.add("format")
            assert opts == {"--format", "-f"}, where
            choices = getattr(param.type, "choices", None)  # type: ignore[attr-defined]
            if choices:
                assert [getattr(c, "value", c) for c in choices] == ["table", "json", "jsonl"], where
            else:  # a record stream's free-form format (consume/produce) still offers the three
                assert all(name in (param.help or "") for name in ("table", "json", "jsonl")), where  # type: ignore[attr-defined]
            # consume's record stream: "" is "table on a terminal, jsonl otherwise"
            expected = "" if path == "kctl consume" else "table"
            assert param.default == expected, where  # type: ignore[attr-defined]
        if "--config" in opts:
            seen.add("config")
            assert opts == {"--config", "-c"} and param.default is None, where  # type: ignore[attr-defined]
        if "-X" in opts:
            seen.add("-X")
            assert opts == {"-X"} and param.multiple, where  # type: ignore[attr-defined]
        if "--bootstrap-server" in opts:
            seen.add("bootstrap")
            assert opts == {"--bootstrap-server", "-b"}, where
            assert param.envvar == BOOTSTRAP_SERVER_ENV, where  # type: ignore[attr-defined]
            assert param.default == DEFAULT_BOOTSTRAP_SERVER, where  # type: ignore[attr-defined]
    assert seen == {"format", "config", "-X", "bootstrap"}


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (("consume",), "name at least one topic"),
        (("produce",), "name the topic to write to: TOPIC or -t TOPIC"),
        (("mirror",), "Missing option '--from'"),
    ],
)
def test_a_command_missing_its_arguments_says_why_on_stderr(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], reason: str
) -> None:
    code, out, err = run(capsys, *args)
    assert code == ExitCode.USAGE
    assert out == "", "nothing on stdout: not the help text"
    assert reason in err and len(err.splitlines()) <= 4
