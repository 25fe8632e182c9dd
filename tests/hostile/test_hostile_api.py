"""The Python API's contract under hostile calls: every error from `pipec.check`, `pipec.load`
and the `Pipeline` methods is a `pipec.Error` with a one-line message (a wrong call itself, such
as an unknown keyword, stays Python's TypeError); nonsense is refused, not accepted; and every
class raised is in docs/python-api.md's error table. The pipeline runs on the fake driver."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import pipec
from fake_cublaslt import FakeCublasLt
from fake_cuda import fake_driver
from pipec.compiler.cli import main
from pipec.runtime import Backends

ROOT = Path(__file__).resolve().parents[2]
NODES = ROOT / "tests" / "fixtures" / "runtime" / "nodes.pipe"
TUTORIAL = ROOT / "pipelines" / "examples" / "tutorial.pipe"
RAISED: set[str] = set()  # the classes the API raised in this module, for the docs' table


def refused(call, match: str = "") -> pipec.Error:
    with pytest.raises(pipec.Error) as caught:
        call()
    error = caught.value
    RAISED.add(type(error).__name__)
    assert str(error).strip() and "\n" not in str(error).strip(), f"not one line: {error}"
    assert re.search(match, str(error)), str(error)
    return error


def _backends():
    driver = fake_driver(NODES)
    return Backends(driver, FakeCublasLt(driver.cu))


@pytest.fixture
def pipeline():
    with pipec.load(NODES, backends=_backends()) as loaded:
        yield loaded


# --- pipec.check -------------------------------------------------------------------------------

@pytest.mark.parametrize("arguments, match", [
    ({"path": "no/such/file.pipe"}, "No such file"),
    ({"path": ""}, "not empty"),
    ({"path": "a\0b.pipe"}, "NUL"),
    ({"path": str(ROOT / "pipelines")}, "a folder"),
    ({"path": 5}, "expected a path"),
    ({}, "give the path"),
    ({"text": 5}, "expected the source"),
    ({"path": TUTORIAL, "defines": "N=3"}, "expected a mapping"),
    ({"path": TUTORIAL, "defines": {1: 2}}, "not a constant's name"),
    ({"path": TUTORIAL, "defines": {"N": float("inf")}}, "finite"),
    ({"path": TUTORIAL, "defines": {"N": 1 << 5000}}, "5001 bits"),
    ({"path": TUTORIAL, "defines": {"N": [1]}}, "not list"),
    ({"path": TUTORIAL, "select": ["PC999"]}, "matches no rule"),
    ({"path": TUTORIAL, "select": []}, "names no rule"),
    ({"path": TUTORIAL, "select": "PC3"}, "a list of rule codes"),
    ({"path": TUTORIAL, "ignore": [""]}, "matches no rule"),
    ({"path": TUTORIAL, "arch": "x86"}, "architecture"),
    ({"path": TUTORIAL, "include_dirs": "kernels"}, "list or tuple of paths"),
    ({"path": TUTORIAL, "lanes": 0}, ">= 1"),
    ({"path": TUTORIAL, "lanes": True}, ">= 1"),
])
def test_check_refuses_nonsense_with_one_line(arguments, match):
    refused(lambda: pipec.check(**arguments), match)


def test_check_matches_the_command_line(capsys, tmp_path):
    text = "const N = 4\nconst A = 1 / 0\nbuffer x: f32[N]\n"
    compilation = pipec.check(text=text, path=tmp_path / "t.pipe", defines={"N": 8}, ignore=["PC402"])
    (tmp_path / "t.pipe").write_text(text)
    assert main(["--format", "json", "-D", "N=8", "--ignore", "PC402", str(tmp_path / "t.pipe")]) == 1
    cli = json.loads(capsys.readouterr().out)
    assert [d.to_json() for d in compilation.diagnostics] == cli and [d["code"] for d in cli] == ["PC105"]
    unused = "buffer x: f32[4]\nbuffer y: f32[4]\nstep { fill y = 1 }\n"
    assert [d.code for d in pipec.check(text=unused).diagnostics] == ["PC402"]
    assert pipec.check(text=unused, select=["PC1"]).diagnostics == []


def test_check_takes_bools_floats_and_expressions_as_defines():
    text = "const ON = false\nconst G = 0.5\nconst M = 2\nconst K = 1 / (M - 2)\n"
    assert [d.code for d in pipec.check(text=text).diagnostics] == ["PC105"]
    assert pipec.check(text=text, defines={"ON": True, "G": 1e-3, "M": "3 * 2"}).diagnostics == []


def test_a_wrong_call_stays_a_type_error():
    with pytest.raises(TypeError):
        pipec.check(TUTORIAL, colour="red")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        pipec.load(TUTORIAL, driver=object())  # type: ignore[call-arg]


def test_dir_shows_the_api_and_its_errors_and_no_stray_names():
    names = dir(pipec)
    assert {"check", "load", "Error", "ArgumentError", "PipelineError", "__version__"} <= set(names)
    assert set(pipec.ERRORS) <= set(names)
    assert not {"Path", "annotations", "os", "ERRORS"} & set(names)


# --- pipec.load --------------------------------------------------------------------------------

@pytest.mark.parametrize("arguments, match", [
    ({"path": "no/such/file.pipe"}, "No such file"),
    ({"path": ""}, "not empty"),
    ({"path": "\0"}, "NUL"),
    ({"path": ROOT / "pipelines"}, "a folder"),
    ({"lanes": 0}, "lanes = 0"),
    ({"lanes": "2"}, "lanes = '2'"),
    ({"device": "zero"}, "device = 'zero'"),
    ({"device": -1}, "device = -1"),
    ({"bind": 5}, "bind = 5"),
    ({"bind": {1: None}}, "bind"),
    ({"defines": "N=3"}, "expected a mapping"),
    ({"defines": {1: 2}}, "not a constant's name"),
    ({"defines": {"N": 10 ** 400}}, "bits"),
    ({"defines": {"N": float("nan")}}, "finite"),
    ({"defines": {"N": None}}, "not NoneType"),
    ({"include_dirs": "kernels"}, "list or tuple"),
    ({"steps_per_launch": 0}, "steps_per_launch = 0"),
    ({"steps_per_launch": -2}, "steps_per_launch = -2"),
    ({"steps_per_launch": 1.5}, "steps_per_launch = 1.5"),
    ({"unroll": "yes"}, "True or False"),
    ({"launch": "torchrun"}, "Launch"),
    ({"backends": 5}, "Backends"),
    ({"backends": Backends(driver=object())}, "driver = "),
    ({"backends": Backends(drop_nodes="tick")}, "a set of names"),
])
def test_load_refuses_nonsense_with_one_line(arguments, match):
    arguments = {"path": NODES, **arguments}
    if "backends" not in arguments:
        arguments["backends"] = _backends()
    refused(lambda: pipec.load(**arguments), match)


# --- Pipeline ----------------------------------------------------------------------------------

@pytest.mark.parametrize("call, match", [
    (lambda p: p.step(-1), r"step\(n\) = -1"),
    (lambda p: p.step(1.5), r"step\(n\) = 1.5"),
    (lambda p: p.step(True), r"step\(n\) = True"),
    (lambda p: p.run_eager(-1), r"run_eager\(n\) = -1"),
    (lambda p: p.verify(0), r"verify\(steps\) = 0"),
    (lambda p: p.profile(0), r"profile\(replays\) = 0"),
    (lambda p: p.writers_of("nope", 0), "no buffer named 'nope'"),
    (lambda p: p.writers_of("x", -1), "element"),
    (lambda p: p.writers_of("x", 1000), "has 1000 elements"),
    (lambda p: p.read("nope"), "no buffer named 'nope'"),
    (lambda p: p.buffer(3), "no buffer named 3"),
    (lambda p: p.write("x", np.zeros(999, np.float32)), r"f32\[1000\]: cannot write an array of shape \[999\]"),
    (lambda p: p.write("x", np.zeros((10, 100), np.float32)), r"shape \[10, 100\]"),
    (lambda p: p.write("counter", np.array([1.5])), "cannot write float64 values"),
    (lambda p: p.write("x", np.array(["a"] * 1000)), "cannot write <U1 values"),
    (lambda p: p.write("x", {"not": "an array"}), "cannot write"),
    (lambda p: p.restore({"nope": np.zeros(1)}), "no buffer named 'nope'"),
    (lambda p: p.restore([np.zeros(1000)]), "expected a mapping"),
    (lambda p: p.restore({"a": np.zeros(1, np.float32), "x": np.zeros(3)}), "shape"),
    (lambda p: p.save_state(""), "not empty"),
    (lambda p: p.save_state("a\0b"), "NUL"),
    (lambda p: p.save_state(NODES), "cannot save the state in"),
    (lambda p: p.save_state(ROOT / "no-such-folder-for-pipec", steps=-1), "steps = -1"),
    (lambda p: p.load_state(ROOT / "no-such-folder-for-pipec"), "no saved state"),
    (lambda p: p.update(N=float("inf")), "finite"),
    (lambda p: p.update(N=1 << 1001), "bits"),
])
def test_pipeline_methods_refuse_nonsense_with_one_line(pipeline, call, match):
    refused(lambda: call(pipeline), match)


def test_a_refused_restore_writes_nothing(pipeline):
    before = pipeline.read("a")
    refused(lambda: pipeline.restore({"a": np.full(1, 9.0, np.float32), "x": np.zeros(3)}))
    assert np.array_equal(pipeline.read("a"), before)


def test_what_fits_is_still_written(pipeline):
    pipeline.write("counter", np.array([41]))  # int64 into u32: an integer kind
    pipeline.write("x", list(range(1000)))  # a list of ints into f32, flat
    assert pipeline.read("counter")[0] == 41 and pipeline.read("x")[999] == 999.0
    assert [w.name for w in pipeline.writers_of("counter", 0)] == ["step/tick"]


def test_a_state_file_that_is_not_pipec_s_is_a_state_error(pipeline, tmp_path):
    (tmp_path / "state.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all}")
    refused(lambda: pipeline.load_state(tmp_path), "not a safetensors file")


# --- the docs' error table (last: it reads what the tests above raised) ------------------------

def test_the_error_table_lists_every_error_the_api_raised():
    assert RAISED, "run the module whole: the tests above collect what they raised"
    table = (ROOT / "docs" / "python-api.md").read_text().split("## Errors", 1)[1]
    listed = set(re.findall(r"^\| `(\w+)` \|", table, re.M))
    assert RAISED <= listed and RAISED <= set(pipec.ERRORS), RAISED - listed
