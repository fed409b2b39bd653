"""scripts/gen_docs.py: man pages and shell completions are generated, current, and work."""

from __future__ import annotations

import importlib.util
import re
import shlex
import shutil
import subprocess
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import pytest
import typer
import typer.main

from kctl.commands import app as app_module
from kctl.commands.examples import EXAMPLES

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("gen_docs", REPO / "scripts" / "gen_docs.py")
assert _spec is not None and _spec.loader is not None
gen_docs = importlib.util.module_from_spec(_spec)
sys.modules["gen_docs"] = gen_docs  # dataclasses look their module up while the script loads
_spec.loader.exec_module(gen_docs)

TREE = gen_docs.kctl_tree()
GROUPS = [sub.path[-1] for sub in TREE.subcommands]
needs = {
    tool: pytest.mark.skipif(shutil.which(tool) is None, reason=f"{tool} is not installed")
    for tool in ("bash", "zsh", "fish", "groff")
}


def test_generated_files_are_current_and_all_help_is_there() -> None:
    problems = gen_docs.check(TREE, REPO)
    assert not problems, "\n".join(problems) + "\nadd any missing help, then run: python scripts/gen_docs.py"


def test_check_command_line(tmp_path: Path) -> None:
    script = [sys.executable, str(REPO / "scripts" / "gen_docs.py")]
    stale = subprocess.run([*script, "--check", "--root", str(tmp_path)], capture_output=True, text=True)
    assert stale.returncode == 1
    assert "gen_docs: missing: man/kctl.1" in stale.stderr
    assert not any(tmp_path.iterdir()), "--check must write nothing"
    written = subprocess.run([*script, "--root", str(tmp_path)], capture_output=True, text=True)
    assert written.returncode == 0, written.stderr
    clean = subprocess.run([*script, "--check", "--root", str(tmp_path)], capture_output=True, text=True)
    assert (clean.returncode, clean.stderr) == (0, "")


def test_check_reports_stale_missing_and_extra_files(tmp_path: Path) -> None:
    files = gen_docs.generate(TREE)
    gen_docs.write_files(files, tmp_path)
    assert gen_docs.stale_files(files, tmp_path) == []
    (tmp_path / "man" / "kctl.1").write_text("edited by hand\n")
    (tmp_path / "completions" / "_kctl").unlink()
    (tmp_path / "man" / "kctl-removed-command.1").write_text("left over\n")
    assert gen_docs.stale_files(files, tmp_path) == [
        "stale: man/kctl.1",
        "missing: completions/_kctl",
        "extra: man/kctl-removed-command.1",
    ]
    touched = gen_docs.write_files(files, tmp_path)
    assert sorted(touched) == ["completions/_kctl", "man/kctl-removed-command.1", "man/kctl.1"]
    assert gen_docs.stale_files(files, tmp_path) == []


def test_output_is_deterministic(monkeypatch: pytest.MonkeyPatch) -> None:
    first = gen_docs.generate(TREE)
    monkeypatch.setenv("KCTL_BOOTSTRAP_SERVER", "elsewhere:9092")
    monkeypatch.setenv("COLUMNS", "37")
    assert gen_docs.generate(gen_docs.kctl_tree()) == first


def test_every_command_has_a_man_page_with_the_standard_sections() -> None:
    files = gen_docs.generate(TREE)
    commands = list(TREE.walk())
    assert {f"man/{cmd.page}.1" for cmd in commands} == {name for name in files if name.startswith("man/")}
    assert "man/kctl-config-show.1" in files
    for cmd in commands:
        page = files[f"man/{cmd.page}.1"]
        for section in (
            "NAME",
            "SYNOPSIS",
            "DESCRIPTION",
            "OPTIONS",
            "EXIT STATUS",
            "ENVIRONMENT",
            "EXAMPLES",
            "SEE ALSO",
        ):
            assert f".SH {section}\n" in page, (cmd.name, section)
        for code in (0, 1, 2, 3, 130):
            assert f".B {code}\n" in page
    show = files["man/kctl-config-show.1"]
    assert "\\fB\\-f\\fR, \\fB\\-\\-format\\fR \\fItable|json|jsonl\\fR" in show
    assert ".B KCTL_BOOTSTRAP_SERVER" in show and ".B KCTL_DEBUG" in show
    root = files["man/kctl.1"]
    assert all(f"\\fBkctl\\-{group}\\fR(1)" in root for group in GROUPS)


def _parse_example(line: str) -> list[str]:
    """Each `kctl ...` command of an example line parsed (not run) by the command tree; the errors."""
    root = typer.main.get_command(app_module.app)
    errors = []
    for part in line.split(" | "):
        words = shlex.split(part.split(" < ")[0])
        if words[0] != "kctl":
            continue
        command, args, parent = root, words[1:], root.make_context("kctl", [], resilient_parsing=True)
        while getattr(command, "commands", None) and args and args[0] in command.commands:  # type: ignore[attr-defined]
            name = args.pop(0)
            command = command.commands[name]  # type: ignore[attr-defined]
        try:
            command.make_context(command.name or "kctl", list(args), parent=parent)
        except Exception as error:  # click's UsageError and its kin (typer vendors click)
            errors.append(f"{part}: {error}")
    return errors


