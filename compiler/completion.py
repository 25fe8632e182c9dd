"""`pipec completion bash|zsh|fish`: shell completion for `pipec` (its commands too) and
`piperun`, written from their argument parsers, so a new option completes without an edit
here: option names, the choices of options that have them, files for options and arguments
that take paths.

    eval "$(pipec completion bash)"          # in ~/.bashrc
    eval "$(pipec completion zsh)"           # in ~/.zshrc
    pipec completion fish | source           # in ~/.config/fish/config.fish
"""

from __future__ import annotations

import argparse
import importlib
from importlib.metadata import entry_points
from dataclasses import dataclass
from pathlib import Path

from ..cli.arguments import OneLineParser
from ..cli.exits import EXIT_OK
from ..cli.terminal import write_stdout
from .cli import SUBCOMMANDS

SHELLS = ("bash", "zsh", "fish")


@dataclass(frozen=True)
class Option:
    names: tuple[str, ...]
    choices: tuple[str, ...]  # empty: any value, or none
    takes_value: bool
    path: bool  # its value is a file or folder


def options(parser: argparse.ArgumentParser) -> list[Option]:
    found = []
    for action in parser._actions:  # argparse has no public list of its actions
        if not action.option_strings:
            continue
        takes = action.nargs != 0
        found.append(Option(tuple(action.option_strings), tuple(str(c) for c in action.choices or ()),
                            takes, takes and action.type is Path))
    return found


def parsers() -> dict[str, dict[str, argparse.ArgumentParser]]:
    """Command -> subcommand ("" for none) -> its parser: `pipec` with its commands, and every
    other command the installed distribution declares (`piperun`), found through its entry
    points, so that this module names no other part of pipec."""
    from .cli import parser as pipec

    commands = {"": pipec()}
    for name, module in SUBCOMMANDS.items():
        commands[name] = importlib.import_module(f"{__package__}.{module}").parser()
    found = {"pipec": commands}
    for script in entry_points(group="console_scripts"):
        if script.dist is not None and script.dist.name == "pipec" and script.name not in found:
            found[script.name] = {"": importlib.import_module(script.module).parser()}
    return found


def _bash_command(command: str, subcommands: dict[str, argparse.ArgumentParser]) -> str:
    lines = [f"_{command}() {{", '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"',
             '    local sub="" opts=""', '    case "${COMP_WORDS[1]}" in']
    for name in [n for n in subcommands if n]:
        lines.append(f'        {name}) sub={name} ;;')
    lines.append("    esac")
    lines.append('    case "$sub" in')
    # the command's own options last: `*` matches whatever the subcommands left
    for name, parser in sorted(subcommands.items(), key=lambda item: not item[0]):
        lines.append(f'        {name or "*"})')
        words = " ".join(n for o in options(parser) for n in o.names)
        lines.append(f'            opts="{words}"')
        lines.append('            case "$prev" in')
        for option in options(parser):
            if option.choices:
                lines.append(f'                {"|".join(option.names)}) COMPREPLY=($(compgen -W "{" ".join(option.choices)}"'
                             ' -- "$cur")); return ;;')
            elif option.path:
                lines.append(f'                {"|".join(option.names)}) COMPREPLY=($(compgen -f -- "$cur")); return ;;')
            elif option.takes_value:
                lines.append(f'                {"|".join(option.names)}) COMPREPLY=(); return ;;')
        lines += ["            esac", "            ;;"]
    lines.append("    esac")
    commands = " ".join(n for n in subcommands if n)
    lines += ['    if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W "$opts" -- "$cur")); return; fi',
              f'    if [[ $COMP_CWORD == 1 && -n "{commands}" ]]; then',
              f'        COMPREPLY=($(compgen -W "{commands}" -- "$cur") $(compgen -f -- "$cur")); return',
              "    fi",
              '    COMPREPLY=($(compgen -f -- "$cur"))', "}",
              f"complete -o filenames -F _{command} {command}"]
    return "\n".join(lines)


def bash() -> str:
    return "\n\n".join(_bash_command(c, subs) for c, subs in parsers().items()) + "\n"


def zsh() -> str:
    return "autoload -U +X bashcompinit && bashcompinit\n" + bash()


def fish() -> str:
    lines = []
    for command, subcommands in parsers().items():
        names = [n for n in subcommands if n]
        if names:
            lines.append(f"complete -c {command} -n __fish_use_subcommand -a '{' '.join(names)}'")
        for name, parser in subcommands.items():
            condition = f" -n '__fish_seen_subcommand_from {name}'" if name else ""
            for option in options(parser):
                flags = " ".join(f"-l {n[2:]}" if n.startswith("--") else f"-s {n[1:]}" for n in option.names)
                value = (f" -x -a '{' '.join(option.choices)}'" if option.choices
                         else " -r -F" if option.path else " -x" if option.takes_value else "")
                lines.append(f"complete -c {command}{condition} {flags}{value}")
    return "\n".join(lines) + "\n"


def parser() -> OneLineParser:
    p = OneLineParser(prog="pipec completion",
                      description="Print shell completion for pipec and piperun (docs/cli.md).")
    p.add_argument("shell", choices=SHELLS)
    return p


def main(argv: list[str]) -> int:
    shell = parser().parse_args(argv).shell
    write_stdout({"bash": bash, "zsh": zsh, "fish": fish}[shell]())
    return EXIT_OK
