"""Stored GEMM algorithms (plan/gemm_algorithms.py) on the fake driver and the fake cuBLASLt: a
pipeline gives its algorithms as the file holds them, `pipec build --gemm-algorithms` stores
them in the bundle (hashed, the same bytes twice) or refuses a bad file in one line, and the
Python runtime runs a bundle's stored algorithm only where the rule allows it, saying why in
`Pipeline.gemm_choices` and in piperun's output. tests/test_native_runtime.py checks that the C
runtime chooses the same way, with the same words."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest

from fake_cublaslt import FakeCublasLt
from fake_cuda import fake_driver
from gemm_plans import buffer, gemm, gemm_plan, matrix
from pipec import load
from pipec.compiler import compile_file, load_settings
from pipec.compiler.bundle import write_bundle
from pipec.compiler.cli import main as pipec
from pipec.plan.bundle_format import FORMAT_VERSION, READERS, BundleError
from pipec.plan.gemm_algorithms import (
    ChosenOn, GemmAlgorithms, StoredAlgorithm, file_json, file_text, gemm_nodes, gemm_spec, read_file,
)
from pipec.runtime import Backends
from pipec.runtime.bundle import load_bundle
from pipec.runtime.cli_reports import gemm_summary
from pipec.runtime.gemm_nodes import GemmChoice
from pipec.runtime.process_launchers import Launch

ROOT = Path(__file__).resolve().parents[1]
GEMM_MLP = ROOT / "pipelines" / "examples" / "gemm_mlp.pipe"
RL_STEP = ROOT / "pipelines" / "rl_step.pipe"
HERE = "Fake H200 (sm_90, 132 SMs, cuBLASLt 130100)"


def algorithm(number: int, workspace: int | None = None) -> str:
    """The fake cuBLASLt's algorithm `number` (every 64-bit word holds it), needing `workspace`."""
    words = [number] * 8 if workspace is None else [number, workspace] + [number] * 6
    return b"".join(w.to_bytes(8, "little") for w in words).hex()


def chosen(path: Path = GEMM_MLP) -> dict:
    """The algorithms file of `path` on the fakes: the heuristic's first for every node."""
    driver = fake_driver(path)
    with load(path, backends=Backends(driver, FakeCublasLt(driver.cu))) as pipeline:
        return pipeline.gemm_algorithms()


@pytest.fixture(scope="module")
def mlp_algorithms() -> dict:
    return chosen()


def saved(data: dict, folder: Path, name: str = "gemms.json") -> Path:
    path = folder / name
    path.write_text(file_text(data))
    return path


def build(capsys, out: Path, *args) -> tuple[int, str]:
    code = pipec(["build", str(GEMM_MLP), "-o", str(out), *(str(a) for a in args)])
    return code, capsys.readouterr().err


def open_bundle(bundle: Path, **library):
    driver = fake_driver(GEMM_MLP)
    lt = FakeCublasLt(driver.cu, **library)
    return load_bundle(bundle, backends=Backends(driver, lt)), lt


def test_a_pipeline_gives_its_algorithms_as_the_file_holds_them(mlp_algorithms, tmp_path):
    plan = compile_file(GEMM_MLP, load_settings(GEMM_MLP)).plan
    nodes = gemm_nodes(plan)
    assert {k: mlp_algorithms[k] for k in ("format", "version", "pipe", "device", "cublaslt")} == {
        "format": "pipec-gemm-algorithms", "version": 1, "pipe": plan.pipe,
        "device": {"name": "Fake H200", "arch": "sm_90", "multiprocessors": 132}, "cublaslt": 130100}
    assert list(mlp_algorithms["gemms"]) == list(nodes) and len(nodes) == 5
    for name, entry in mlp_algorithms["gemms"].items():
        assert entry == {"algorithm": algorithm(1), "alignments": [256] * 4, "chosen_by": "heuristic",
                         "spec": gemm_spec(nodes[name])}
    assert "name" not in entry["spec"] and entry["spec"]["workspace_bytes"] == 4 << 20
    file = saved(mlp_algorithms, tmp_path)
    assert file.read_text() == json.dumps(mlp_algorithms, sort_keys=True, indent=1) + "\n"
    assert file_json(read_file(file)) == mlp_algorithms
    aligned = json.loads(json.dumps(mlp_algorithms))
    _gemm(aligned)["alignments"] = [1, 2, 4, 256]  # an operand at an odd byte: any power of two up to 256
    assert file_json(read_file(saved(aligned, tmp_path))) == aligned