def test_every_command_has_examples_that_parse() -> None:
    leaves = {cmd.name for cmd in TREE.walk() if not cmd.subcommands}
    assert leaves - EXAMPLES.keys() == set()
    assert EXAMPLES.keys() - leaves == {"kctl"}  # no examples of commands that do not exist
    for name, examples in EXAMPLES.items():
        for what, line in examples:
            assert what and line.startswith(("kctl ", "printf ")), (name, line)
            assert f"kctl {' '.join(name.split()[1:])}".strip() in line or name == "kctl", (name, line)
            assert _parse_example(line) == [], (name, line)
    # the check itself finds what it must
    assert _parse_example("kctl topic create orders --no-such-option")
    assert _parse_example("kctl group rewind")  # GROUP is required
    assert _parse_example("printf x | kctl produce orders --acks 7")


@needs["groff"]
def test_man_pages_render_without_warnings(tmp_path: Path) -> None:
    for name, content in gen_docs.generate(TREE).items():
        if name.startswith("man/"):
            proc = subprocess.run(
                ["groff", "-man", "-Tutf8", "-ww", "-z"], input=content, capture_output=True, text=True
            )
            assert (proc.returncode, proc.stderr) == (0, ""), name


# -- completions -----------------------------------------------------------------------------------
def test_completion_files_name_every_group_and_command() -> None:
    files = gen_docs.generate(TREE)
    for name in ("completions/kctl.bash", "completions/_kctl", "completions/kctl.fish"):
        text = files[name]
        assert text.strip()
        for cmd in TREE.walk():
            assert cmd.path[-1] in text, (name, cmd.name)
    assert files["completions/_kctl"].startswith("#compdef kctl\n")


@needs["bash"]
def test_bash_script_is_valid() -> None:
    subprocess.run(["bash", "-n", str(REPO / "completions" / "kctl.bash")], check=True)


@needs["zsh"]
def test_zsh_script_is_valid() -> None:
    subprocess.run(["zsh", "-n", str(REPO / "completions" / "_kctl")], check=True)


@needs["fish"]
def test_fish_script_is_valid() -> None:
    subprocess.run(["fish", "--no-execute", str(REPO / "completions" / "kctl.fish")], check=True)


def bash_complete(script: Path, words: list[str], cwd: Path | None = None) -> list[str]:
    """What TAB offers after `words` (the last word is the one being completed)."""
    quoted = " ".join("'" + w.replace("'", "'\\''") + "'" for w in words)
    program = (
        f"source '{script}'\n"
        f"COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; COMPREPLY=()\n"
        "_kctl\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
    )
    proc = subprocess.run(["bash", "-c", program], capture_output=True, text=True, cwd=cwd, check=True)
    return [line for line in proc.stdout.splitlines() if line]


@needs["bash"]
def test_bash_completes_commands_options_choices_and_files(tmp_path: Path) -> None:
    script = REPO / "completions" / "kctl.bash"
    (tmp_path / "client.properties").touch()
    (tmp_path / "clients").mkdir()
    assert bash_complete(script, ["kctl", ""]) == GROUPS
    assert bash_complete(script, ["kctl", "conf"]) == ["config"]
    assert bash_complete(script, ["kctl", "co"]) == sorted(g for g in GROUPS if g.startswith("co"))
    assert bash_complete(script, ["kctl", "config", ""]) == ["show"]
    assert bash_complete(script, ["kctl", "--version", "config", "s"]) == ["show"]
    assert "--bootstrap-server" in bash_complete(script, ["kctl", "config", "show", "--"])
    assert bash_complete(script, ["kctl", "config", "show", "--format", ""]) == ["table", "json", "jsonl"]
    assert bash_complete(script, ["kctl", "config", "show", "-f", "js"]) == ["json", "jsonl"]
    assert bash_complete(script, ["kctl", "config", "show", "--format", "=", "j"]) == ["json", "jsonl"]
    assert sorted(
        bash_complete(script, ["kctl", "config", "show", "-f", "json", "-c", "cl"], cwd=tmp_path)
    ) == [
        "client.properties",
        "clients",
    ]
    assert bash_complete(script, ["kctl", "config", "show", "-X", ""]) == []
    for cmd in TREE.walk():  # every --format with fixed choices offers them, at every level
        # (consume/produce take a free-form --format: table, json, jsonl, raw or a template)
        if any("--format" in p.opts and p.choices for p in cmd.options):
            assert bash_complete(script, [*cmd.path, "--format", ""]) == ["table", "json", "jsonl"], cmd.name


@needs["fish"]
def test_fish_completes_commands_options_and_choices() -> None:
    script = REPO / "completions" / "kctl.fish"

    def complete(line: str) -> list[str]:
        proc = subprocess.run(
            ["fish", "--no-config", "-c", f"source '{script}'; complete -C '{line}'"],
            capture_output=True,
            text=True,
            check=True,
        )
        return [entry.split("\t")[0] for entry in proc.stdout.splitlines()]

    assert complete("kctl ") == sorted(GROUPS)
    assert complete("kctl config ") == ["show"]
    assert complete("kctl config show --format ") == ["json", "jsonl", "table"]
    assert complete("kctl config show -X a=b -f ") == ["json", "jsonl", "table"]
    assert "--bootstrap-server" in complete("kctl config show --")


