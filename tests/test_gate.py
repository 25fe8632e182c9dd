"""Suppressions change what is reported, never what is built: every rule that is not
suppressible still stops `--emit plan` and `pipec.load` with its own message, whatever
`--ignore`, `--select` or an inline `# pipec: ignore[...]` says; the suppressible ones, once
suppressed, let the plan through."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from harness import LOAD_TIME_RULES, expected_diagnostics
from pipec.compiler import codes, compile_file, load_settings
from pipec.compiler.cli import main
from pipec.compiler.codes import BY_CODE, EXAMPLES, RULES
from pipec.compiler.config import override

FIRING = {p.name.split("_", 1)[0]: p for p in sorted(EXAMPLES.glob("PC*.pipe")) if not p.stem.endswith("_ok")}
# checked when the file is compiled (PC316 is checked against the device, when it is loaded)
UNSUPPRESSIBLE = [r.code for r in RULES if not r.suppressible and r.severity is codes.Severity.ERROR
                  and r.code not in LOAD_TIME_RULES]
# those whose example marks the finding on a line of the .pipe itself (PC101's parse stops first)
MARKED_INLINE = [c for c in UNSUPPRESSIBLE if c != "PC101"
                 and re.search(rf"# error: \[{c}\]\s*$", FIRING[c].read_text(), re.MULTILINE)]
# the firing fixtures whose every finding is suppressible, and that reach the plan stage
SUPPRESSIBLE_ONLY = [
    code for code, path in FIRING.items()
    if BY_CODE[code].suppressible and code not in ("PC001", "PC002")
    and all(BY_CODE[c].suppressible for *_, c in expected_diagnostics(path))
]


def emit_plan(capsys, path: Path, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in (path, "--emit", "plan", *args)])
    out, err = capsys.readouterr()
    return code, out, err


def messages(path: Path, code: str) -> list[str]:
    result = compile_file(path, load_settings(path), until="check")
    return [d.message for d in result.diagnostics if d.code == code]


def test_the_table_splits_the_rules_as_documented():
    assert {r.code for r in RULES if r.suppressible} == {
        "PC001", "PC002", "PC003", "PC109", "PC304", "PC314", "PC323", "PC401", "PC402", "PC403", "PC404"}
    assert {r.code for r in RULES if r.waivable} == {"PC305", "PC306", "PC307"}
    assert not any(r.waivable and r.suppressible for r in RULES)


@pytest.mark.parametrize("code", UNSUPPRESSIBLE)
@pytest.mark.parametrize("how", ["ignore", "select"])
def test_an_unsuppressible_error_stops_the_plan_whatever_the_selection(capsys, tmp_path, code, how):
    path = FIRING[code]
    real = messages(path, code)
    assert real, f"{path.name} does not fire {code}"
    selection = ["--ignore", code] if how == "ignore" else ["--select", "PC4"]
    plan = tmp_path / "plan.json"
    status, _, err = emit_plan(capsys, path, *selection, "-o", plan, "--format", "concise")
    assert status != 0 and not plan.exists()
    assert f"[{code}]" in err or f"{code} " in err
    assert any(message in err for message in real), err


@pytest.mark.parametrize("code", MARKED_INLINE)
def test_an_inline_suppression_of_an_unsuppressible_rule_is_reported_and_silences_nothing(
        capsys, tmp_path, code):
    folder = tmp_path / "examples"
    shutil.copytree(EXAMPLES, folder)
    path = folder / FIRING[code].name
    lines = path.read_text().splitlines()
    marked = [i for i, line in enumerate(lines) if re.search(rf"# error: \[{code}\]", line)]
    for i in marked:
        lines[i] = re.sub(r"#.*$", f"# pipec: ignore[{code}] the test says so", lines[i])
    path.write_text("\n".join(lines) + "\n")
    status, _, err = emit_plan(capsys, path, "--format", "concise")
    assert status != 0
    assert f"{code} ({BY_CODE[code].name}) cannot be suppressed" in err
    assert len(re.findall(rf"\[{code}\]|: {code} ", err)) >= len(marked), err


@pytest.mark.parametrize("code", SUPPRESSIBLE_ONLY)
def test_a_suppressed_judgeable_finding_lets_the_plan_through(capsys, tmp_path, code):
    plan = tmp_path / "plan.json"
    if BY_CODE[code].severity is codes.Severity.ERROR:
        assert emit_plan(capsys, FIRING[code], "-o", plan)[0] != 0
    status, _, err = emit_plan(capsys, FIRING[code], "--ignore", code, "-o", plan)
    assert status == 0 and plan.exists(), err


def test_ignoring_in_pyproject_builds_nothing_either(capsys, tmp_path):
    folder = tmp_path / "project"
    shutil.copytree(EXAMPLES, folder)
    (folder / "pyproject.toml").write_text('[tool.pipec]\nignore = ["PC1", "PC2", "PC3"]\n')
    path = folder / FIRING["PC203"].name
    status, _, err = emit_plan(capsys, path, "--format", "concise")
    assert status != 0 and "PC203" in err


def test_pipec_load_refuses_with_the_real_error():
    from pipec.runtime import PipelineError, load

    path = FIRING["PC201"]
    with pytest.raises(PipelineError) as refused:  # before any GPU is needed
        load(path)
    assert messages(path, "PC201")[0] in refused.value.render(color=False)


def test_the_compilation_has_no_plan_when_only_a_hidden_error_stands():
    path = FIRING["PC206"]
    result = compile_file(path, override(load_settings(path), ignore=("PC206",), select=("PC4",)))
    assert result.plan is None
    assert {d.code for d in result.diagnostics} >= {"PC206"}