def test_pipec_build_stores_them_in_the_bundle_under_the_manifests_hash(mlp_algorithms, capsys, tmp_path):
    file = saved(mlp_algorithms, tmp_path)
    assert build(capsys, tmp_path / "a", "--gemm-algorithms", file) == (0, "")
    assert build(capsys, tmp_path / "b", "--gemm-algorithms", file) == (0, "")
    stored = (tmp_path / "a" / "gemm_algorithms.json").read_bytes()
    assert stored == (tmp_path / "b" / "gemm_algorithms.json").read_bytes()
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert manifest["files"]["gemm_algorithms.json"] == "sha256:" + hashlib.sha256(stored).hexdigest()
    # the file needs no new format: older readers check its hash and ignore it
    assert manifest["format_version"] == FORMAT_VERSION and manifest["readers"] == list(READERS)
    expected = {k: mlp_algorithms[k] for k in ("device", "cublaslt")}
    expected["gemms"] = {n: {k: v for k, v in e.items() if k != "spec"} for n, e in mlp_algorithms["gemms"].items()}
    assert stored.decode() == json.dumps({"choices": [expected]}, sort_keys=True, indent=1) + "\n"
    assert build(capsys, tmp_path / "c") == (0, "") and not (tmp_path / "c" / "gemm_algorithms.json").exists()


def _gemm(data: dict, index: int = 0) -> dict:
    return list(data["gemms"].values())[index]


def _renamed(data: dict) -> None:
    data["gemms"]["step/forward/gemm:nope"] = data["gemms"].pop("step/forward/gemm:h")


@pytest.mark.parametrize("change, message", [
    (lambda d: _gemm(d).update(algorithm="00" * 63), "gemm `step/forward/gemm:h`: `algorithm` holds 63 bytes; a "
                                                     "cublasLtMatmulAlgo_t has 64 (128 hex digits)"),
    (lambda d: _gemm(d).update(algorithm="zz" * 64), "`algorithm` is not hex"),
    (lambda d: _gemm(d).update(alignments=[256, 256, 3, 256]), "`alignments` is not four powers of two up to 256"),
    (lambda d: _gemm(d).update(chosen_by="fast"), "`chosen_by` is not one of heuristic, tune"),
    (lambda d: _gemm(d).update(spec=None), "`spec` is not the node's GEMM"),
    (lambda d: d["device"].pop("arch"), "`device` is not {\"name\": ..., \"arch\": \"sm_XY\", \"multiprocessors\": N}"),
    (lambda d: d.update(cublaslt="13.1"), "`cublaslt` is not cuBLASLt's version"),
    (lambda d: d.update(format="pipec-bundle"), "is not a GEMM algorithms file (its `format` is not "
                                                "`pipec-gemm-algorithms`"),
    (lambda d: d.update(version=2), "is GEMM algorithms version 2; this pipec reads version 1"),
    (_renamed, "`step/forward/gemm:nope` is not a GEMM node of the plan (its GEMM nodes: `step/forward/gemm:h`, "
               "`step/forward/gemm:y`, `step/backward/gemm:dw2`, `step/backward/gemm:dh`, ...)"),
    (lambda d: _gemm(d, 1)["spec"].update(k=33), "gemm `step/forward/gemm:y` was chosen for another GEMM: its `k` "
                                                 "was 33, and the plan's is 128 (pipelines/examples/gemm_mlp.pipe:"),
    (lambda d: _gemm(d, 1)["spec"]["a"].update(ld=7), "its `a.ld` was 7, and the plan's is 128"),
    (lambda d: _gemm(d, 1)["spec"].pop("k"), "its `k` was null, and the plan's is 128"),
    (lambda d: _gemm(d, 1)["spec"].update(a=3), "its `a` was 3, and the plan's is {\"buffer\": \"h\", "),
    (lambda d: d.update(cublaslt=0), "`cublaslt` is not cuBLASLt's version"),
    (lambda d: d["device"].update(multiprocessors=True), "`device` is not {"),
    (lambda d: d.update(gemms=[]), "`gemms` is not an object of GEMM nodes"),
    (lambda d: d["gemms"].update({"step/forward/gemm:y": "01"}), "gemm `step/forward/gemm:y` is not an object"),
], ids=["size", "hex", "alignments", "chosen_by", "spec", "device", "cublaslt", "format", "version", "node",
        "another_gemm", "another_layout", "a_key_missing", "not_a_matrix", "cublaslt_0", "multiprocessors",
        "gemms", "entry"])
