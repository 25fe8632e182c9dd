"""`pipec build` and `piperun DIR` from the outside: the same input gives the same bytes, the
manifest hashes every file, what `--check` refuses is refused with the same diagnostics, a
failed build leaves nothing half-written, and piperun runs a bundle as it runs its file."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from fake_cuda import fake_driver
from pipec.compiler import bundle as bundle_module
from pipec.compiler.cli import main as pipec
from pipec.compiler.toolchain import CompileFailed

ROOT = Path(__file__).resolve().parents[1]
RL_STEP = ROOT / "pipelines" / "rl_step.pipe"
GEMM_MLP = ROOT / "pipelines" / "examples" / "gemm_mlp.pipe"
LIVE = ROOT / "tests" / "fixtures" / "runtime" / "live.pipe"
DIRTY = ROOT / "compiler" / "explanations" / "examples" / "PC302_baked_per_step_value.pipe"


def run(capsys, *args) -> tuple[int, str, str]:
    code = pipec([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("pipe, options", [(RL_STEP, ["--arch", "sm_90", "--arch", "sm_100"]),
                                           (GEMM_MLP, ["-D", 'DT="bf16"'])], ids=["rl_step", "gemm_mlp_bf16"])
def test_the_same_input_builds_the_same_bytes(pipe, options, capsys, tmp_path):
    assert run(capsys, "build", pipe, "-o", tmp_path / "a", *options)[0] == 0
    assert run(capsys, "build", pipe, "-o", tmp_path / "b", *options)[0] == 0
    first, second = files(tmp_path / "a"), files(tmp_path / "b")
    assert first == second and len(first) > 3


def test_the_manifest_hashes_every_other_file_and_the_plan_is_emit_plans(capsys, tmp_path):
    out = tmp_path / "bundle"
    assert run(capsys, "build", GEMM_MLP, "-o", out, "--arch", "sm_90,sm_120") == (0, "", "")
    manifest = json.loads((out / "manifest.json").read_text())
    written = files(out)
    assert (out / "manifest.json").read_text() == json.dumps(manifest, sort_keys=True, indent=1) + "\n"
    assert manifest["files"] == {path: "sha256:" + hashlib.sha256(data).hexdigest()
                                 for path, data in written.items() if path != "manifest.json"}
    assert {k: manifest[k] for k in ("format", "format_version", "readers", "source", "archs")} == {
        "format": "pipec-bundle", "format_version": 2, "readers": [1, 2], "source": str(GEMM_MLP),
        "archs": ["sm_90", "sm_120"]}
    modules = len(json.loads(written["plan.json"])["modules"])
    assert {p for p in written if p.startswith("modules/")} == {
        f"modules/{i}.{kind}" for i in range(modules) for kind in ("sm_90.cubin", "sm_120.cubin", "ptx")}
    assert {p for p in written if p.startswith("buffers/")} == {f"buffers/{b}.bin" for b in ("x", "w1", "w2", "dy")}
    code, plan, _ = run(capsys, GEMM_MLP, "--emit", "plan", "--arch", "sm_90")
    assert code == 0 and written["plan.json"].decode() == plan


def test_build_refuses_what_check_refuses_with_the_same_diagnostics(capsys, tmp_path):
    out = tmp_path / "bundle"
    code, _, emitted = run(capsys, DIRTY, "--emit", "plan")
    assert code == 1
    code, stdout, err = run(capsys, "build", DIRTY, "-o", out)
    assert (code, stdout, err) == (1, "", emitted) and "error[PC302]" in err
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_a_failed_build_leaves_the_old_bundle_and_no_temporary_folder(capsys, tmp_path, monkeypatch):
    out = tmp_path / "bundle"
    assert run(capsys, "build", LIVE, "-o", out)[0] == 0
    before = files(out)

    def failing(plan, arch, target="cubin"):
        raise CompileFailed("live.cu(3): error: the disk is gone\nmore log", "nvrtc")
    monkeypatch.setattr(bundle_module, "module_binaries", failing)
    code, _, err = run(capsys, "build", LIVE, "-o", out)
    assert code == 2 and err == "pipec: error: a kernel module does not compile: live.cu(3): error: the disk is gone\n"
    assert files(out) == before and [p.name for p in tmp_path.iterdir()] == ["bundle"]
    monkeypatch.undo()
    assert run(capsys, "build", LIVE, "-o", out, "-D", "FACTOR=3.0")[0] == 0  # a bundle is replaced
    assert files(out) != before and [p.name for p in tmp_path.iterdir()] == ["bundle"]


@pytest.mark.parametrize("setup, args, message", [
    (lambda d: (d / "notes").mkdir() or (d / "notes" / "a.txt").write_text("x"), ["-o", "{d}/notes"],
     "{d}/notes exists and is not a bundle (it has no manifest.json)"),
    (lambda d: None, ["-o", "{d}/b", "--arch", "sm_90,sm_90"], "an architecture is given twice: sm_90, sm_90"),
    (lambda d: None, ["-o", "{d}/b", "--arch", "sm_7"], "architecture `sm_7` is not supported by NVRTC"),
    (lambda d: None, ["-o", "{d}/b", "-D", "NOPE=1"], None),
])
def test_build_usage_errors_are_one_line(setup, args, message, capsys, tmp_path):
    setup(tmp_path)
    code, _, err = run(capsys, "build", LIVE, *(a.format(d=tmp_path) for a in args))
    if message is None:  # a constant the file lacks: the compiler's own diagnostic, no bundle
        assert code == 1 and "NOPE" in err and not (tmp_path / "b").exists()
        return
    assert code == 2 and err.count("\n") == 1 and message.format(d=tmp_path) in err


def test_build_without_output_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as stopped:
        pipec(["build", str(LIVE)])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and err.count("\n") == 1 and "-o/--output" in err


def _piperun(monkeypatch, capsys, target: Path, *args: str) -> tuple[int, list[dict], str]:
    from pipec.runtime import cli, driver

    monkeypatch.setattr(driver, "cuda_driver", lambda: fake_driver(LIVE))
    code = cli.main([str(target), "--no-progress", *args])
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines() if line.startswith("{")], err


def _timeless(events: list[dict]) -> list[dict]:
    return [{k: v for k, v in e.items() if k not in ("wall_s", "steps_per_s", "gpu_us_per_step")} for e in events]


def test_piperun_runs_a_bundle_as_it_runs_its_file(monkeypatch, capsys, tmp_path):
    out = tmp_path / "bundle"
    assert run(capsys, "build", LIVE, "-o", out)[0] == 0
    code, from_file, _ = _piperun(monkeypatch, capsys, LIVE, "--steps", "6", "--log-every", "3", "--json")
    assert code == 0
    code, from_bundle, err = _piperun(monkeypatch, capsys, out, "--steps", "6", "--log-every", "3", "--json")
    assert code == 0 and _timeless(from_bundle) == _timeless(from_file) and len(from_file) == 3
    assert err.startswith(f"piperun: {from_file[-1]['pipe']} on Fake H200 (sm_90")


@pytest.mark.parametrize("args", [["-D", "FACTOR=2"], ["--steps-per-launch", "2"], ["--lanes", "2"]])
def test_piperun_refuses_compiling_options_with_a_bundle(args, monkeypatch, capsys, tmp_path):
    out = tmp_path / "bundle"
    assert run(capsys, "build", LIVE, "-o", out)[0] == 0
    code, _, err = _piperun(monkeypatch, capsys, out, "--steps", "2", "--log-every", "2", *args)
    assert code == 2 and err.count("\n") == 1 and f"{args[0]} compiles the pipeline, and {out} is a bundle" in err


def test_piperun_sets_a_bundle_constant_as_it_sets_its_files(monkeypatch, capsys, tmp_path):
    out = tmp_path / "bundle"
    assert run(capsys, "build", LIVE, "-o", out)[0] == 0
    updates = ["--set", "FACTOR=4.0@2", "--set", "BLOCK=256@2", "--set", "FACTOR=0.5@4"]
    code, from_file, _ = _piperun(monkeypatch, capsys, LIVE, "--steps", "6", "--log-every", "3", "--json", *updates)
    assert code == 0
    code, from_bundle, _ = _piperun(monkeypatch, capsys, out, "--steps", "6", "--log-every", "3", "--json", *updates)
    assert code == 0 and _timeless(from_bundle) == _timeless(from_file)
    assert [e["nodes"] for e in from_bundle if e["event"] == "set"] == [
        ["step/scaled"], ["step/scaled", "step/bump/add_one"], ["step/scaled"]]


@pytest.mark.parametrize("update, message", [
    ("NN=3@2", "--set NN: {out} has no constant `NN`; did you mean `N`?"),
    ("N=500@2", "--set N: `N` cannot change in place: it reaches a buffer's dimension at "),
    ("FACTOR=2*2@2", "--set FACTOR=2*2: a bundle takes numbers and `true`/`false`, not expressions"),
])
def test_piperun_refuses_a_bundle_update_before_the_gpu_in_one_line(update, message, monkeypatch, capsys, tmp_path):
    out = tmp_path / "bundle"
    assert run(capsys, "build", LIVE, "-o", out)[0] == 0
    code, _, err = _piperun(monkeypatch, capsys, out, "--steps", "4", "--set", update)
    assert code == 2 and err.count("\n") == 1 and message.format(out=out) in err


def test_piperun_reports_a_bundle_update_the_program_cannot_take_in_one_line(monkeypatch, capsys, tmp_path):
    out = tmp_path / "bundle"
    assert run(capsys, "build", LIVE, "-o", out)[0] == 0
    code, _, err = _piperun(monkeypatch, capsys, out, "--steps", "4", "--set", "BLOCK=2048@2")
    assert code == 1 and err.count("\n") == 1
    assert "BLOCK = 2048: block.x of `step/bump/add_one` (" in err and "lies outside 1 to 1024" in err


def test_piperun_reports_a_bad_bundle_in_one_line(monkeypatch, capsys, tmp_path):
    out = tmp_path / "bundle"
    assert run(capsys, "build", LIVE, "-o", out)[0] == 0
    (out / "plan.json").write_text("{}")
    code, _, err = _piperun(monkeypatch, capsys, out, "--steps", "2")
    assert code == 2 and err == f"piperun: error: {out}/plan.json does not match its hash in the manifest " \
        f"(2 bytes, sha256:44136fa355b3..., the manifest says {json.loads((out / 'manifest.json').read_text())['files']['plan.json'][:19]}...): it was truncated or changed; rebuild the bundle\n"
