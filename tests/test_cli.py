"""`pipec` and `piperun` from the outside: exit codes, formats, selection, configuration, explain,
emit, colour, stdin, and every failure as one line."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipec.compiler.cli import main
from pipec.cli.terminal import use_color
from pipec.runtime.cli import main as piperun

ROOT = Path(__file__).parent.parent
RULES = ROOT / "compiler" / "explanations" / "examples"
CLEAN = RULES / "PC302_baked_per_step_value_ok.pipe"
DIRTY = RULES / "PC302_baked_per_step_value.pipe"


@pytest.fixture(autouse=True)
def no_colour_preference(monkeypatch):
    """Colour then depends only on the options and the stream, whatever the caller's shell sets."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)


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
    assert "checked 1 file, 2 findings (2 errors)" in out and "pipec --explain PC302" in out
    assert "Traceback" not in out and ".py" not in out


@pytest.mark.parametrize("fmt", ["json", "sarif", "github", "concise"])
def test_machine_formats(capsys, fmt):
    code, out, _ = run(capsys, DIRTY, "--output-format", fmt)
    assert code == 1
    assert ("checked 1 file" in out) is (fmt == "concise")
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
        assert out.splitlines()[-1] == "checked 1 file, 2 findings (2 errors)"
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
    (tmp_path / "pyproject.toml").write_text(f'[tool.pipec]\nignore = ["PC302"]\nallow-paths = ["{RULES}"]\n')
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
    *findings, summary = out.splitlines()
    assert {line.split(":")[0].rsplit("/", 1)[-1] for line in findings} == {"PC302_baked_per_step_value.pipe"}
    assert summary.startswith(f"checked {len(list(RULES.rglob('*.pipe')))} files, 2 findings")


def one_line(text: str) -> str:
    assert len(text.splitlines()) == 1 and "Traceback" not in text, text
    return text


def test_a_clean_check_says_what_it_checked_except_in_machine_formats(capsys):
    code, out, _ = run(capsys, CLEAN, DIRTY.with_name("PC301_host_branch_ok.pipe"))
    assert code == 0 and out == "checked 2 files, 0 findings\n"
    assert run(capsys, CLEAN, "--output-format", "concise")[1] == "checked 1 file, 0 findings\n"
    assert json.loads(run(capsys, CLEAN, "--output-format", "json")[1]) == []
    assert run(capsys, CLEAN, "--output-format", "github")[1] == ""


def test_a_folder_without_pipe_files_is_a_usage_error(capsys, tmp_path):
    (tmp_path / "notes.txt").write_text("not a pipeline")
    code, out, err = run(capsys, CLEAN, tmp_path)
    assert code == 2 and out == "" and one_line(err) == f"pipec: error: no .pipe file in {tmp_path}\n"


def test_output_format_from_the_environment(capsys, monkeypatch):
    monkeypatch.setenv("PIPEC_OUTPUT_FORMAT", "json")
    assert json.loads(run(capsys, DIRTY)[1])[0]["code"] == "PC302"
    assert run(capsys, DIRTY, "--format", "concise")[1].count("error[PC302]") == 2
    monkeypatch.setenv("PIPEC_OUTPUT_FORMAT", "yaml")
    code, out, err = run(capsys, DIRTY)
    assert code == 2 and out == ""
    assert one_line(err).startswith("pipec: error: PIPEC_OUTPUT_FORMAT=yaml is not an output format (choose")


def test_output_into_a_missing_folder_or_onto_a_folder(capsys, tmp_path):
    code, _, err = run(capsys, CLEAN, "--emit", "plan", "-o", tmp_path / "missing" / "plan.json")
    assert code == 2 and one_line(err).endswith("plan.json: No such file or directory\n")
    code, _, err = run(capsys, DIRTY, "-o", tmp_path)
    assert code == 2 and one_line(err) == f"pipec: error: cannot write {tmp_path}: Is a directory\n"
    code, out, _ = run(capsys, DIRTY, "-o", tmp_path / "report.txt")
    assert code == 1 and out == "" and "error[PC302]" in (tmp_path / "report.txt").read_text()