def test_a_bad_algorithms_file_is_one_line_and_no_bundle(change, message, mlp_algorithms, capsys, tmp_path):
    data = json.loads(json.dumps(mlp_algorithms))
    change(data)
    file = saved(data, tmp_path)
    code, err = build(capsys, tmp_path / "bundle", "--gemm-algorithms", file)
    assert code == 2 and err.count("\n") == 1 and err.startswith(f"pipec: error: {file}") and message in err, err
    assert not (tmp_path / "bundle").exists()


def test_unreadable_files_and_two_for_one_gpu_are_refused(mlp_algorithms, capsys, tmp_path):
    file = saved(mlp_algorithms, tmp_path)
    (tmp_path / "torn.json").write_text(file.read_text()[:40])
    code, err = build(capsys, tmp_path / "bundle", "--gemm-algorithms", tmp_path / "torn.json")
    assert code == 2 and err.startswith(f"pipec: error: {tmp_path / 'torn.json'} is not JSON (truncated?)")
    code, err = build(capsys, tmp_path / "bundle", "--gemm-algorithms", tmp_path / "none.json")
    assert code == 2 and err == f"pipec: error: cannot read {tmp_path / 'none.json'}: No such file or directory\n"
    again = saved(mlp_algorithms, tmp_path, "again.json")
    code, err = build(capsys, tmp_path / "bundle", "--gemm-algorithms", file, "--gemm-algorithms", again)
    assert code == 2 and err == f"pipec: error: {again} and {file} are both for {HERE}: give one\n"
    assert not (tmp_path / "bundle").exists()


def test_a_bundle_runs_its_stored_algorithm_where_cublaslt_accepts_it(mlp_algorithms, capsys, tmp_path):
    """Each step of the rule, one node each; the heuristic's nodes ask it, no cache is read."""
    data = json.loads(json.dumps(mlp_algorithms))
    names = list(data["gemms"])
    data["gemms"][names[0]].update(algorithm=algorithm(2), chosen_by="tune")
    data["gemms"][names[1]]["algorithm"] = algorithm(9)  # an algorithm this cuBLASLt does not have
    data["gemms"][names[2]]["algorithm"] = algorithm(3, workspace=(4 << 20) + 1)
    del data["gemms"][names[3]]
    data["gemms"][names[4]]["algorithm"] = algorithm(1, workspace=4 << 20)  # all the node's workspace
    assert build(capsys, tmp_path / "bundle", "--gemm-algorithms", saved(data, tmp_path))[0] == 0
    pipeline, lt = open_bundle(tmp_path / "bundle")
    with pipeline:
        assert pipeline.gemm_choices == (
            GemmChoice(names[0], True, "stored (tune)"),
            GemmChoice(names[1], False, "heuristic: cublasLtMatmulAlgoCheck refuses the stored algorithm "
                                        "(cuBLAS status 7)"),
            GemmChoice(names[2], False, "heuristic: the stored algorithm needs 4194305 bytes of workspace, and "
                                        "the node has 4194304"),
            GemmChoice(names[3], False, "heuristic: the bundle stores none for this node on this GPU"),
            GemmChoice(names[4], True, "stored (heuristic)"))
        run = [algorithm(2), algorithm(1), algorithm(1), algorithm(1), algorithm(1, workspace=4 << 20)]
        assert pipeline.gemms.algorithms == dict(zip(names, run)) and lt.heuristic_calls == 3
        assert {m.algorithm.hex() for m in lt.matmuls} == set(run)
        saved_again = pipeline.gemm_algorithms()
    assert saved_again["gemms"][names[0]] == data["gemms"][names[0]]  # what runs is what a new file holds
    assert saved_again["gemms"][names[1]]["chosen_by"] == "heuristic"


