"""Hostile inputs around a `.pipe` file rather than in it: the environment, symbolic-link loops,
`pyproject.toml` tables of the wrong kind, rule selections that select nothing, standard input
and output that never end or cannot be written, `-o` naming an input, outputs cut short by a
full disk, kernels that would cost the compiler minutes, and Ctrl-C. Each answer is one line
(or a located diagnostic) and an exit status, never a traceback, a silent pass or lost data."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import pipec.runtime.load  # noqa: F401  (the module, which the tests patch)
from pipec.cli.exits import EXIT_INTERRUPTED
from pipec.compiler.cli import main
from pipec.compiler.kernel_analysis import MAX_KERNEL_PARAMS
from pipec.dsl.source import MAX_READ_BYTES
from pipec.files import replacing, write_atomically
from pipec.runtime.process_launchers import DistributedError, launch_from_environment, timeout_from_environment

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "pipelines" / "examples" / "tutorial.pipe"
KERNELS = ROOT / "compiler" / "explanations" / "examples" / "kernels.cu"


def run(*argv: str, stdin=None, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """A front door in a process of its own: what a shell sees (status, stdout, stderr)."""
    return subprocess.run([sys.executable, "-m", *argv], stdin=stdin, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, cwd=ROOT)


def pipec(*argv: str, **kwargs) -> subprocess.CompletedProcess:
    return run("pipec.compiler.cli", *argv, **kwargs)


def one_error_line(stderr: str, prog: str = "pipec") -> str:
    assert "Traceback" not in stderr
    (line,) = stderr.strip().splitlines()
    assert line.startswith(f"{prog}: error: ")
    return line


def check(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


# --- the environment ---------------------------------------------------------------------------

@pytest.mark.parametrize("variable", ["PIPEC_NCCL_TIMEOUT", "PIPEC_RENDEZVOUS_TIMEOUT"])
def test_a_timeout_that_is_no_number_leaves_piperun_version_working(variable):
    result = run("pipec.runtime.cli", "--version", env={variable: "abc"})
    assert result.returncode == 0 and result.stdout.startswith("piperun "), result.stderr


@pytest.mark.parametrize("text", ["abc", "-5", "0", "nan", "inf"])
def test_a_timeout_that_is_no_positive_number_is_one_distributed_error(text):
    with pytest.raises(DistributedError, match=f"PIPEC_NCCL_TIMEOUT='{text}' is not a timeout"):
        timeout_from_environment("PIPEC_NCCL_TIMEOUT", {"PIPEC_NCCL_TIMEOUT": text})
    # and piperun refuses it where it reads the launcher's environment, before any GPU work
    with pytest.raises(DistributedError, match="PIPEC_RENDEZVOUS_TIMEOUT"):
        launch_from_environment({"PIPEC_RENDEZVOUS_TIMEOUT": text})


def test_a_timeout_from_the_environment_is_used():
    assert timeout_from_environment("PIPEC_NCCL_TIMEOUT", {"PIPEC_NCCL_TIMEOUT": "2.5"}) == 2.5
    assert timeout_from_environment("PIPEC_NCCL_TIMEOUT", {}) == 120.0


# --- symbolic-link loops -----------------------------------------------------------------------

def test_a_link_loop_as_file_is_one_line(capsys, tmp_path):
    (tmp_path / "loop.pipe").symlink_to("loop.pipe")
    code, _, err = check(capsys, "--check", str(tmp_path / "loop.pipe"))
    assert code == 2 and "Too many levels of symbolic links" in one_error_line(err)


@pytest.mark.parametrize("statement, name", [('import "lib.pipe"', "lib.pipe"),
                                             ('from "k.cu" import add_one', "k.cu"),
                                             ('buffer b: f32[4] = load("b.npy")', "b.npy")])
def test_a_link_loop_as_import_kernel_source_or_data_is_a_located_diagnostic(capsys, tmp_path, statement, name):
    (tmp_path / name).symlink_to(name)
    (tmp_path / "t.pipe").write_text(statement + "\n")
    code, out, _ = check(capsys, "--check", "--format", "concise", str(tmp_path / "t.pipe"))
    assert code == 1 and out.startswith(f"{tmp_path / 't.pipe'}:1:") and "error[PC1" in out


def test_a_link_loop_as_a_kernel_header_is_a_compile_diagnostic(capsys, tmp_path):
    (tmp_path / "h.cuh").symlink_to("h.cuh")
    (tmp_path / "k.cu").write_text('#include "h.cuh"\n' + KERNELS.read_text())
    (tmp_path / "t.pipe").write_text('from "k.cu" import add_one\n')
    code, out, _ = check(capsys, "--check", "--format", "concise", str(tmp_path / "t.pipe"))
    assert code == 1 and "error[PC106]" in out


# --- pyproject.toml ----------------------------------------------------------------------------

@pytest.mark.parametrize("toml, message", [
    ("tool = 3\n", "`tool` must be a table"),
    ("[tool]\npipec = 3\n", "`tool.pipec` must be a table"),
    ('[tool.pipec]\ninclude-dirs = ["a\\u0000b"]\n', "include-dirs: a path holds a NUL"),
    ('[tool.pipec]\nallow-paths = ["\\u0000"]\n', "allow-paths: a path holds a NUL"),
    ('[tool.pipec]\narch = "sm_90\\u0000"\n', "arch must be a string (without NUL"),
    ('[tool.pipec]\nlanes = true\n', "lanes must be a positive integer"),
    # a selection that selects nothing would pass every file: refused as the command line refuses it
    ('[tool.pipec]\nselect = ["PC999"]\n', "select: `PC999` matches no rule"),
    ('[tool.pipec]\nselect = []\n', "select is empty"),
    ('[tool.pipec]\nselect = [""]\n', "select: `` matches no rule"),
    ('[tool.pipec]\nignore = ["no-such-rule"]\n', "ignore: `no-such-rule` matches no rule"),
])
def test_a_configuration_of_the_wrong_shape_is_one_line(capsys, tmp_path, toml, message):
    (tmp_path / "pyproject.toml").write_text(toml)
    (tmp_path / "t.pipe").write_text("const A = 1 / 0\n")
    code, out, err = check(capsys, "--check", str(tmp_path / "t.pipe"))
    assert code == 2 and out == "" and message in one_error_line(err)


@pytest.mark.parametrize("selection", ["", ",", " , "])
def test_an_empty_select_on_the_command_line_is_a_usage_error(capsys, tmp_path, selection):
    (tmp_path / "t.pipe").write_text("const A = 1 / 0\n")
    with pytest.raises(SystemExit) as exit:
        main(["--check", "--select", selection, str(tmp_path / "t.pipe")])
    assert exit.value.code == 2 and "names no rule" in one_error_line(capsys.readouterr().err)


def test_a_valid_selection_from_the_configuration_still_selects(capsys, tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.pipec]\nselect = ["PC1"]\n')
    (tmp_path / "t.pipe").write_text("const A = 1 / 0\n")
    code, out, _ = check(capsys, "--check", "--format", "concise", str(tmp_path / "t.pipe"))
    assert code == 1 and "error[PC105]" in out


# --- standard input and output -----------------------------------------------------------------

def test_stdin_is_read_no_further_than_a_file():
    with open("/dev/zero", "rb") as zeros:
        result = pipec("--check", "--format", "concise", "-", stdin=zeros, timeout=60)
    assert result.returncode == 2 and "error[PC112]: the file is larger than 4 MiB" in result.stdout


def test_stdin_that_is_not_utf8_is_located_like_a_file():
    result = subprocess.run([sys.executable, "-m", "pipec.compiler.cli", "--format", "concise", "-"],
                            input=b"const A = 1 # \xff\n", capture_output=True, timeout=60, cwd=ROOT)
    assert result.returncode == 2
    assert b"stdin.pipe:1:15: error[PC101]: the file is not UTF-8 text: byte 0xff" in result.stdout


@pytest.mark.parametrize("argv, prog", [
    (("pipec.compiler.cli", "--check", str(TUTORIAL)), "pipec"),
    (("pipec.compiler.cli", "--emit", "plan", str(TUTORIAL)), "pipec"),
    (("pipec.compiler.cli", "--explain", "ALL"), "pipec"),
    (("pipec.compiler.cli", "--help"), "pipec"),
    (("pipec.compiler.cli", "--version"), "pipec"),
    (("pipec.runtime.cli", "--help"), "piperun"),
])
def test_stdout_on_a_full_disk_is_one_line_and_no_success(argv, prog):
    if not stat.S_ISCHR(os.stat("/dev/full").st_mode):
        pytest.skip("/dev/full is no device here (something renamed a file over it)")
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-m", *argv], stdout=full, stderr=subprocess.PIPE, text=True,
                                timeout=60, cwd=ROOT)
    assert result.returncode in (1, 2)
    assert one_error_line(result.stderr, prog).endswith("cannot write to standard output: No space left on device")


# --- outputs ---------------------------------------------------------------------------------

@pytest.mark.parametrize("emit", [(), ("--emit", "plan"), ("--emit", "dot")])
@pytest.mark.parametrize("target", ["t.pipe", "lib.pipe", "kernels.cu"])
def test_o_naming_an_input_is_refused_and_the_input_kept(capsys, tmp_path, emit, target):
    (tmp_path / "kernels.cu").write_text(KERNELS.read_text())
    (tmp_path / "lib.pipe").write_text("const N = 4\n")
    (tmp_path / "t.pipe").write_text('import "lib.pipe"\nfrom "kernels.cu" import add_one\n'
                                     "buffer x: f32[N]\nstep { launch add_one<<<1, N>>>(x, N) }\n")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    code, _, err = check(capsys, *emit, "-o", str(tmp_path / "sub" / ".." / target), str(tmp_path / "t.pipe"))
    assert code == 2 and "names an input of the check" in one_error_line(err)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_a_plan_cut_short_by_a_full_disk_leaves_the_previous_plan(tmp_path):
    """RLIMIT_FSIZE stands for the full disk: writes beyond it fail (EFBIG) as they would."""
    plan = tmp_path / "plan.json"
    plan.write_text('{"previous": true}\n')
    script = ("import resource, signal, sys\n"
              "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
              "resource.setrlimit(resource.RLIMIT_FSIZE, (1000, resource.RLIM_INFINITY))\n"
              "from pipec.compiler.cli import main\n"
              f"sys.exit(main(['--emit', 'plan', '-o', {str(plan)!r}, {str(TUTORIAL)!r}]))\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 2 and "cannot write" in one_error_line(result.stderr)
    assert json.loads(plan.read_text()) == {"previous": True}
    assert [p.name for p in tmp_path.iterdir()] == ["plan.json"]  # no temporary file left


def test_an_output_is_replaced_whole_or_not_at_all(tmp_path):
    target = tmp_path / "report.txt"
    target.write_text("old")
    with pytest.raises(OSError), replacing(target) as temporary:
        temporary.write_text("half of the")
        raise OSError(28, "No space left on device")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["report.txt"]
    write_atomically(target, "new")
    assert target.read_text() == "new" and oct(target.stat().st_mode & 0o777) != "0o600"


def test_an_output_to_a_special_file_is_written_in_place_not_renamed_over(capsys):
    code, _, _ = check(capsys, "--emit", "plan", "-o", "/dev/null", str(TUTORIAL))
    assert code == 0 and stat.S_ISCHR(os.stat("/dev/null").st_mode)
    code, _, err = check(capsys, "--emit", "plan", "-o", "/dev/full", str(TUTORIAL))
    assert code == 2 and "cannot write /dev/full: No space left on device" in one_error_line(err)
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


# --- what pipec hands the kernel compiler ------------------------------------------------------

def _kernel_of(count: int, ctype: str = "char") -> str:
    params = ", ".join(f"{ctype} a{i}" for i in range(count))
    return f'extern "C" __global__ void wide({params}) {{ }}\n'


def test_a_kernel_beyond_the_parameter_bound_is_an_input_limit_before_compiling(capsys, tmp_path):
    (tmp_path / "wide.cu").write_text(_kernel_of(30_000))  # NVRTC: over 5 minutes and 15 GB
    (tmp_path / "t.pipe").write_text('from "wide.cu" import wide\n')
    code, out, _ = check(capsys, "--check", "--format", "concise", str(tmp_path / "t.pipe"))
    assert code == 2 and "wide.cu:1:1: error[PC112]: kernel `wide` has 30000 parameters" in out


def test_a_kernel_at_the_parameter_bound_is_checked(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("PIPEC_NO_CACHE", "1")  # the probe itself, not a cached answer
    (tmp_path / "wide.cu").write_text(_kernel_of(MAX_KERNEL_PARAMS, "int"))
    (tmp_path / "t.pipe").write_text('from "wide.cu" import wide\n')
    code, out, _ = check(capsys, "--check", str(tmp_path / "t.pipe"))
    assert code == 0, out


def test_a_kernel_source_beyond_the_read_limit_is_an_input_limit(capsys, tmp_path):
    (tmp_path / "big.cu").write_text(KERNELS.read_text() + " " * MAX_READ_BYTES)
    (tmp_path / "t.pipe").write_text('from "big.cu" import add_one\n')
    code, out, _ = check(capsys, "--check", "--format", "concise", str(tmp_path / "t.pipe"))
    assert code == 2 and "t.pipe:1:6: error[PC112]: `big.cu` is larger than 4 MiB" in out


# --- Ctrl-C ------------------------------------------------------------------------------------

def _interrupt(*args, **kwargs):
    raise KeyboardInterrupt


def test_ctrl_c_during_a_check_exits_130(capsys, monkeypatch):
    monkeypatch.setattr("pipec.compiler.cli.compile_file", _interrupt)
    code, _, err = check(capsys, "--check", str(TUTORIAL))
    assert code == EXIT_INTERRUPTED == 130 and one_error_line(err) == "pipec: error: interrupted"


def test_ctrl_c_during_a_load_exits_130(capsys, monkeypatch):
    from pipec.runtime import cli as piperun

    monkeypatch.setattr(sys.modules["pipec.runtime.load"], "load", _interrupt)
    code = piperun.main([str(TUTORIAL), "--steps", "1"])
    assert code == 130 and one_error_line(capsys.readouterr().err, "piperun") == "piperun: error: interrupted"


# --- piperun --set -----------------------------------------------------------------------------

def test_set_of_an_unknown_constant_is_refused_before_a_gpu_is_looked_for(capsys, monkeypatch):
    from pipec.runtime import cli as piperun

    monkeypatch.setattr(sys.modules["pipec.runtime.load"], "load", lambda *a, **k: pytest.fail("the load was reached"))
    code = piperun.main([str(ROOT / "pipelines" / "rl_step.pipe"), "--set", "GAMA=0.9@10", "--steps", "20"])
    line = one_error_line(capsys.readouterr().err, "piperun")
    assert code == 2 and "--set GAMA:" in line and "did you mean `GAMMA`?" in line
