"""The soundness corpus: small kernels, each a mutation of a clean one that hides an atomic, a
fence, a spin wait, a grid sync, a call that cannot be followed or a write through a read-only
pointer (in a `__noinline__` helper, recursion, a header in a subfolder, inline PTX with several
instructions per line, braces or macro-built strings, a function pointer), and clean twins
under clean/ that must stay silent.

Each file marks the line where it expects a diagnostic with `// expect: PC3xx[, PC3xx]`, in the
kernel source or in the header the finding lies in. NVRTC compiles every source; the codes and
lines the analysis finds must be exactly those expected. A `const` parameter the kernel can
write through (or cannot be proven not to) counts as PC318 at the write; the `.pipe` files
bind non-const parameters `in` and carry the usual `# error:` expectations. corpus/cccl/ holds
`grid.sync()` and `cuda::atomic_ref` through the real headers, checked where their wheels are
installed (nvidia-cuda-runtime-cu12 and nvidia-cuda-cccl-cu12 on the Python path)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from harness import compile_fixture, expected_diagnostics, explain
from pipec.compiler import kernels
from pipec.compiler.checks.forbidden_instructions import RULE_CODES
from pipec.compiler.toolchain import get_toolchain

CORPUS = Path(__file__).parent / "corpus" / "soundness"
SOURCES = sorted(p for p in CORPUS.rglob("*.cu"))
PIPELINES = sorted(CORPUS.glob("*.pipe"))
_EXPECT = re.compile(r"//\s*expect:\s*(PC\d+(?:\s*,\s*PC\d+)*)")


def expected(source: Path) -> set[tuple[str, int, str]]:
    found = set()
    for path in [source, *kernels.include_closure(source, source.read_text(), ())]:
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if m := _EXPECT.search(line):
                found.update((path.name, number, code.strip()) for code in m.group(1).split(","))
    return found


def found(source: Path) -> set[tuple[str, int, str]]:
    analysis = kernels.analyze(source, (), get_toolchain("nvrtc"), "compute_90")
    result = set()
    for kernel in analysis.kernels.values():
        for finding in kernel.findings:
            result.add((Path(finding.location.file).name, finding.location.line, RULE_CODES[finding.rule]))
        for param in kernel.params:
            if param.const and param.written != "no":
                result.add((Path(param.written_at.file).name, param.written_at.line, "PC318"))
    return result


def test_corpus_size():
    clean = [s for s in SOURCES if "clean" in s.relative_to(CORPUS).parts]
    dirty = [s for s in SOURCES if s not in clean]
    assert len(dirty) >= 50 and len(clean) >= 20
    assert all(expected(s) for s in dirty), "a dirty source expects nothing"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: str(p.relative_to(CORPUS)))
def test_exactly_the_expected_findings(source):
    assert found(source) == expected(source)


@pytest.mark.parametrize("path", PIPELINES, ids=lambda p: p.stem)
def test_pipelines(path):
    actual, result = compile_fixture(path)
    assert actual == expected_diagnostics(path), explain(actual, expected_diagnostics(path), result)


def _header_wheels() -> tuple[Path, ...]:
    """The include folders of the CUDA runtime and CCCL header wheels, where installed."""
    wanted = ("nvidia/cuda_cccl/include", "nvidia/cuda_runtime/include")
    found = [Path(entry) / w for w in wanted for entry in sys.path if (Path(entry) / w).is_dir()]
    return tuple(dict.fromkeys(found))


@pytest.mark.skipif(len(_header_wheels()) < 2,
                    reason="the CUDA runtime / CCCL header wheels are not installed")
def test_the_cuda_cpp_library_is_analysed_like_any_code():
    source = CORPUS.parent / "cccl" / "cooperative_groups.cu"
    analysis = kernels.analyze(source, _header_wheels(), get_toolchain("nvrtc"), "compute_90")
    rules = {name: sorted({f.rule for f in kernel.findings}) for name, kernel in analysis.kernels.items()}
    assert rules == {
        "sync_noinline": ["grid-sync"], "rank_only": [], "block_sync": [],
        "wait_ref": ["spin-wait"], "count_ref": ["atomics"], "bounded_ref": [],
    }