@pytest.mark.parametrize("change, reason", [
    (lambda d: d["device"].update(name="NVIDIA H200"), "heuristic: the bundle's GEMM algorithms were chosen on "
                                                       f"NVIDIA H200 (sm_90, 132 SMs, cuBLASLt 130100), and this is {HERE}"),
    (lambda d: d["device"].update(multiprocessors=66), "were chosen on Fake H200 (sm_90, 66 SMs, cuBLASLt 130100)"),
    (lambda d: d.update(cublaslt=130000), "were chosen on Fake H200 (sm_90, 132 SMs, cuBLASLt 130000), and this"),
], ids=["device_name", "multiprocessors", "cublaslt"])
def test_algorithms_of_another_gpu_or_cublaslt_are_not_used(change, reason, mlp_algorithms, capsys, tmp_path):
    data = json.loads(json.dumps(mlp_algorithms))
    change(data)
    assert build(capsys, tmp_path / "bundle", "--gemm-algorithms", saved(data, tmp_path))[0] == 0
    pipeline, _ = open_bundle(tmp_path / "bundle")
    with pipeline:
        whys = {c.why for c in pipeline.gemm_choices}
    assert len(whys) == 1 and reason in whys.pop()


def test_a_bundle_without_algorithms_says_so_and_uses_no_cache(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("PIPEC_CACHE_DIR", str(tmp_path / "cache"))
    assert build(capsys, tmp_path / "bundle") == (0, "")
    pipeline, lt = open_bundle(tmp_path / "bundle")
    with pipeline:
        assert {c.why for c in pipeline.gemm_choices} == {"heuristic: the bundle stores no GEMM algorithms"}
        assert lt.heuristic_calls == 5
    assert not (tmp_path / "cache" / "gemm").exists()


def test_operands_less_aligned_than_when_chosen_take_the_heuristic(tmp_path):
    """x starts 4 bytes into its buffer: cuBLASLt's B (the program's a) is 4-byte aligned here."""
    x = matrix("x", 8, 16, byte_offset=4)
    node = gemm(0, "gemm:y", a=x, b=matrix("w", 32, 16), c=matrix("y", 8, 32), trans_b=True)
    plan = gemm_plan([buffer("x", "f32", (8 * 16 + 1,)), buffer("w", "f32", (32, 16)),
                      buffer("y", "f32", (8, 32), first="write")], [node])
    on = ChosenOn("Fake H200", "sm_90", 132, 130100)
    stored = {"gemm:y": StoredAlgorithm(bytes.fromhex(algorithm(2)), (256, 256, 256, 256), "tune", gemm_spec(node))}
    write_bundle(plan, ("sm_90",), tmp_path / "bundle", "gemm.pipe", (GemmAlgorithms(on, stored),))
    driver = fake_driver(GEMM_MLP)
    with load_bundle(tmp_path / "bundle", backends=Backends(driver, FakeCublasLt(driver.cu))) as pipeline:
        assert pipeline.gemm_choices == (GemmChoice("gemm:y", False, (
            "heuristic: its operands (cuBLASLt's A, B, C, D) are aligned to 256/4/256/256 bytes here, and the "
            "stored algorithm was chosen for 256/256/256/256")),)
        assert pipeline.gemms.algorithms == {"gemm:y": algorithm(1)}


@pytest.mark.parametrize("change, message", [
    (lambda d: d["choices"][0]["gemms"].update({"step/nope": d["choices"][0]["gemms"]["step/forward/gemm:h"]}),
     "gemm_algorithms.json: choices[0]: `step/nope` is not a GEMM node of the plan"),
    (lambda d: d["choices"][0]["gemms"]["step/forward/gemm:h"].update(algorithm="ab"),
     "gemm_algorithms.json: choices[0]: gemm `step/forward/gemm:h`: `algorithm` holds 1 bytes"),
    (lambda d: d.pop("choices"), "gemm_algorithms.json has no `choices` list"),
    (lambda d: d["choices"].append([]), "gemm_algorithms.json: choices[1] is not an object"),
    (lambda d: d.clear() or d.update(x=float("nan")), "gemm_algorithms.json has no `choices` list"),
], ids=["node", "size", "choices", "choice", "document"])
def test_a_bundles_bad_algorithms_are_a_bundle_error(change, message, mlp_algorithms, capsys, tmp_path):
    bundle = tmp_path / "bundle"
    assert build(capsys, bundle, "--gemm-algorithms", saved(mlp_algorithms, tmp_path))[0] == 0
    rewrite_gemm_algorithms(bundle, change)
    with pytest.raises(BundleError) as error:
        open_bundle(bundle)
    assert str(error.value).startswith(f"{bundle}/{message}")


def test_a_bundles_algorithms_that_are_not_json_are_a_bundle_error(mlp_algorithms, capsys, tmp_path):
    bundle = tmp_path / "bundle"
    assert build(capsys, bundle, "--gemm-algorithms", saved(mlp_algorithms, tmp_path))[0] == 0
    text = b'{"choices": ['
    (bundle / "gemm_algorithms.json").write_bytes(text)
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["files"]["gemm_algorithms.json"] = "sha256:" + hashlib.sha256(text).hexdigest()
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match="^" + str(bundle) + "/gemm_algorithms.json is not JSON: "):
        open_bundle(bundle)