def test_statistics_count_findings_per_code(capsys, tmp_path):
    code, out, _ = run(capsys, DIRTY, "--statistics")
    assert code == 1 and out == "2\tPC302\tbaked-per-step-value\nchecked 1 file, 2 findings (2 errors)\n"
    code, out, _ = run(capsys, DIRTY, CLEAN, "--statistics", "--output-format", "json")
    assert code == 1 and json.loads(out) == [{"code": "PC302", "name": "baked-per-step-value", "count": 2}]
    assert run(capsys, CLEAN, "--statistics")[1] == "checked 1 file, 0 findings\n"
    code, _, err = run(capsys, DIRTY, "--statistics", "--output-format", "sarif")
    assert code == 2 and "--statistics goes with" in one_line(err)


def test_stdin_with_a_stdin_filename(capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(DIRTY.read_bytes())))
    code, out, _ = run(capsys, "-", "--stdin-filename", RULES / "from_stdin.pipe", "--format", "concise")
    # kernels.cu is found next to the stdin-filename, and reports carry its name
    assert code == 1 and out.count("from_stdin.pipe:") == 2 and "PC302" in out
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(CLEAN.read_bytes())))
    code, out, _ = run(capsys, "--stdin-filename", RULES / "from_stdin.pipe")  # no FILE: stdin
    assert (code, out) == (0, "checked 1 file, 0 findings\n")
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(CLEAN.read_bytes())))
    code, out, _ = run(capsys, "-", "--format", "concise")  # no stdin-filename: imports from the cwd
    assert code == 1 and out.startswith("stdin.pipe:2:6: error[PC102]: cannot find `kernels.cu`")
    code, _, err = run(capsys, "-", "-")
    assert code == 2 and "stdin (-) can be read only once" in one_line(err)


def test_an_architecture_nvrtc_cannot_target_is_a_usage_error(capsys):
    code, out, err = run(capsys, CLEAN, "--arch", "sm_999")
    assert code == 2 and out == ""
    assert one_line(err).startswith("pipec: error: architecture `sm_999` is not supported by NVRTC ")
    assert "it supports sm_" in err and "sm_90," in err
    assert run(capsys, CLEAN, "--arch", "sm_90a")[0] == 0


