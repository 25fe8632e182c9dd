"""Live updates of a bundle's constants on the GPU (docs/plan.md, "Live updates"): the same
constants changed mid-run from C (pipec_update_constants) and from Python (`Pipeline.update` on
`pipec.load_bundle`, through the plan's record) leave every buffer bit-identical after more steps,
to each other and to the Python runtime that compiles the .pipe file again with the new values;
the update changes what the run computes; a constant the record calls structural (the learning
rate reaches the `init` block) is refused by both in one line, changing nothing."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest

from native_harness import build_native, native_tools_missing
from test_native_gpu import CRuntime, _bundle, _differences

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(native_tools_missing() is not None, reason=native_tools_missing() or "")]

ROOT = Path(__file__).resolve().parents[2]
BEFORE, AFTER = 100, 500  # steps before the update and after it
UPDATES = {"rl_step": {"GAMMA": 0.9, "MAX_GRAD_NORM": 5.0, "EPS_DECAY_STEPS": 500},
           "c51_step": {"GAMMA": 0.95, "TAU": 0.02, "EPS_DECAY_STEPS": 500}}


class Value(ctypes.Structure):
    class As(ctypes.Union):
        _fields_ = [("i", ctypes.c_int64), ("u", ctypes.c_uint64), ("f", ctypes.c_double), ("b", ctypes.c_int)]

    _fields_ = [("kind", ctypes.c_int), ("as_", As)]


def _value(v) -> Value:
    out = Value()
    if isinstance(v, bool):
        out.kind, out.as_.b = 3, int(v)
    elif isinstance(v, float):
        out.kind, out.as_.f = 2, v
    else:
        out.kind, out.as_.i = 0, v
    return out


def _update(c: CRuntime, p, changes: dict) -> tuple[int, int]:
    lib = c.lib
    lib.pipec_update_constants.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(Value),
                                           ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]
    names = (ctypes.c_char_p * len(changes))(*(name.encode() for name in changes))
    values = (Value * len(changes))(*(_value(v) for v in changes.values()))
    changed = ctypes.c_size_t()
    return lib.pipec_update_constants(p, names, values, len(changes), ctypes.byref(changed)), changed.value


def _launches(plan) -> list:
    """Every step kernel node's function, arguments and launch shape."""
    return [(node.name, node.function, node.args, node.grid, node.block, node.shared_bytes)
            for graph in plan.graph_tree(plan.step) for node in graph.nodes if hasattr(node, "function")]


def _differing(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> list[str]:
    """The buffers whose bytes differ: bit for bit, so that a NaN (the poison of an `uninit`
    buffer that nothing writes, such as c51_step's bf16 copies when BF16 is off) equals itself."""
    return [name for name, array in a.items() if array.tobytes() != b[name].tobytes()]


@pytest.fixture(scope="module")
def native(tmp_path_factory) -> Path:
    return build_native(tmp_path_factory.mktemp("native-live-build"))


@pytest.mark.parametrize("name", sorted(UPDATES))
def test_constants_updated_from_c_and_python_end_bit_identical(name, native, tmp_path):
    import pipec
    from pipec.plan.gemm_algorithms import file_text, read_file
    from pipec.runtime.update import UpdateRefused

    path, changes = ROOT / "pipelines" / f"{name}.pipe", UPDATES[name]
    c = CRuntime(native)
    with pipec.load(path) as recompiling:
        # the bundle stores the GEMM algorithms the file's load runs (the artifact cache may hold
        # tuned ones), so that the three pipelines run the same GEMM kernels
        algorithms = tmp_path / "gemms.json"
        if recompiling.gemm_choices:
            algorithms.write_text(file_text(recompiling.gemm_algorithms()))
        bundle = tmp_path / "bundle"
        _bundle(path, bundle, recompiling.device.arch, (read_file(algorithms),) if recompiling.gemm_choices else ())
        with pipec.load_bundle(bundle) as from_record, pipec.load_bundle(bundle) as untouched:
            p = c.open(bundle)
            try:
                for pipeline in (recompiling, from_record, untouched):
                    pipeline.step(BEFORE)
                c.check(c.lib.pipec_step(p, BEFORE))
                before = from_record.snapshot()
                differing = _differing(recompiling.snapshot(), before)
                assert not differing, f"the file's load and the bundle's differ before any update, in {differing}"
                changed = from_record.update(**changes)
                assert recompiling.update(**changes) == changed
                status, c_changed = _update(c, p, changes)
                c.check(status)
                assert c_changed == len(changed) > 0
                with pytest.raises(UpdateRefused, match=r"^`LR` cannot change in place: it reaches "):
                    from_record.update(LR=5e-4)
                status, _ = _update(c, p, {"LR": 5e-4})
                assert status == 9 and c.lib.pipec_last_error().decode().startswith("`LR` cannot change in place")
                for pipeline in (recompiling, from_record, untouched):
                    pipeline.step(AFTER)
                c.check(c.lib.pipec_step(p, AFTER))
                c.check(c.lib.pipec_synchronize(p))
                expected = from_record.snapshot()
                assert not _differences(c, p, expected), "C and Python differ after the update"
                assert _launches(recompiling.plan) == _launches(from_record.plan), \
                    "the record and compiling again give other kernel launches"
                differing = _differing(recompiling.snapshot(), expected)
                assert not differing, f"the record and compiling again with the new values differ in {differing}"
                unchanged = untouched.snapshot()
                assert _differing(unchanged, expected), "the update changed nothing"
            finally:
                c.lib.pipec_close(p)
