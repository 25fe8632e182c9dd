"""The declaration pass's scopes: a name declared twice is PC104 whatever its value, while one
declaration reached along two import paths is the same symbol, no duplicate."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipec.compiler import compile_file, load_settings


def _codes(tmp_path: Path, main: str, **files: str) -> list[str]:
    for name, text in files.items():
        (tmp_path / f"{name}.pipe").write_text(text)
    path = tmp_path / "main.pipe"
    path.write_text(main)
    return [d.code for d in compile_file(path, load_settings(path)).diagnostics]


@pytest.mark.parametrize("value", ["1", "1000", "2.5", '"bf16"', "true"])
def test_a_constant_declared_twice_is_reported_whatever_its_value(tmp_path, value):
    # 1 and true once passed: the check compared the two values by identity, and Python
    # keeps one object for each small integer and each boolean
    assert _codes(tmp_path, f"const X = {value}\nconst X = {value}\n") == ["PC104"]


def test_one_constant_imported_along_two_paths_is_no_duplicate(tmp_path):
    main = 'import "a.pipe"\nimport "b.pipe"\nfrom "b.pipe" import X\n'
    assert _codes(tmp_path, main, a='import "b.pipe"\n', b="const X = 1\n") == []