def test_version_names_the_nvrtc_in_use():
    result = subprocess.run([sys.executable, "-m", "pipec", "--version"], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.startswith("pipec ")
    assert "(NVRTC 1" in result.stdout and "nvrtc" in result.stdout.split(" from ")[1]


NO_NVRTC = """\
import sys
import cuda.pathfinder
def nowhere(name):
    raise cuda.pathfinder.DynamicLibNotFoundError("no libnvrtc on this machine")
cuda.pathfinder.load_nvidia_dynamic_lib = nowhere
from pipec.{module}.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("module, args", [("compiler", [CLEAN]), ("runtime", [CLEAN, "--steps", "1"])])
def test_without_nvrtc_one_line_and_exit_2(module, args):
    result = subprocess.run([sys.executable, "-c", NO_NVRTC.format(module=module), *map(str, args)],
                            capture_output=True, text=True)
    prog = "pipec" if module == "compiler" else "piperun"
    assert result.returncode == 2 and result.stdout == ""
    expected = f"{prog}: error: cannot compile kernels: NVRTC is not installed (no libnvrtc on this machine)"
    assert one_line(result.stderr).startswith(expected)
    assert "install `pipec[nvrtc12]` or `pipec[nvrtc13]` (checking needs nothing else)" in result.stderr


def test_version_without_nvrtc_says_so():
    result = subprocess.run([sys.executable, "-c", NO_NVRTC.format(module="compiler"), "--version"],
                            capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.endswith(" (NVRTC not found)\n")


@pytest.mark.parametrize("args, code", [([DIRTY, "--format", "json"], 1), (["--version"], 0),
                                        (["--explain", "ALL"], 0)])
def test_a_closed_output_pipe_ends_quietly(args, code):
    process = subprocess.Popen([sys.executable, "-m", "pipec", *map(str, args)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()  # long before pipec has started: its first write meets a closed pipe
    _, err = process.communicate(timeout=60)
    assert err == b"" and process.returncode == code


def test_usage_errors_are_one_line(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--output-format", "xml", str(CLEAN)])
    err = capsys.readouterr().err
    assert info.value.code == 2 and one_line(err).startswith("pipec: error: argument --output-format")
    assert err.rstrip().endswith("(see `pipec --help`)")
    code, _, err = run(capsys)
    assert code == 2 and one_line(err) == (
        "pipec: error: give at least one FILE, - for stdin, or --explain CODE\n")


@pytest.mark.parametrize("flag, env, tty, expected", [
    ("auto", {}, True, True),
    ("auto", {}, False, False),
    ("auto", {"NO_COLOR": "1"}, True, False),
    ("auto", {"NO_COLOR": ""}, True, True),  # empty means unset (no-color.org)
    ("auto", {"FORCE_COLOR": "1"}, False, True),
    ("auto", {"FORCE_COLOR": "0"}, False, True),  # any non-empty value (force-color.org)
    ("auto", {"FORCE_COLOR": "1", "NO_COLOR": "1"}, True, False),
    ("always", {"NO_COLOR": "1"}, False, True),
    ("never", {"FORCE_COLOR": "1"}, True, False),
])
def test_color_precedence(monkeypatch, flag, env, tty, expected):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    stream = io.StringIO()
    stream.isatty = lambda: tty
    assert use_color(flag, stream) is expected


def test_color_reaches_reports_and_errors(capsys, monkeypatch, tmp_path):
    assert "\033[" not in run(capsys, DIRTY)[1]  # captured output is not a terminal
    assert "\033[1;31merror[PC302]:" in run(capsys, DIRTY, "--color", "always")[1]
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert "\033[" in run(capsys, DIRTY, "--format", "concise")[1]
    assert "\033[" not in run(capsys, DIRTY, "--no-color")[1]
    assert "\033[" not in run(capsys, DIRTY, "-o", tmp_path / "r.txt")[1] + (tmp_path / "r.txt").read_text()
    assert "\033[" not in run(capsys, DIRTY, "--format", "json")[1]
    assert run(capsys, tmp_path)[2].startswith("pipec: \033[1;31merror:\033[0m no .pipe file")


def test_piperun_rejects_an_invalid_configuration_in_one_line(capsys, tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.pipec]\nlanes = "many"\n')
    target = tmp_path / "x.pipe"
    target.write_text(CLEAN.read_text())
    code = piperun([str(target), "--color", "never"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert one_line(err).endswith("[tool.pipec] lanes must be a positive integer\n")
    (tmp_path / "pyproject.toml").write_text('[tool.pipec]\narch = "sm_1"\n')
    assert piperun([str(target)]) == 2
    assert "architecture `sm_1` is not supported by NVRTC" in one_line(capsys.readouterr().err)
    with pytest.raises(SystemExit) as info:
        piperun([str(target), "--steps", "-1"])
    assert info.value.code == 2 and one_line(capsys.readouterr().err).startswith("piperun: error: --steps")


@pytest.mark.gpu
def test_piperun_stops_quietly_when_its_output_pipe_closes():
    nodes = ROOT / "tests" / "fixtures" / "runtime" / "nodes.pipe"
    process = subprocess.Popen(
        [sys.executable, "-m", "pipec.runtime.cli", str(nodes), "--steps", "100000", "--log-every", "1",
         "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()  # the first log line meets a closed pipe
    _, err = process.communicate(timeout=300)
    assert process.returncode == 1 and b"Traceback" not in err and b"BrokenPipe" not in err, err


def test_statistics_list_the_most_frequent_code_first(capsys):
    _, out, _ = run(capsys, RULES, "--statistics", "--select", "PC3,PC4")
    *rows, summary = out.splitlines()
    counts = [(-int(count), code) for count, code, _ in (row.split("\t") for row in rows)]
    assert len(counts) > 3 and counts == sorted(counts)
    assert summary.startswith("checked ") and f" files, {-sum(c for c, _ in counts)} findings (" in summary
