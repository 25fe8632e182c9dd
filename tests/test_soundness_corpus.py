"""The soundness corpus: small kernels, each a mutation of a clean one that hides an atomic, a
fence, a spin wait, a grid sync, a call that cannot be followed or a write through a read-only
pointer (in a `__noinline__` helper, recursion, a header in a subfolder, inline PTX with several
instructions per line, braces or macro-built strings, a function pointer), and clean twins
under clean/ that must stay silent.

Each file marks the line where it expects a diagnostic with `// expect: PC3xx[, PC3xx]`: the
line of the kernel's own body that reaches the instruction, through every inlined function and
every call. When the instruction itself lies elsewhere (a header, a helper), that line carries
`// note: PC3xx`: the diagnostic shows it as a note. NVRTC compiles every source, nvcc a sample
of them where it is installed, and both must find exactly the lines expected. A `const` parameter
the kernel can write through (or cannot be proven not to) counts as PC318 at the write, a load
through a pointer of unknown origin as PC324, and a parameter annotated `/// pipec: out` that the
kernel reads before writing as PC404 at the read; the `.pipe` files bind non-const parameters
`in`, declare tables of addresses, and carry the usual `# error:` expectations.
corpus/cccl/ holds `grid.sync()` and `cuda::atomic_ref` through the real headers, checked where
NVRTC finds the CUDA runtime and CCCL headers of its own version (the header wheels,
nvidia-cuda-runtime-cu12 and nvidia-cuda-cccl-cu12 for NVRTC 12, or a matching toolkit)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from harness import compile_fixture, expected_diagnostics, explain
from pipec.compiler import kernel_analysis
from pipec.compiler.checks.forbidden_instructions import RULE_CODES
from pipec.compiler.kernel_records import SourceLocation
from pipec.compiler.toolchain import get_toolchain

CORPUS = Path(__file__).parent / "corpus" / "soundness"
SOURCES = sorted(p for p in CORPUS.rglob("*.cu"))
PIPELINES = sorted(CORPUS.glob("*.pipe"))
_MARK = re.compile(r"//\s*(expect|note):\s*(PC\d+(?:\s*,\s*PC\d+)*)")
# One source of each way of hiding, compiled by nvcc as well: the lines must be the same.
NVCC_SAMPLE = ("atomic_header_subfolder.cu", "atomic_call_chain.cu", "atomic_noinline_header.cu",
               "fence_header.cu", "spin_header.cu", "spin_relaxed_asm.cu", "write_const_header.cu",
               "write_const_helper.cu", "grid_sync_noinline.cu", "atomic_asm_macro.cu",
               "clean/pure_header.cu", "read_raw_header.cu", "read_raw_noinline.cu", "out_read_header.cu",
               "out_read_noinline.cu", "clean/table_reads.cu", "clean/out_write_first.cu")


def expected(source: Path) -> set[tuple[str, str, int, str]]:
    """(expect | note, file, line, code) as the source and the headers it includes mark them."""
    found = set()
    for path in [source, *kernel_analysis.include_closure(source, source.read_text(), ())]:
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if m := _MARK.search(line):
                found.update((m.group(1), path.name, number, code.strip()) for code in m.group(2).split(","))
    return found


def _marks(code: str, reported: SourceLocation | None, itself: SourceLocation | None) -> set:
    marks = {("expect", Path(reported.file).name, reported.line, code)}
    if itself != reported:
        marks.add(("note", Path(itself.file).name, itself.line, code))
    return marks


def found(source: Path, compiler: str = "nvrtc") -> set[tuple[str, str, int, str]]:
    analysis = kernel_analysis.analyze(source, (), get_toolchain(compiler), "compute_90")
    result = set()
    for kernel in analysis.kernels.values():
        for finding in kernel.findings:
            result |= _marks(RULE_CODES[finding.rule], finding.reported_at, finding.location)
        # An access through a pointer loaded from a parameter's memory is followed only where a
        # declared table is bound, which here means a parameter that points to pointers.
        unfollowed = [p for p in kernel.params if not p.table]
        store = next((p.written_through for p in unfollowed if p.written_through), None)
        load = kernel.unknown_read or next((p.read_through for p in unfollowed if p.read_through), None)
        for param in kernel.params:
            if param.const and param.written != "no":
                result |= _marks("PC318", param.written_reported_at, param.written_at)
            elif param.const and store is not None:
                result |= _marks("PC318", store.reported_at, store.location)
            if param.write_only and param.read_first is not None:
                result |= _marks("PC404", param.read_first.reported_at, param.read_first.location)
        if load is not None:
            result |= _marks("PC324", load.reported_at, load.location)
    return result


def test_corpus_size():
    clean = [s for s in SOURCES if "clean" in s.relative_to(CORPUS).parts]
    dirty = [s for s in SOURCES if s not in clean]
    assert len(dirty) >= 50 and len(clean) >= 20
    assert all(expected(s) for s in dirty), "a dirty source expects nothing"


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: str(p.relative_to(CORPUS)))
def test_exactly_the_expected_findings(source):
    assert found(source) == expected(source)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
@pytest.mark.parametrize("name", NVCC_SAMPLE)
def test_nvcc_points_at_the_same_lines(name):
    source = CORPUS / name
    assert found(source, "nvcc") == expected(source)


@pytest.mark.parametrize("path", PIPELINES, ids=lambda p: p.stem)
def test_pipelines(path):
    actual, result = compile_fixture(path)
    assert actual == expected_diagnostics(path), explain(actual, expected_diagnostics(path), result)


@pytest.mark.skipif(len(get_toolchain("nvrtc").cuda_headers.folders) < 2,
                    reason="no CUDA runtime and CCCL headers of NVRTC's version")
def test_the_cuda_cpp_library_is_analysed_like_any_code():
    source = CORPUS.parent / "cccl" / "cooperative_groups.cu"
    analysis = kernel_analysis.analyze(source, (), get_toolchain("nvrtc"), "compute_90")
    rules = {name: sorted({f.rule for f in kernel.findings}) for name, kernel in analysis.kernels.items()}
    assert rules == {
        "sync_noinline": ["grid-sync"], "rank_only": [], "block_sync": [],
        "wait_ref": ["spin-wait"], "count_ref": ["atomics"], "bounded_ref": [],
    }
    assert found(source) == expected(source)  # the library's own lines are no notes
