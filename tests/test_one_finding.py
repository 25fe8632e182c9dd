"""One mistake, one finding: a single mistake made in a shipped pipeline (a copy of the tree of
pipelines and kernels) is reported once, however many findings would follow from it: the uses
of an undefined constant, of a buffer whose declaration failed, of the names a failed import
would have declared, the argument errors of a launch of an undefined kernel or with an
argument missing, the reads of a buffer whose writer is bound wrong."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipec.compiler import Settings, compile_file, load_settings
from pipec.compiler.diagnostics import Label

REPO = Path(__file__).resolve().parent.parent
TUTORIAL = "pipelines/examples/tutorial.pipe"
RL_STEP = "pipelines/rl_step.pipe"
SHARED = "pipelines/common/cartpole_per.pipe"

# (pipeline checked, file changed, text, its replacement, the one finding's code)
MISTAKES = [
    # an undefined kernel: no argument finding on its launch
    (TUTORIAL, TUTORIAL, "launch scale<<<", "launch scal<<<", "PC103"),
    # a constant renamed: every use of the old name is one finding
    (TUTORIAL, TUTORIAL, "const N = 1 << 20", "const COUNT = 1 << 20", "PC103"),
    (RL_STEP, RL_STEP, "const BATCH = 256", "const BATCH_SIZE = 256", "PC103"),
    # a constant whose value fails: its uses are dropped silently
    (TUTORIAL, TUTORIAL, "const BLOCK = 256", "const BLOCK = 256 / 0", "PC105"),
    # a buffer with a bad type or initial value: every use of it
    (TUTORIAL, TUTORIAL, "buffer x: f32[N]", "buffer x: f33[N]", "PC107"),
    (RL_STEP, RL_STEP, "buffer params: f32[NPARAMS]", "buffer params: f23[NPARAMS]", "PC107"),
    (TUTORIAL, TUTORIAL, "buffer y: f32[N] = uninit", "buffer y: f32[N] = unint", "PC107"),
    # a failed import: every name from it
    (TUTORIAL, TUTORIAL, "kernels/tutorial.cu", "kernels/tutorials.cu", "PC102"),
    (TUTORIAL, TUTORIAL, 'from "../../kernels/tutorial.cu" import scale, accumulate, report',
     'import "../../kernels/tutorials.cu"', "PC102"),
    (RL_STEP, RL_STEP, 'import "common/cartpole_per.pipe"', 'import "common/cartpole.pipe"', "PC102"),
    (TUTORIAL, TUTORIAL, "import scale, accumulate, report", "import scale, accumulat, report", "PC106"),
    (TUTORIAL, "kernels/tutorial.cu", "__global__ void scale(", "__global__ void scale(}", "PC106"),
    # a syntax error, in the pipeline or in a file it imports whole
    (TUTORIAL, TUTORIAL, "graph compute {", "graph compute {{", "PC101"),
    (RL_STEP, SHARED, "const LEVELS = log2(CAPACITY)", "const LEVELS = log2(CAPACITY", "PC101"),
    # a binding of an import that fails: the file's own value stands
    (RL_STEP, RL_STEP, "ENVS = ENVS, NSTEP", "ENVS = ENVZ, NSTEP", "PC103"),
    # a launch with an argument missing: no kind error for the arguments after it, no read of
    # the buffer it should have written
    (TUTORIAL, TUTORIAL, "(in x, out y, 0.5, N)", "(in x, 0.5, N)", "PC201"),
    # a value where a buffer goes, a write through `in`: no read-before-write of the buffer
    (TUTORIAL, TUTORIAL, "(in x, out y, 0.5, N)", "(in x, 0.5, 0.5, N)", "PC202"),
    (TUTORIAL, TUTORIAL, "(in x, out y, 0.5, N)", "(in x, in y, 0.5, N)", "PC318"),
    # an undefined graph used in a loop
    (RL_STEP, RL_STEP, "            optimize(u)\n            reprioritize(u)",
     "            optimise(u)\n            reprioritize(u)", "PC103"),
]


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    for folder in ("pipelines", "kernels"):
        shutil.copytree(REPO / folder, root / folder)
    (root / "pyproject.toml").write_text("[tool.pipec]\n")  # the project: imports may reach kernels/
    return root


@pytest.mark.parametrize("checked, changed, text, replacement, code", MISTAKES,
                         ids=[f"{m[4]}:{m[3][:40]}" for m in MISTAKES])
def test_one_mistake_is_one_finding(tree, checked, changed, text, replacement, code):
    path = tree / changed
    original = path.read_text()
    assert original.count(text) >= 1, f"{changed} no longer holds {text!r}"
    path.write_text(original.replace(text, replacement, 1))
    try:
        found = compile_file(tree / checked, load_settings(tree / checked), until="check").diagnostics
    finally:
        path.write_text(original)
    assert [(d.code, d.message) for d in found][:1] and [d.code for d in found] == [code], \
        "\n".join(f"{d.span.location()}: {d.code} {d.message}" for d in found)


def test_the_pipelines_are_clean_without_the_mistakes(tree):
    for checked in (TUTORIAL, RL_STEP):
        assert compile_file(tree / checked, load_settings(tree / checked), until="check").diagnostics == []


def test_the_other_uses_of_an_undefined_name_are_labels_of_its_one_finding(tmp_path):
    pipe = tmp_path / "p.pipe"
    pipe.write_text("const SIZE = 4\nbuffer a: f32[SIZ]\nbuffer b: f32[SIZ * 2]\nbuffer c: f32[SIZ]\n")
    [finding] = compile_file(pipe, Settings(), until="check").diagnostics
    assert (finding.code, finding.message, finding.span.line) == ("PC103", "undefined name `SIZ`", 2)
    assert [(label.span.line, label.message) for label in finding.labels] == [(3, "also here"), (4, "also here")]
    # the quick fix writes the similar name at every place
    [fix] = finding.fixes
    assert fix.title == "Change to `SIZE`"
    assert [(e.span.line, e.span.text, e.text) for e in fix.edits] == [(2, "SIZ", "SIZE"), (3, "SIZ", "SIZE"),
                                                                      (4, "SIZ", "SIZE")]


def test_beyond_five_places_the_rest_are_counted(tmp_path):
    pipe = tmp_path / "p.pipe"
    pipe.write_text("".join(f"buffer b{i}: f32[N]\n" for i in range(8)))
    [finding] = compile_file(pipe, Settings(), until="check").diagnostics
    assert len(finding.labels) == 5 and all(isinstance(label, Label) for label in finding.labels)
    assert finding.notes == ("and 2 more places",)


def test_a_name_close_to_a_failed_declaration_is_no_second_finding(tmp_path):
    (tmp_path / "k.cu").write_text('extern "C" __global__ void accumulate(float* x) {}\n')
    pipe = tmp_path / "p.pipe"
    pipe.write_text('from "k.cu" import accumulat\nbuffer x: f32[4]\nconst Q = UNDECLARED\n'
                    "step {\n    launch accumulate<<<1, 1>>>(x)\n}\n")
    found = compile_file(pipe, Settings(), until="check").diagnostics
    # the launch's name is close to the failed import: silent; an unrelated name is not
    assert [(d.code, d.message) for d in found] == [
        ("PC106", "`k.cu` has no kernel `accumulat`"), ("PC103", "undefined name `UNDECLARED`")]
    assert [f.title for f in found[0].fixes] == ["Change to `accumulate`"]