def rewrite_gemm_algorithms(bundle: Path, change) -> None:
    """The bundle's gemm_algorithms.json changed, and the manifest's hash with it (a bundle made by
    hand: the hash is right, the content is not)."""
    data = json.loads((bundle / "gemm_algorithms.json").read_text())
    change(data)
    text = json.dumps(data).encode()
    (bundle / "gemm_algorithms.json").write_bytes(text)
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["files"]["gemm_algorithms.json"] = "sha256:" + hashlib.sha256(text).hexdigest()
    (bundle / "manifest.json").write_text(json.dumps(manifest))


def test_tuning_a_bundle_times_its_gemms_and_refuses_several_ranks(capsys, tmp_path):
    assert build(capsys, tmp_path / "bundle") == (0, "")
    driver = fake_driver(GEMM_MLP)
    times = iter([3.0, 1.0, 2.0] * 5)
    driver.cu.cuEventElapsedTime = lambda start, end: (driver.cu.CUresult.CUDA_SUCCESS, next(times))
    with load_bundle(tmp_path / "bundle", tune_gemms=True, backends=Backends(driver, FakeCublasLt(driver.cu))) as p:
        assert {c.why for c in p.gemm_choices} == {"tune"} and set(p.gemms.algorithms.values()) == {algorithm(2)}
        assert {e["chosen_by"] for e in p.gemm_algorithms()["gemms"].values()} == {"tune"}
    from pipec import PipelineError

    with pytest.raises(PipelineError, match="--tune-gemms \\(tune_gemms\\) runs on one rank only"):
        load_bundle(tmp_path / "bundle", tune_gemms=True, launch=Launch("torchrun", 0, 2, 0))


