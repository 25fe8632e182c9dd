"""`pipec completion SHELL`: the bash script completes what the parsers accept, run in a real
bash; zsh's is bash's under bashcompinit; fish's names every option."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from pipec.compiler.completion import bash, fish, zsh


def _complete(script: str, function: str, words: list[str]) -> list[str]:
    words_text = " ".join(f"'{w}'" for w in words)
    program = (f"{script}\nCOMP_WORDS=({words_text}); COMP_CWORD={len(words) - 1}; {function}; "
               'printf "%s\\n" "${COMPREPLY[@]}"')
    run = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True)
    return run.stdout.split()


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
@pytest.mark.parametrize(("words", "expected"), [
    (["pipec", "--emi"], ["--emit"]),
    (["pipec", "f.pipe", "--emit", ""], ["plan", "dot", "svg"]),
    (["pipec", "f.pipe", "--output-format", "s"], ["sarif"]),
    (["pipec", "form"], ["format"]),
    (["pipec", "format", "--d"], ["--diff"]),
    (["pipec", "completion", "--h"], ["--help"]),
    (["piperun", "f.pipe", "--steps-p"], ["--steps-per-launch"]),
])
def test_bash_completes_what_the_parsers_accept(words, expected):
    assert _complete(bash(), f"_{words[0]}", words) == expected


def test_zsh_and_fish():
    assert zsh().startswith("autoload -U +X bashcompinit && bashcompinit\n") and zsh().endswith(bash())
    script = fish()
    assert "complete -c pipec -l emit -x -a 'plan dot svg'" in script
    assert "complete -c pipec -n '__fish_seen_subcommand_from format' -l check" in script
    assert "complete -c piperun -l steps" in script


def test_the_docs_load_each_shell_s_script():
    import re
    from pathlib import Path

    from test_doc_examples import blocks

    from pipec.compiler.completion import SHELLS

    text = next(b.text for b in blocks(Path(__file__).resolve().parent.parent / "docs" / "cli.md")
                if b.language == "console" and "pipec completion" in b.text)
    assert re.findall(r"pipec completion (\w+)", text) == list(SHELLS)