# -- the generator on a tree with every kind of parameter --------------------------------------------
class Mode(StrEnum):
    FAST = "fast"
    SAFE = "safe"


def _sample_tree() -> object:
    app = typer.Typer(name="kctl", help="Sample root.", add_completion=False)
    group = typer.Typer(help="Sample group.")

    @group.command("run")
    def run(
        paths: Annotated[list[Path], typer.Argument(help="Files to read.")],
        mode: Annotated[Mode, typer.Option("--mode", "-m", help="How to run.")] = Mode.SAFE,
        out_dir: Annotated[Path, typer.Option("--out", file_okay=False, help="Where to write.")] = Path(
            "out"
        ),
        index: Annotated[bool, typer.Option("--index/--no-index", help="Keep an index.")] = True,
        undocumented: Annotated[int, typer.Option("--undocumented")] = 1,
    ) -> None:
        """Run the sample.

        Second paragraph with a - hyphen and a \\ backslash.
        """

    @group.command("secret", hidden=True)
    def secret() -> None:
        """Hidden."""

    app.add_typer(group, name="sample")
    return typer.main.get_command(app)


def test_generator_on_every_kind_of_parameter(tmp_path: Path) -> None:
    tree = gen_docs.describe(_sample_tree())
    assert [cmd.name for cmd in tree.walk()] == ["kctl", "kctl sample", "kctl sample run"]
    assert gen_docs.missing_help(tree) == [
        "missing examples: command 'kctl sample run' (kctl/commands/examples.py)",
        "missing help: option --undocumented of 'kctl sample run'",
    ]
    run = tree.subcommands[0].subcommands[0]
    kinds = {p.name: (p.value, p.choices, p.default) for p in run.params}
    assert kinds["paths"] == ("file", (), None)
    assert kinds["mode"] == ("choice", ("fast", "safe"), "safe")
    assert kinds["out_dir"] == ("dir", (), "out")
    assert kinds["index"][0] == "flag"
    page = gen_docs.render_man_page(run, tree)
    assert ".SH ARGUMENTS\n.TP\n\\fIPATHS\\fR...\nFiles to read." in page
    assert "\\fB\\-\\-index\\fR, \\fB\\-\\-no\\-index\\fR\nKeep an index. Default: \\-\\-index." in page
    assert "Second paragraph with a \\- hyphen and a \\e backslash." in page
    assert "[\\fIOPTIONS\\fR]\n\\fIPATHS\\fR..." in page
    files = gen_docs.generate(tree)
    gen_docs.write_files(files, tmp_path)
    if shutil.which("bash"):
        script = tmp_path / "completions" / "kctl.bash"
        work = tmp_path / "work"  # not the root: docs/ is generated there too
        work.mkdir()
        (work / "data.log").touch()
        (work / "dir").mkdir()
        assert sorted(bash_complete(script, ["kctl", "sample", "run", "d"], cwd=work)) == [
            "data.log",
            "dir",
        ]
        assert bash_complete(script, ["kctl", "sample", "run", "--out", "d"], cwd=work) == ["dir"]
        assert bash_complete(script, ["kctl", "sample", "run", "--mode", ""]) == ["fast", "safe"]
        files_offered = bash_complete(script, ["kctl", "sample", "run", "--index", "d"], cwd=work)
        assert sorted(files_offered) == ["data.log", "dir"]
        assert bash_complete(script, ["kctl", "sample", ""]) == ["run"]
    if shutil.which("zsh"):
        subprocess.run(["zsh", "-n", str(tmp_path / "completions" / "_kctl")], check=True)
    if shutil.which("fish"):
        subprocess.run(["fish", "--no-execute", str(tmp_path / "completions" / "kctl.fish")], check=True)


def test_help_texts_survive_rich_rendering() -> None:
    """`--help` renders help as Markdown with emoji codes: ``START:END:`` would show an emoji and
    ``<dir>`` would vanish as an HTML tag. Help texts avoid both."""
    from rich.emoji import Emoji

    problems = []
    for cmd in TREE.walk():
        for text in [cmd.help, *(p.help for p in cmd.params)]:
            if Emoji.replace(text) != text:
                problems.append(f"{cmd.name}: an emoji code in {text[:80]!r}")
            if re.search(r"<[A-Za-z][^<>\n]*>", text):
                problems.append(f"{cmd.name}: an <html-like> placeholder in {text[:80]!r}")
    assert problems == []


def test_completions_offer_the_values_of_enumerated_options() -> None:
    bash = gen_docs.generate(TREE)["completions/kctl.bash"]
    for command in ("kctl produce", "kctl perf produce"):
        assert f"'{command} --compression') echo 'choice none gzip snappy lz4 zstd'" in bash
        assert f"'{command} --acks') echo 'choice all -1 1 0'" in bash
    assert "'kctl topic list --format') echo 'choice table json jsonl'" in bash