def test_gemm_summary_groups_the_nodes_by_how_they_were_chosen():
    stored = [GemmChoice(f"n{i}", True, "stored (tune)") for i in range(5)]
    assert gemm_summary(stored) == "stored (tune): all 5 nodes"
    assert gemm_summary(stored[:1]) == "stored (tune): `n0`"
    missing = [GemmChoice("m0", False, "heuristic: none"), GemmChoice("m1", False, "heuristic: none")]
    assert gemm_summary(stored + missing) == "stored (tune): 5 of 7 nodes; heuristic: none: `m0`, `m1`"


def _piperun(monkeypatch, capsys, *args) -> tuple[int, str, str]:
    from pipec.runtime import cli, driver, gemm_nodes

    fake = fake_driver(GEMM_MLP)
    monkeypatch.setattr(driver, "cuda_driver", lambda: fake)
    monkeypatch.setattr(gemm_nodes, "cublaslt", lambda: FakeCublasLt(fake.cu))
    code = cli.main([str(a) for a in args] + ["--no-progress"])
    out, err = capsys.readouterr()
    return code, out, err


def test_piperun_says_which_algorithms_a_bundle_runs_and_saves_them(mlp_algorithms, capsys, tmp_path, monkeypatch):
    data = json.loads(json.dumps(mlp_algorithms))
    first = next(iter(data["gemms"]))
    data["gemms"][first].update(algorithm=algorithm(3), chosen_by="tune")
    assert build(capsys, tmp_path / "bundle", "--gemm-algorithms", saved(data, tmp_path))[0] == 0
    again = tmp_path / "again.json"
    code, out, _ = _piperun(monkeypatch, capsys, tmp_path / "bundle", "--steps", "2", "--save-gemm-algorithms", again)
    lines = out.splitlines()
    assert code == 0 and lines[1] == "piperun: GEMM algorithms: stored (tune): `step/forward/gemm:h`; " \
                                     "stored (heuristic): 4 of 5 nodes"
    assert lines[2] == f"piperun: saved the algorithms of 5 GEMM nodes on Fake H200 to {again}"
    assert json.loads(again.read_text()) == data  # the same choices, the same file

    code, out, _ = _piperun(monkeypatch, capsys, GEMM_MLP, "--steps", "0", "--save-gemm-algorithms", again)
    assert code == 0 and "GEMM algorithms:" not in out  # a .pipe file's choices are the cache's, not a bundle's
    assert json.loads(again.read_text()) == mlp_algorithms


def test_piperun_cannot_save_the_algorithms_of_a_pipeline_without_gemms(capsys, tmp_path, monkeypatch):
    from pipec.runtime import cli, driver

    monkeypatch.setattr(driver, "cuda_driver", lambda: fake_driver(RL_STEP))
    code = cli.main([str(RL_STEP), "--steps", "0", "--no-progress", "--save-gemm-algorithms", str(tmp_path / "f")])
    assert code == 1 and capsys.readouterr().err.endswith(
        f"piperun: error: {RL_STEP.relative_to(ROOT)} has no GEMM nodes: there are no algorithms to save\n")


def test_a_plans_node_spec_leaves_out_where_the_node_is():
    plan = compile_file(GEMM_MLP, load_settings(GEMM_MLP)).plan
    node = next(iter(gemm_nodes(plan).values()))
    moved = dataclasses.replace(node, id=7, name="elsewhere", location=dataclasses.replace(node.location, line=99))
    assert gemm_spec(moved) == gemm_spec(node) and gemm_spec(dataclasses.replace(node, k=1)) != gemm_spec(node)


def test_piperun_saves_algorithms_on_one_rank_only(capsys, tmp_path, monkeypatch):
    for name, value in {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1"}.items():
        monkeypatch.setenv(name, value)
    code, _, err = _piperun(monkeypatch, capsys, GEMM_MLP, "--steps", "0", "--save-gemm-algorithms", tmp_path / "f")
    assert code == 2 and err == ("piperun[rank 1]: error: --save-gemm-algorithms runs on one rank only: save the "
                                 "algorithms with WORLD_SIZE = 1\n")
    assert not (tmp_path / "f").exists()
