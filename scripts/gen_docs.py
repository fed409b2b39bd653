"""Generate kctl's man pages and static shell completions from the command tree.

    python scripts/gen_docs.py           # (re)write man/*.1 and completions/*
    python scripts/gen_docs.py --check   # write nothing; exit 1 if anything is stale or lacks help

Everything comes from the click command tree of `kctl.commands.app.app`, so after adding or
changing a command, run this script and commit its output. Written files:

- man/kctl.1, one page per group (man/kctl-GROUP.1) and per command (man/kctl-GROUP-CMD.1);
  man/kctl-config-show.1 also documents every property (PROPERTIES), from the config definitions
  (`kctl.common.config_def.ConfigDef.describe()` of the broker, topic, producer and consumer tables);
- completions/kctl.bash, completions/_kctl (zsh), completions/kctl.fish: static scripts (TAB
  never starts Python) that complete subcommands at every level, each command's options, the
  values of choice options, and file names for path options and arguments;
- docs/metrics.md: every metric the broker serves on ``metrics.listener`` (name, type, labels,
  meaning, the Kafka MBean it mirrors), from `kctl.broker.metrics.catalog`.

The output is deterministic (no dates), so `--check` can compare it byte for byte.
"""

from __future__ import annotations

import argparse
import enum
import json
import re
import sys
import textwrap
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for _path in (ROOT, ROOT / "scripts"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import typer  # noqa: E402
import typer.main  # noqa: E402
from gen_docs_shell import GENERATED_BY, PROG, first_sentence, render_bash, render_fish, render_zsh  # noqa: E402

from kctl import __version__  # noqa: E402
from kctl.__main__ import DEBUG_ENV  # noqa: E402
from kctl.broker.metrics.catalog import render_reference  # noqa: E402
from kctl.commands.config import definition  # noqa: E402
from kctl.commands.errors import ExitCode  # noqa: E402
from kctl.commands.examples import EXAMPLES  # noqa: E402

MAN_DIR = "man"
METRICS_REFERENCE = "docs/metrics.md"
COMPLETIONS_DIR = "completions"
PROPERTIES_PAGE = (PROG, "config", "show")
"""The command whose man page documents every property, from the config definitions."""
PROPERTY_KINDS = ("broker", "topic", "producer", "consumer")
ENVIRONMENT_NOTES = {
    DEBUG_ENV: "Set to 1 to print a full traceback along with an error message.",
    "NO_COLOR": "Set to any value to disable colors in terminal output.",
}


# -- the command tree, described once ---------------------------------------------------------------
@dataclass(frozen=True)
class ParamDoc:
    """One option or argument, with what the docs and completions need to know about it."""

    kind: str  # "option" | "argument"
    name: str
    opts: tuple[str, ...]  # short forms first; empty for arguments
    help: str
    metavar: str
    value: str  # "flag" | "choice" | "file" | "dir" | "topic" | "group" | "any"
    choices: tuple[str, ...]
    multiple: bool
    required: bool
    variadic: bool
    envvar: str | None
    default: str | None

    @property
    def takes_value(self) -> bool:
        return self.value != "flag"

    @property
    def label(self) -> str:
        return ", ".join(self.opts) if self.opts else self.metavar


@dataclass(frozen=True)
class CommandDoc:
    """One command or group: its path from the root (`("kctl", "config", "show")`) and contents."""

    path: tuple[str, ...]
    help: str
    short_help: str
    params: tuple[ParamDoc, ...]
    subcommands: tuple[CommandDoc, ...]
    is_group: bool

    @property
    def name(self) -> str:
        return " ".join(self.path)

    @property
    def page(self) -> str:
        return "-".join(self.path)

    @property
    def options(self) -> list[ParamDoc]:
        return [p for p in self.params if p.kind == "option"]

    @property
    def arguments(self) -> list[ParamDoc]:
        return [p for p in self.params if p.kind == "argument"]

    def walk(self) -> Iterator[CommandDoc]:
        yield self
        for sub in self.subcommands:
            yield from sub.walk()


def _choice_text(choice: Any) -> str:
    return str(choice.value) if isinstance(choice, enum.Enum) else str(choice)


def _default_text(param: Any) -> str | None:
    if param.show_default is False:
        return None
    if getattr(param, "is_flag", False):  # only an on/off pair has a default worth naming
        if not param.secondary_opts:
            return None
        return param.opts[0] if param.default else param.secondary_opts[0]
    if isinstance(param.show_default, str):
        return param.show_default
    default = param.default
    if default is None or callable(default) or default in ((), []):
        return None
    if isinstance(default, list | tuple):
        return ",".join(_choice_text(d) for d in default)
    return _choice_text(default)


def _value_kind(param: Any) -> tuple[str, tuple[str, ...]]:
    """What an option takes, from its click parameter type (the same under every typer version)."""
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return "flag", ()
    param_type = param.type
    choices = getattr(param_type, "choices", None)
    if choices:
        return "choice", tuple(_choice_text(c) for c in choices)
    if getattr(param_type, "name", "") == "filename":  # click.File
        return "file", ()
    if hasattr(param_type, "dir_okay") and hasattr(param_type, "file_okay"):  # click.Path
        return ("dir" if param_type.dir_okay and not param_type.file_okay else "file"), ()
    return "any", ()


def _short_first(opts: Sequence[str]) -> tuple[str, ...]:
    return tuple(sorted(opts, key=lambda opt: opt.startswith("--")))


NAMES_FROM_CLUSTER = {"TOPIC": "topic", "GROUP": "group", "OTHER": "group"}
"""Metavars (before any ``[``, ``:`` or ``...``) whose values are names a running cluster has: the
completions ask `kctl complete topics|groups` for them."""
NEW_NAMES = {(PROG, "topic", "create"), (PROG, "mirror"), (PROG, "group", "migrate")}
"""Commands whose topic or group values are not names of the cluster they talk to (topics still to
be created; the mirror's source groups; ZooKeeper consumer groups to migrate)."""


def _cluster_names(metavar: str, path: tuple[str, ...]) -> str | None:
    if path in NEW_NAMES:
        return None
    return NAMES_FROM_CLUSTER.get(re.split(r"[\[\]:.]", metavar.strip("[]"))[0])


def describe_param(param: Any, path: tuple[str, ...] = (PROG,)) -> ParamDoc:
    kind = param.param_type_name
    value, choices = _value_kind(param)
    opts = _short_first([*param.opts, *param.secondary_opts]) if kind == "option" else ()
    if param.metavar:
        metavar = param.metavar
    elif kind == "argument":
        metavar = (param.name or "arg").upper()
    elif value == "choice":
        metavar = "|".join(choices)
    elif value in ("file", "dir"):
        metavar = value.upper()
    else:
        metavar = (param.name or "value").upper()
    if value == "any":
        value = _cluster_names(metavar, path) or value
    envvar = param.envvar if isinstance(param.envvar, str) else None
    if isinstance(param.envvar, list | tuple):
        envvar = " ".join(param.envvar) or None
    return ParamDoc(
        kind=kind,
        name=param.name or "",
        opts=opts,
        help=(param.help or "").strip(),
        metavar=metavar,
        value=value,
        choices=choices,
        multiple=bool(param.multiple),
        required=bool(param.required),
        variadic=param.nargs == -1,
        envvar=envvar,
        default=_default_text(param),
    )


def describe(command: Any, path: tuple[str, ...] = (PROG,), parent: Any = None) -> CommandDoc:
    """Describe a click command and everything below it."""
    ctx = typer.Context(command, info_name=path[-1], parent=parent, **(command.context_settings or {}))
    visible = [p for p in command.get_params(ctx) if not getattr(p, "hidden", False)]
    params = tuple(describe_param(p, path) for p in visible)
    commands = getattr(command, "commands", None)
    subcommands = ()
    if commands is not None:
        subcommands = tuple(
            describe(commands[name], (*path, name), ctx)
            for name in command.list_commands(ctx)
            if not commands[name].hidden
        )
    help_text = (command.help or "").strip()
    return CommandDoc(
        path=path,
        help=help_text,
        short_help=(command.short_help or first_sentence(help_text)).strip(),
        params=params,
        subcommands=subcommands,
        is_group=commands is not None,
    )


def kctl_tree() -> CommandDoc:
    from kctl.commands.app import app

    return describe(typer.main.get_command(app))


GROUP_HELP_MODULE = "kctl/commands/group_help.py"


def render_group_help() -> str:
    """kctl/commands/group_help.py: each group's help as `kctl --help` lists it, so that help
    imports none of the group modules (`kctl.commands.app.help_app`)."""
    from kctl.commands.app import COMMAND_GROUPS, app

    root = typer.main.get_command(app)
    rows = []
    for _, name in COMMAND_GROUPS:
        group = root.commands[name]  # type: ignore[attr-defined]
        text = (group.help or "").strip()
        lines = text.splitlines(keepends=True) or [""]
        pieces = [
            json.dumps(piece)
            for line in lines
            for piece in textwrap.wrap(line, 80, drop_whitespace=False, replace_whitespace=False) or [line]
        ]
        pieces[-1] += ","
        rows += [f"    {json.dumps(name)}: (", *(f"        {piece}" for piece in pieces)]
        rows += [f"        {bool(group.hidden)!r},", "    ),"]
    return "\n".join(
        [
            '"""Every command group\'s help as `kctl --help` lists it, so that help imports no group',
            f'module: {GENERATED_BY}."""',
            "",
            "GROUP_HELP: dict[str, tuple[str, bool]] = {",
            *rows,
            "}",
            '"""Group name -> (help text, hidden)."""',
            "",
        ]
    )


def missing_help(tree: CommandDoc) -> list[str]:
    """Every command, option and argument without help text."""
    problems = []
    for cmd in tree.walk():
        if not cmd.help:
            problems.append(f"missing help: command '{cmd.name}'")
        if not cmd.subcommands and not EXAMPLES.get(cmd.name):
            problems.append(f"missing examples: command '{cmd.name}' (kctl/commands/examples.py)")
        for param in cmd.params:
            if not param.help:
                problems.append(f"missing help: {param.kind} {param.label} of '{cmd.name}'")
    return problems


# -- man pages ---------------------------------------------------------------------------------------
def _roff(text: str) -> str:
    """Escape text for roff: backslashes, hyphens, non-ASCII characters (as groff's \\[uXXXX]), and
    control characters at line starts."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    text = "".join(ch if ord(ch) < 128 else f"\\[u{ord(ch):04X}]" for ch in text)
    return "\n".join("\\&" + line if line.startswith((".", "'")) else line for line in text.split("\n"))


def _roff_paragraphs(text: str) -> list[str]:
    """Help text as roff: paragraphs filled; a paragraph starting with a \\b line kept verbatim."""
    out: list[str] = []
    for index, paragraph in enumerate(p for p in re.split(r"\n\s*\n", text.strip()) if p.strip()):
        if index:
            out.append(".PP")
        lines = paragraph.split("\n")
        if lines[0].strip() == "\b":
            out += [".nf", *(_roff(line) for line in lines[1:]), ".fi"]
        else:
            out.append(_roff(" ".join(line.strip() for line in lines)))
    return out


def _bold(text: str) -> str:
    return f"\\fB{_roff(text)}\\fR"


def _italic(text: str) -> str:
    return f"\\fI{_roff(text)}\\fR"


def _argument_text(param: ParamDoc) -> str:
    name = param.metavar.removesuffix("...")
    return _italic(name) + ("..." if param.variadic or name != param.metavar else "")


def _param_heading(param: ParamDoc) -> str:
    if param.kind == "argument":
        return _argument_text(param)
    heading = ", ".join(_bold(opt) for opt in param.opts)
    if param.takes_value:
        heading += " " + _italic(param.metavar)
    return heading


def _param_body(param: ParamDoc) -> str:
    parts = [param.help.rstrip(".") + "." if param.help else ""]
    if param.value == "choice" and param.metavar != "|".join(param.choices):
        parts.append(f"One of: {', '.join(param.choices)}.")
    if param.required and param.kind == "option":
        parts.append("Required.")
    if param.default is not None:
        parts.append(f"Default: {param.default}.")
    if param.envvar:
        parts.append(f"Environment: {param.envvar}.")
    return _roff(" ".join(p for p in parts if p))


def _synopsis(cmd: CommandDoc) -> list[str]:
    words = [f".B {_roff(cmd.name)}", "[\\fIOPTIONS\\fR]"]
    if cmd.is_group and cmd.subcommands:
        words.append("\\fICOMMAND\\fR [\\fIARGS\\fR]...")
    for arg in cmd.arguments:
        text = _argument_text(arg)
        words.append(text if arg.required else f"[{text}]")
    return words


def _environment(cmd: CommandDoc) -> list[str]:
    lines: list[str] = []
    seen: set[str] = set()
    for sub in cmd.walk():
        for param in sub.options:
            if param.envvar and param.envvar not in seen:
                seen.add(param.envvar)
                long_opt = param.opts[-1]
                note = f"Default for {long_opt} when it is not given. {param.help}".strip()
                lines += [".TP", f".B {_roff(param.envvar)}", _roff(note)]
    for name, note in ENVIRONMENT_NOTES.items():
        lines += [".TP", f".B {_roff(name)}", _roff(note)]
    return lines


def _properties_section() -> list[str]:
    """A PROPERTIES section: every property of each definition (``ConfigDef.describe()`` rows)."""
    lines = [
        ".SH PROPERTIES",
        _roff(
            "The properties kctl knows, by kind (the option of kctl config show that lists them), "
            "with type, default, valid values, importance and update mode."
        ),
    ]
    for kind in PROPERTY_KINDS:
        lines.append(f".SS {kind.capitalize()} properties (\\-\\-{kind})")
        for row in definition(kind).describe():
            facts = [f"Type: {row['type']}", f"default: {row['default'] or 'null'}"]
            if row["valid_values"]:
                facts.append(f"valid values: {row['valid_values']}")
            facts += [f"importance: {row['importance']}", f"update mode: {row['dynamic']}"]
            if row["synonyms"]:
                facts.append(f"synonyms: {', '.join(row['synonyms'])}")
            doc = row["documentation"].rstrip(".")
            text = (f"{doc}. " if doc else "") + "; ".join(facts) + "."
            lines += [".TP", f".B {_roff(row['name'])}", _roff(text)]
    return lines


def examples_of(cmd: CommandDoc) -> list[tuple[str, str]]:
    """A command's examples; a group's are the first example of each of its commands."""
    if cmd.path == (PROG,) or not cmd.subcommands:
        return list(EXAMPLES.get(cmd.name, ()))
    return [examples_of(sub)[0] for sub in cmd.subcommands if examples_of(sub)]


def _examples_section(cmd: CommandDoc) -> list[str]:
    lines = []
    for what, command in examples_of(cmd):
        lines += [".PP", _roff(what.rstrip(".") + ":"), ".RS 4", ".nf", f"\\fB{_roff(command)}\\fR", ".fi"]
        lines.append(".RE")
    return [".SH EXAMPLES", *lines] if lines else []


def render_man_page(cmd: CommandDoc, tree: CommandDoc) -> str:
    lines = [
        f'.\\" {cmd.page}.1: {GENERATED_BY}',
        f'.TH "{_roff(cmd.page.upper())}" "1" "" "{PROG} {__version__}" "{PROG} manual"',
        ".SH NAME",
        f"{_roff(cmd.page)} \\- {_roff(cmd.short_help)}",
        ".SH SYNOPSIS",
        *_synopsis(cmd),
        ".SH DESCRIPTION",
        *_roff_paragraphs(cmd.help),
    ]
    if cmd.subcommands:
        lines.append(".SH COMMANDS")
        for sub in cmd.subcommands:
            see = f"{_roff(sub.short_help)}. See \\fB{_roff(sub.page)}\\fR(1)."
            lines += [".TP", f".B {_roff(sub.path[-1])}", see]
    if cmd.arguments:
        lines.append(".SH ARGUMENTS")
        for param in cmd.arguments:
            lines += [".TP", _param_heading(param), _param_body(param)]
    lines.append(".SH OPTIONS")
    for param in cmd.options:
        lines += [".TP", _param_heading(param), _param_body(param)]
    if cmd.path == PROPERTIES_PAGE:
        lines += _properties_section()
    lines.append(".SH EXIT STATUS")
    for code in ExitCode:
        lines += [".TP", f".B {int(code)}", _roff(code.description)]
    lines += [".SH ENVIRONMENT", *_environment(cmd), *_examples_section(cmd), ".SH SEE ALSO"]
    related = [tree.page] if cmd.path != tree.path else []
    if len(cmd.path) > 2:
        related.append("-".join(cmd.path[:-1]))
    related += [sub.page for sub in cmd.subcommands]
    lines.append(", ".join(f"\\fB{_roff(page)}\\fR(1)" for page in related))
    return "\n".join(lines) + "\n"


# -- writing and checking ----------------------------------------------------------------------------
def generate(tree: CommandDoc) -> dict[str, str]:
    """Every generated file: path relative to the repository root -> content."""
    files = {f"{MAN_DIR}/{cmd.page}.1": render_man_page(cmd, tree) for cmd in tree.walk()}
    files[f"{COMPLETIONS_DIR}/{PROG}.bash"] = render_bash(tree)
    files[f"{COMPLETIONS_DIR}/_{PROG}"] = render_zsh(tree)
    files[f"{COMPLETIONS_DIR}/{PROG}.fish"] = render_fish(tree)
    files[GROUP_HELP_MODULE] = render_group_help()
    files[METRICS_REFERENCE] = render_reference()
    return files


def _existing_man_pages(root: Path) -> set[str]:
    return {f"{MAN_DIR}/{p.name}" for p in (root / MAN_DIR).glob(f"{PROG}*.1")}


def stale_files(files: dict[str, str], root: Path) -> list[str]:
    """Generated files that are missing, differ, or are left over from removed commands."""
    problems = []
    for rel, content in files.items():
        path = root / rel
        if not path.exists():
            problems.append(f"missing: {rel}")
        elif path.read_text(encoding="utf-8") != content:
            problems.append(f"stale: {rel}")
    problems += [f"extra: {rel}" for rel in sorted(_existing_man_pages(root) - files.keys())]
    return problems


def write_files(files: dict[str, str], root: Path) -> list[str]:
    """Write what changed and remove left-over man pages; returns the paths touched."""
    touched = []
    for rel, content in files.items():
        path = root / rel
        if not path.exists() or path.read_text(encoding="utf-8") != content:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8", newline="\n")
            touched.append(rel)
    for rel in sorted(_existing_man_pages(root) - files.keys()):
        (root / rel).unlink()
        touched.append(rel)
    return touched


def check(tree: CommandDoc, root: Path) -> list[str]:
    """Everything `--check` reports: missing help text, then stale, missing and extra files."""
    return missing_help(tree) + stale_files(generate(tree), root)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Generate kctl's man pages, shell completions and metrics reference."
    )
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if anything is stale")
    parser.add_argument("--root", type=Path, default=ROOT, help="repository root (default: this checkout)")
    args = parser.parse_args(argv)
    tree = kctl_tree()
    if args.check:
        problems = check(tree, args.root)
        for problem in problems:
            print(f"gen_docs: {problem}", file=sys.stderr)
        if problems:
            print("gen_docs: add any missing help, then run `python scripts/gen_docs.py`", file=sys.stderr)
            return 1
        return 0
    problems = missing_help(tree)
    for problem in problems:
        print(f"gen_docs: {problem}", file=sys.stderr)
    touched = write_files(generate(tree), args.root)
    for rel in touched:
        print(f"gen_docs: updated {rel}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
