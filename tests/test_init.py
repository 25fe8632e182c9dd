"""`pipec init`: the starter project checks clean and is formatted; it never overwrites. And the
PC110 hint for a pipeline folder beside its kernels' folder without a pyproject.toml."""

from __future__ import annotations

import json

from pipec.compiler.cli import main


def test_the_starter_project_checks_clean(tmp_path, capsys):
    project = tmp_path / "my project"
    assert main(["init", str(project)]) == 0
    assert "created pyproject.toml" in capsys.readouterr().out
    assert sorted(str(p.relative_to(project)) for p in project.rglob("*") if p.is_file()) == [
        ".pre-commit-config.yaml", "kernels/saxpy.cu", "pipelines/step.pipe", "pyproject.toml"]
    assert 'name = "my-project"' in (project / "pyproject.toml").read_text()
    assert main(["--check", "--format", "json", str(project / "pipelines")]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["format", "--check", str(project)]) == 0


def test_init_in_the_current_folder_then_pipec_check_without_a_file(tmp_path, capsys, monkeypatch):
    """The first two commands of a new project, word for word: `pipec init`, `pipec --check`."""
    monkeypatch.chdir(tmp_path)
    assert main(["init"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("check it with `pipec --check`")
    assert main(["--check"]) == 0
    assert capsys.readouterr().out == "checked 1 file, 0 findings\n"
    monkeypatch.chdir(tmp_path / "kernels")  # a folder without pipelines is a usage error, not a pass
    assert main(["--check"]) == 2
    assert capsys.readouterr().err.endswith("error: no .pipe file in .\n")


def test_init_never_overwrites(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text("[project]\n")
    assert main(["init", str(tmp_path)]) == 2
    assert "already has pyproject.toml; nothing was written" in capsys.readouterr().err
    assert (tmp_path / "pyproject.toml").read_text() == "[project]\n"
    assert not (tmp_path / "pipelines").exists()


def test_sibling_kernel_folder_without_a_pyproject_gets_the_hint(tmp_path, capsys):
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "k.cu").write_text('extern "C" __global__ void k(float* x) {}\n')
    (tmp_path / "pipelines").mkdir()
    pipe = tmp_path / "pipelines" / "p.pipe"
    pipe.write_text('from "../kernels/k.cu" import k\n')
    assert main(["--check", "--format", "json", str(pipe)]) == 1
    [finding] = json.loads(capsys.readouterr().out)
    assert finding["code"] == "PC110"
    assert "without a pyproject.toml the project is the pipeline's folder" in finding["hint"]
    assert "[tool.pipec]" in finding["hint"] and "pipec init" in finding["hint"]


def test_the_session_of_docs_cli_md(tmp_path, monkeypatch, capsys):
    """The `pipec init` session in docs/cli.md, run word for word."""
    import re
    import shlex
    from pathlib import Path

    from test_doc_examples import blocks

    root = Path(__file__).resolve().parent.parent
    session = next(b.text for b in blocks(root / "docs" / "cli.md")
                   if b.language == "console" and "$ pipec init demo" in b.text)
    monkeypatch.chdir(tmp_path)
    for command, expected in re.findall(r"^\$ (.*)\n((?:[^$].*\n)*)", session, re.M):
        args = shlex.split(command)
        assert args[0] == "pipec" and main(args[1:]) == 0
        assert capsys.readouterr().out == expected
