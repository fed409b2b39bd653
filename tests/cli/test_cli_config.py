"""`kctl config show` and the configuration resolution behind it (kctl.commands.options)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from kctl.__main__ import main
from kctl.commands.errors import ExitCode, KctlError
from kctl.commands.options import (
    BOOTSTRAP_SERVER_ENV,
    DEFAULT_BOOTSTRAP_SERVER,
    DEFAULT_FORMAT,
    BootstrapServer,
    ClusterOptions,
    ConfigSource,
    FormatOption,
    cluster_options,
    load_config,
    parse_override,
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BOOTSTRAP_SERVER_ENV, raising=False)
    monkeypatch.delenv("KCTL_DEBUG", raising=False)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def show_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, tuple[str, str]]:
    code, out, err = run(capsys, "config", "show", "--format", "json", *args)
    assert (code, err) == (0, "")
    return {row["key"]: (row["value"], row["source"]) for row in json.loads(out)}


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "client.properties"
    path.write_text(
        "# client settings\n"
        "bootstrap.servers=file-host:9092\n"
        "acks = all\n"
        "client.id: from-file\n"
        "sasl.password=hunter2\n"
    )
    return path


def test_defaults_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert show_json(capsys) == {"bootstrap.servers": (DEFAULT_BOOTSTRAP_SERVER, "default")}


def test_table_output_when_piped(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "config", "show", "-X", "acks=1")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "KEY                VALUE           SOURCE",
        "acks               1               -X",
        "bootstrap.servers  127.0.0.1:9092  default",
    ]


def test_file_overrides_defaults_and_x_overrides_file(
    capsys: pytest.CaptureFixture[str], config_file: Path
) -> None:
    rows = show_json(
        capsys, "--config", str(config_file), "-X", "acks=1", "-X", "linger.ms=5", "-X", "acks=0"
    )
    assert rows == {
        "acks": ("0", "-X"),
        "bootstrap.servers": ("file-host:9092", "file"),
        "client.id": ("from-file", "file"),
        "linger.ms": ("5", "-X"),
        "sasl.password": ("********", "file"),
    }


def test_env_beats_file_and_x_beats_env(
    capsys: pytest.CaptureFixture[str], config_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(BOOTSTRAP_SERVER_ENV, "env-host:9092")
    assert show_json(capsys, "-c", str(config_file))["bootstrap.servers"] == ("env-host:9092", "env")
    rows = show_json(capsys, "-c", str(config_file), "-X", "bootstrap.servers=x-host:1")
    assert rows["bootstrap.servers"] == ("x-host:1", "-X")


def test_explicit_bootstrap_option_beats_everything(
    capsys: pytest.CaptureFixture[str], config_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(BOOTSTRAP_SERVER_ENV, "env-host:9092")
    rows = show_json(capsys, "-c", str(config_file), "-X", "bootstrap.servers=x:1", "-b", "opt-host:9093")
    assert rows["bootstrap.servers"] == ("opt-host:9093", "option")


def test_secrets_are_masked_unless_asked(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("-X", "sasl.jaas.config=secret stuff", "-X", "ssl.key.password=p", "-X", "sasl.mechanism=PLAIN")
    rows = show_json(capsys, *args)
    assert rows["sasl.jaas.config"][0] == rows["ssl.key.password"][0] == "********"
    assert rows["sasl.mechanism"] == ("PLAIN", "-X")
    rows = show_json(capsys, *args, "--show-secrets")
    assert rows["sasl.jaas.config"] == ("secret stuff", "-X")


def test_jsonl_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "config", "show", "-f", "jsonl", "-X", "a=b=c")
    assert code == 0
    assert [json.loads(line) for line in out.splitlines()] == [
        {"key": "a", "value": "b=c", "source": "-X"},
        {"key": "bootstrap.servers", "value": DEFAULT_BOOTSTRAP_SERVER, "source": "default"},
    ]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("acks", "expected KEY=VALUE, got 'acks'"),
        ("=1", "empty key in '=1'"),
        ("a b=1", "contains whitespace"),
    ],
)
def test_malformed_x_is_a_usage_error(capsys: pytest.CaptureFixture[str], bad: str, message: str) -> None:
    code, out, err = run(capsys, "config", "show", "-X", "ok=1", "-X", bad)
    assert code == ExitCode.USAGE
    assert out == ""
    assert message in err
    assert "kctl: error: Invalid value for '-X'" in err


def test_empty_bootstrap_server_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "config", "show", "-b", " ")
    assert code == ExitCode.USAGE
    assert "--bootstrap-server" in err


def test_missing_config_file_is_not_found(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run(capsys, "config", "show", "-c", str(tmp_path / "nope.properties"))
    assert code == ExitCode.NOT_FOUND
    assert out == ""
    assert err == f"kctl: error: config file not found: {tmp_path / 'nope.properties'}\n"


def test_directory_as_config_file_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(capsys, "config", "show", "-c", str(tmp_path))
    assert code == ExitCode.USAGE
    assert "directory" in err


def test_malformed_config_file_is_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "bad.properties"
    path.write_text("ok=1\nbad=\\uZZZZ\n")
    code, _, err = run(capsys, "config", "show", "-c", str(path))
    assert code == ExitCode.USAGE
    assert f"kctl: error: config file {path}: line 2: malformed" in err


# -- load_config as a library function -------------------------------------------------------------
def test_load_config_precedence_and_sources(tmp_path: Path) -> None:
    path = tmp_path / "c.properties"
    path.write_text("a=file\nb=file\n")
    config = load_config(path, ["b=x", "c=x"], {"a": "default", "d": "default"})
    assert dict(config) == {"a": "file", "b": "x", "c": "x", "d": "default"}
    assert [(e.key, e.source) for e in config.entries()] == [
        ("a", ConfigSource.FILE),
        ("b", ConfigSource.OVERRIDE),
        ("c", ConfigSource.OVERRIDE),
        ("d", ConfigSource.DEFAULT),
    ]
    assert config.source("d") is ConfigSource.DEFAULT
    assert config.config_file == path
    assert config.bootstrap_servers == DEFAULT_BOOTSTRAP_SERVER
    assert "a" in config and len(config) == 4 and config.get("zzz") is None


def test_load_config_bootstrap_layers() -> None:
    def resolved(source: ConfigSource, overrides: list[str]) -> tuple[str, ConfigSource]:
        config = load_config(None, overrides, bootstrap_server=BootstrapServer("b:1", source))
        return config.bootstrap_servers, config.source("bootstrap.servers")

    assert resolved(ConfigSource.DEFAULT, []) == ("b:1", ConfigSource.DEFAULT)
    assert resolved(ConfigSource.DEFAULT, ["bootstrap.servers=x:1"]) == ("x:1", ConfigSource.OVERRIDE)
    assert resolved(ConfigSource.ENV, ["bootstrap.servers=x:1"]) == ("x:1", ConfigSource.OVERRIDE)
    assert resolved(ConfigSource.OPTION, ["bootstrap.servers=x:1"]) == ("b:1", ConfigSource.OPTION)
    plain = load_config(None, None, bootstrap_server="plain:1")
    assert plain.source("bootstrap.servers") is ConfigSource.OPTION


def test_load_config_errors(tmp_path: Path) -> None:
    with pytest.raises(KctlError) as info:
        load_config(None, ["novalue"])
    assert info.value.exit_code is ExitCode.USAGE
    assert str(info.value) == "invalid -X: expected KEY=VALUE, got 'novalue'"
    with pytest.raises(KctlError) as info:
        load_config(None, ["linger.mss=1"], allowed_keys={"linger.ms", "acks"})
    assert info.value.exit_code is ExitCode.USAGE
    assert "unknown configuration key 'linger.mss' in -X (did you mean 'linger.ms'?)" in str(info.value)
    path = tmp_path / "c.properties"
    path.write_text("zzz=1\n")
    with pytest.raises(KctlError, match=r"unknown configuration key 'zzz' in config file .*c\.properties$"):
        load_config(path, None, allowed_keys={"acks"})
    assert load_config(None, ["acks=1"], allowed_keys={"acks"}, bootstrap_server="h:1")["acks"] == "1"
    with pytest.raises(KctlError) as info:
        load_config(tmp_path / "missing", None)
    assert info.value.exit_code is ExitCode.NOT_FOUND


def test_parse_override() -> None:
    assert parse_override(" acks =all ") == ("acks", "all ")
    assert parse_override("k=") == ("k", "")
    assert parse_override("k=a=b") == ("k", "a=b")


# -- kctl config show --broker / --topic / --producer / --consumer -----------------------------------
def show_rows(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, dict[str, str | None]]:
    code, out, err = run(capsys, "config", "show", "--format", "json", *args)
    assert (code, err) == (0, "")
    return {row.pop("key"): row for row in json.loads(out)}


def test_show_broker_lists_every_property_with_default_and_source(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from kctl.broker.config import BROKER_CONFIGS

    path = tmp_path / "server.properties"
    path.write_text("num.partitions=3\nlog.retention.hours=2\nsome.other.key=x\n")
    rows = show_rows(capsys, "--broker", "-c", str(path), "-X", "num.partitions=4")
    assert list(rows)[: len(BROKER_CONFIGS)] == list(BROKER_CONFIGS)
    assert rows["num.partitions"] == {"value": "4", "default": "1", "source": "-X"}
    assert rows["log.retention.hours"] == {"value": "2", "default": "168", "source": "file"}
    assert rows["log.dir"] == {"value": "./data", "default": "./data", "source": "default"}
    assert rows["log.retention.ms"] == {"value": None, "default": None, "source": "default"}
    assert rows["some.other.key"] == {"value": "x", "default": None, "source": "file"}
    assert "bootstrap.servers" not in rows


def test_show_topic_producer_and_consumer(capsys: pytest.CaptureFixture[str]) -> None:
    topic = show_rows(capsys, "--topic", "-X", "cleanup.policy=compact")
    assert topic["cleanup.policy"] == {"value": "compact", "default": "delete", "source": "-X"}
    assert topic["retention.ms"]["default"] == "604800000"
    producer = show_rows(capsys, "--producer", "-b", "h:1")
    assert producer["acks"] == {"value": "-1", "default": "-1", "source": "default"}
    assert producer["bootstrap.servers"] == {"value": "h:1", "default": None, "source": "option"}
    consumer = show_rows(capsys, "--consumer", "-X", "group.id=g")
    assert consumer["group.id"] == {"value": "g", "default": None, "source": "-X"}
    assert consumer["auto.offset.reset"]["default"] == "latest"
    assert consumer["session.timeout.ms"]["default"] == "45000"
    assert consumer["fetch.max.bytes"]["default"] == "52428800"
    assert consumer["check.crcs"]["default"] == "true"


def test_show_definition_table_and_jsonl(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "config", "show", "--topic", "-X", "preallocate=true")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].split() == ["KEY", "VALUE", "DEFAULT", "SOURCE"]
    assert ["preallocate", "true", "false", "-X"] in [line.split() for line in lines]
    code, out, _ = run(capsys, "config", "show", "--topic", "-f", "jsonl")
    assert code == 0
    assert json.loads(out.splitlines()[0]) == {
        "key": "segment.bytes",
        "value": "1073741824",
        "default": "1073741824",
        "source": "default",
    }


def test_show_definition_rejects_bad_values_and_two_kinds(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "config", "show", "--broker", "-X", "num.partitions=many")
    assert (code, out) == (ExitCode.USAGE, "")
    assert "kctl: error: invalid configuration: num.partitions: expected an integer, got 'many'" in err
    code, out, err = run(capsys, "config", "show", "--consumer", "-X", "max.poll.records=0")
    assert (code, out) == (ExitCode.USAGE, "")
    assert "invalid configuration: max.poll.records: must be at least 1, got 0" in err
    code, _, err = run(capsys, "config", "show", "--broker", "--topic")
    assert code == ExitCode.USAGE
    assert "at most one of --broker, --topic, --producer, --consumer" in err


def test_show_definition_masks_secrets(capsys: pytest.CaptureFixture[str]) -> None:
    rows = show_rows(capsys, "--producer", "-X", "ssl.key.password=p")
    assert rows["ssl.key.password"]["value"] == "********"
    rows = show_rows(capsys, "--producer", "-X", "ssl.key.password=p", "--show-secrets")
    assert rows["ssl.key.password"]["value"] == "p"


# -- @cluster_options --------------------------------------------------------------------------------
def test_cluster_options_are_appended_to_a_command_and_passed_as_one_value(tmp_path: Path) -> None:
    app = typer.Typer()
    seen: list[tuple[str, str, ClusterOptions]] = []

    @app.command()
    @cluster_options
    def probe(name: str, fmt: FormatOption = DEFAULT_FORMAT, *, cluster: ClusterOptions) -> None:
        seen.append((name, fmt.value, cluster))

    path = tmp_path / "client.properties"
    path.write_text("client.id=x\n")
    runner = CliRunner()
    result = runner.invoke(app, ["n", "-f", "json", "-c", str(path), "-X", "a=1", "-X", "b=2", "-b", "h:1"])
    assert result.exit_code == 0, result.output
    assert seen == [("n", "json", ClusterOptions(path, ["a=1", "b=2"], "h:1"))]
    assert runner.invoke(app, ["m"], env={BOOTSTRAP_SERVER_ENV: ""}).exit_code == 0
    assert seen[-1] == ("m", "table", ClusterOptions(None, None, DEFAULT_BOOTSTRAP_SERVER))
    assert runner.invoke(app, ["m", "-X", "novalue"]).exit_code == 2  # the options' own checks run
    help_text = runner.invoke(app, ["--help"], env={"COLUMNS": "200"}).output
    positions = [help_text.index(option) for option in ("--format", "--config", "-X", "--bootstrap-server")]
    assert positions == sorted(positions)
    with pytest.raises(TypeError, match="no 'cluster' parameter"):
        cluster_options(lambda name: None)
