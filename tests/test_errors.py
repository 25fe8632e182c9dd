"""One base class for everything pipec raises: `pipec.Error`."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import pipec

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("cli", "dsl", "compiler", "plan", "runtime")


def _exception_classes():
    """(module, class name) of every class in the package whose name or bases say it is an
    exception: a base named `Exception`/`BaseException`/`...Error`, or a name ending in Error."""
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef) and any(
                        isinstance(b, ast.Name) and (b.id.endswith(("Error", "Exception")) or b.id == "Error")
                        for b in node.bases):
                    yield module, node.name


EXCEPTIONS = sorted(set(_exception_classes()))


def test_the_scan_finds_the_runtime_and_compiler_errors():
    names = {name for _, name in EXCEPTIONS}
    assert {"PipelineError", "CudaError", "NoDevice", "BindError", "ConfigError", "PipeSyntaxError"} <= names


@pytest.mark.parametrize("module,name", EXCEPTIONS, ids=lambda v: str(v))
def test_every_exception_class_derives_from_pipec_error(module, name):
    cls = getattr(importlib.import_module(f"pipec.{module}"), name)
    assert issubclass(cls, pipec.Error), f"pipec.{module}.{name} does not derive from pipec.Error"


def test_the_package_exports_each_public_error():
    for name in pipec.ERRORS:
        assert issubclass(getattr(pipec, name), pipec.Error), name
    public = {name for module, name in EXCEPTIONS
              if not name.startswith("_") and module.startswith("runtime")}
    assert public <= set(pipec.ERRORS), "a runtime error pipec.py does not export"


def test_the_api_docs_list_every_exported_error():
    text = (ROOT / "docs" / "python-api.md").read_text()
    assert [name for name in pipec.ERRORS if f"`{name}`" not in text] == []
