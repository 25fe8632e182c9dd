"""`pipec` from the outside: exit codes, formats, selection, configuration, explain, emit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipec.compiler.cli import main

ROOT = Path(__file__).parent.parent
RULES = ROOT / "compiler" / "explanations" / "examples"
CLEAN = RULES / "PC302_baked_per_step_value_ok.pipe"
DIRTY = RULES / "PC302_baked_per_step_value.pipe"


def run(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_exit_codes(capsys, tmp_path):
    assert run(capsys, CLEAN)[0] == 0
    assert run(capsys, DIRTY)[0] == 1
    assert run(capsys, DIRTY, "--exit-zero")[0] == 0
    bad = tmp_path / "bad.pipe"
    bad.write_text("step {")
    code, out, _ = run(capsys, bad)
    assert code == 2 and "error[PC101]" in out
    code, _, err = run(capsys, tmp_path / "missing.pipe")
    assert code == 2 and "cannot read" in err


def test_text_report_has_location_caret_and_hint(capsys):
    _, out, _ = run(capsys, DIRTY)
    first = out.splitlines()[0]
    assert first.startswith("compiler/explanations/examples/PC302_baked_per_step_value.pipe:10:50: error[PC302]:") or \
        ":10:50: error[PC302]:" in first
    assert "^^^^^ baked at build time" in out
    assert "= help: make the parameter a pointer" in out
    assert "found 2 errors" in out and "pipec --explain PC302" in out
    assert "Traceback" not in out and ".py" not in out


@pytest.mark.parametrize("fmt", ["json", "sarif", "github", "concise"])
def test_machine_formats(capsys, fmt):
    code, out, _ = run(capsys, DIRTY, "--format", fmt)
    assert code == 1
    if fmt == "json":
        items = json.loads(out)
        assert [(d["code"], d["line"], d["column"]) for d in items] == [("PC302", 10, 50), ("PC302", 11, 55)]
        assert all(d["hint"] and d["end_column"] > d["column"] for d in items)
    elif fmt == "sarif":
        doc = json.loads(out)
        assert doc["version"] == "2.1.0"
        run0 = doc["runs"][0]
        ids = [r["id"] for r in run0["tool"]["driver"]["rules"]]
        for result in run0["results"]:
            assert ids[result["ruleIndex"]] == result["ruleId"] == "PC302"
            region = result["locations"][0]["physicalLocation"]["region"]
            assert region["startLine"] in (10, 11) and region["endColumn"] > region["startColumn"]
            assert result["partialFingerprints"]["primaryLocationLineHash"]
    elif fmt == "github":
        lines = out.splitlines()
        assert len(lines) == 2 and lines[0].startswith("::error file=") and ",line=10,col=50," in lines[0]
        assert "%0Ahelp:" in lines[0]
    else:
        assert out.splitlines()[0].endswith("which changes between steps; the graph would keep the value it had when it was built")


def test_select_and_ignore(capsys):
    assert run(capsys, DIRTY, "--ignore", "PC302")[0] == 0
    assert run(capsys, DIRTY, "--ignore", "baked-per-step-value")[0] == 0
    assert run(capsys, DIRTY, "--select", "PC4")[0] == 0
    assert run(capsys, DIRTY, "--select", "PC3")[0] == 1
    with pytest.raises(SystemExit) as info:
        main([str(DIRTY), "--select", "XYZ"])
    assert info.value.code == 2


def test_config_in_pyproject(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text('[tool.pipec]\nignore = ["PC302"]\n')
    target = tmp_path / "x.pipe"
    target.write_text(DIRTY.read_text().replace('"kernels.cu"', f'"{RULES / "kernels.cu"}"'))
    assert run(capsys, target)[0] == 0
    (tmp_path / "pyproject.toml").write_text('[tool.pipec]\nignor = ["PC302"]\n')
    code, _, err = run(capsys, target)
    assert code == 2 and "unknown key in [tool.pipec]: ignor" in err


def test_explain(capsys):
    code, out, _ = run(capsys, "--explain", "PC302")
    assert code == 0 and out.startswith("## PC302 baked-per-step-value")
    assert run(capsys, "--explain", "host-branch")[1].startswith("## PC301")
    code, _, err = run(capsys, "--explain", "PC999")
    assert code == 2 and "not a rule" in err


def test_emit_plan_and_dot(capsys):
    code, out, _ = run(capsys, CLEAN, "--emit", "plan")
    plan = json.loads(out)
    assert code == 0 and plan["pipe_sha256"] and plan["step"] == 0
    kinds = [n["kind"] for n in plan["graphs"][0]["nodes"]]
    assert kinds == ["kernel", "kernel"]
    code, out, _ = run(capsys, CLEAN, "--emit", "dot")
    assert code == 0 and out.startswith("digraph pipec {") and "scale_by_pointer" in out
    code, out, err = run(capsys, DIRTY, "--emit", "plan")
    assert code == 1 and out == "" and "error[PC302]" in err


def test_defines_override_constants(capsys):
    code, out, _ = run(capsys, CLEAN, "--emit", "plan", "-D", "N=128")
    assert code == 0 and json.loads(out)["graphs"][0]["nodes"][0]["block"] == [128, 1, 1]
    code, out, _ = run(capsys, CLEAN, "-D", "M=3")
    assert code == 1 and "`-D M` defines no constant" in out


def test_console_script_runs_without_a_gpu():
    result = subprocess.run([sys.executable, "-m", "pipec", str(CLEAN)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    probe = subprocess.run(
        [sys.executable, "-c", "import sys\nfrom pipec.compiler.cli import main\ncode = main([sys.argv[1]])\n"
         "print(sorted(m for m in sys.modules if m.startswith(('cupy', 'cuda.bindings', 'torch', 'pipec.runtime'))))\n"
         "raise SystemExit(code)", str(CLEAN)], capture_output=True, text=True)
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip().splitlines()[-1] == "[]", "checking imported a GPU library: " + probe.stdout


def test_a_folder_means_every_pipe_file_below_it(capsys):
    code, out, _ = run(capsys, RULES, "--format", "concise", "--select", "PC302")
    assert code == 1
    assert {line.split(":")[0].rsplit("/", 1)[-1] for line in out.splitlines()} == {"PC302_baked_per_step_value.pipe"}
