"""Imports, kernel sources with their headers, and `load` files stay inside the project
(PC110), and a refused file's content never reaches any report."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from pipec.compiler.cli import main
from pipec.compiler.codes import EXAMPLES
from pipec.compiler.render import RENDERERS
from pipec.compiler.resolve.declare import SHIPPED_KERNELS

SECRET = "TOPSECRET_7f3a_do_not_print"


@pytest.fixture
def layout(tmp_path):
    """tmp/project (with pyproject.toml, kernels.cu, sub/) and tmp/outside (secret files)."""
    project, outside = tmp_path / "project", tmp_path / "outside"
    (project / "sub").mkdir(parents=True)
    outside.mkdir()
    (project / "pyproject.toml").write_text("[tool.pipec]\n")
    shutil.copy(EXAMPLES / "kernels.cu", project / "kernels.cu")
    (outside / "secret.pipe").write_text(f"const {SECRET} = 1\n{SECRET} syntax error here\n")
    (outside / "secret.cu").write_text(f'extern "C" __global__ void k(float* x) {{ {SECRET}; }}\n')
    (outside / "secret.cuh").write_text(f"#error {SECRET}\n")
    np.save(outside / "secret.npy", np.zeros(3, np.float32))
    (project / "link.pipe").symlink_to(outside / "secret.pipe")
    return project, outside


def check(capsys, path: Path, *args) -> tuple[int, str]:
    code = main([str(a) for a in (path, *args)])
    out, err = capsys.readouterr()
    return code, out + err


def write(project: Path, body: str) -> Path:
    path = project / "sub" / "main.pipe"
    path.write_text('from "../kernels.cu" import add_one\nbuffer x: f32[4]\n' + body
                    + "\nstep { launch add_one<<<1, 4>>>(x, 4) }\n")
    return path


@pytest.mark.parametrize("import_line", [
    'import "../../outside/secret.pipe"',
    'import "{outside}/secret.pipe"',
    'import "../link.pipe"',
    'import "{outside}/missing.pipe"',
    'from "../../outside/secret.cu" import k',
    'buffer y: f32[3] = load("../../outside/secret.npy")',
])
@pytest.mark.parametrize("output_format", sorted(RENDERERS))
def test_a_path_outside_the_project_is_refused_without_its_content(capsys, layout, import_line,
                                                                    output_format):
    project, outside = layout
    path = write(project, import_line.format(outside=outside))
    code, text = check(capsys, path, "--format", output_format)
    assert code == 1 and "PC110" in text and SECRET not in text
    code, text = check(capsys, path, "--emit", "plan", "--format", output_format)
    assert code == 1 and "PC110" in text and SECRET not in text


def test_a_kernel_source_that_includes_a_header_outside_is_refused(capsys, layout):
    project, outside = layout
    (project / "leaky.cu").write_text(f'#include "{outside}/secret.cuh"\n'
                                      'extern "C" __global__ void k(float* x) { x[0] = 1; }\n')
    path = write(project, 'from "../leaky.cu" import k')
    code, text = check(capsys, path)
    assert code == 1 and "PC110" in text and "secret.cuh" in text and SECRET not in text


def test_allow_paths_and_include_dirs_let_a_folder_in(capsys, layout):
    project, outside = layout
    (outside / "shared.pipe").write_text("const SHARED = 4\n")
    path = write(project, 'import "../../outside/shared.pipe"')
    assert "PC110" in check(capsys, path)[1]
    (project / "pyproject.toml").write_text('[tool.pipec]\nallow-paths = ["../outside"]\n')
    code, text = check(capsys, path)
    assert code == 0, text
    (project / "pyproject.toml").write_text("[tool.pipec]\n")
    path = write(project, 'import "shared.pipe"')
    assert check(capsys, path, "--include-dir", outside)[0] == 0


def test_without_a_pyproject_the_pipelines_own_folder_is_the_project(capsys, tmp_path):
    (tmp_path / "a" / "lib").mkdir(parents=True)
    (tmp_path / "b.pipe").write_text("const B = 1\n")
    (tmp_path / "a" / "lib" / "c.pipe").write_text("const C = 1\n")
    path = tmp_path / "a" / "main.pipe"
    path.write_text('import "lib/c.pipe"\nimport "../b.pipe"\n')
    code, text = check(capsys, path, "--format", "concise")
    assert code == 1 and text.count("PC110") == 1 and "../b.pipe" in text


def test_the_shipped_kernels_stay_importable_from_anywhere(capsys, tmp_path):
    path = tmp_path / "main.pipe"
    path.write_text(f'from "{SHIPPED_KERNELS / "tutorial.cu"}" import scale, accumulate\n'
                    "buffer x: f32[4]\nbuffer y: f32[4]\nbuffer t: f32[1] mapped\n"
                    "step { launch scale<<<1, 4>>>(x, y, 2.0, 4)\n"
                    "       launch accumulate<<<1, 4>>>(y, t, 4) }\n")
    code, text = check(capsys, path, "--format", "concise")
    assert "PC110" not in text and code == 0, text


@pytest.mark.skipif(os.name != "posix", reason="symbolic links")
def test_a_symlinked_folder_that_escapes_is_refused(capsys, layout):
    project, outside = layout
    (project / "data").symlink_to(outside, target_is_directory=True)
    path = write(project, 'import "../data/secret.pipe"')
    code, text = check(capsys, path)
    assert code == 1 and "PC110" in text and SECRET not in text
