"""The C, C++ and Rust examples of the documentation (docs/native.md) are checked: a C (C11) or
C++ (C++17) block compiles against native/include/pipec.h with the system compiler, warnings as
errors; a Rust block
names, on its first line, the repository file it is taken from (`// native/rust/...`), and the
rest of it stands in that file word for word, so it is compiled and tested with the crate
(`cargo test`)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from test_doc_examples import ALL_BLOCKS, ROOT

COMPILED = {"c": ("cc", "-std=c11", "c"), "c++": ("c++", "-std=c++17", "cpp")}  # compiler, standard, suffix
C_BLOCKS = [b for b in ALL_BLOCKS if b.language in COMPILED]
RUST_BLOCKS = [b for b in ALL_BLOCKS if b.language == "rust"]
HEADER_FOLDER = ROOT / "native" / "include"


def test_the_native_document_has_c_and_rust_examples():
    languages = {b.language for b in C_BLOCKS + RUST_BLOCKS if b.document.name == "native.md"}
    assert languages == {"c", "c++", "rust"}


@pytest.mark.parametrize("block", C_BLOCKS, ids=lambda b: b.id)
def test_a_c_example_compiles_against_the_header(block, tmp_path):
    compiler, standard, suffix = COMPILED[block.language]
    if shutil.which(compiler) is None:
        pytest.skip(f"no `{compiler}` on this machine")
    source = tmp_path / f"example.{suffix}"
    source.write_text(block.text)
    done = subprocess.run([compiler, standard, "-Wall", "-Wextra", "-Werror", "-fsyntax-only", "-I", str(HEADER_FOLDER),
                           str(source)], capture_output=True, text=True)
    assert done.returncode == 0, f"{block.id} does not compile:\n{done.stderr}"


@pytest.mark.parametrize("block", RUST_BLOCKS, ids=lambda b: b.id)
def test_a_rust_example_is_taken_from_the_file_it_names(block):
    first, _, rest = block.text.partition("\n")
    assert first.startswith("// native/rust/"), f"{block.id}: the first line names the file (// native/rust/...)"
    source = ROOT / first.removeprefix("// ").strip()
    assert source.is_file(), f"{block.id}: {source} does not exist"
    assert rest.strip() and rest in source.read_text(), f"{block.id}: the example is not in {source.name} word for word"
