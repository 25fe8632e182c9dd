"""scripts/mutate.py: each operator yields the expected mutant, and a run over a toy package
tells a killed mutant from a surviving one without changing any file."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "mutate.py"
_spec = importlib.util.spec_from_file_location("mutate_tool", SCRIPT)
mutate = sys.modules["mutate_tool"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mutate)


def _mutants(body: str) -> dict[str, str]:
    """Each mutant's label (without the path) -> the mutated function body."""
    source = textwrap.dedent(body)
    found = {}
    for m in mutate.generate(source, "m.py"):
        tree = mutate.mutated_tree(source, m)
        found[m.label().removeprefix("m.py:")] = ast.unparse(tree.body[0].body)
    return found


@pytest.mark.parametrize("expression, mutant", [
    ("a < b", "a <= b"), ("a <= b", "a < b"), ("a > b", "a >= b"), ("a >= b", "a > b"),
    ("a == b", "a != b"), ("a != b", "a == b"), ("a is None", "a is not None"), ("a in b", "a not in b"),
    ("a + b", "a - b"), ("a - b", "a + b"), ("a * b", "a // b"), ("a // b", "a * b"),
    ("a and b", "a or b"), ("a or b", "a and b"), ("not a", "a"),
    ("0", "1"), ("1", "0"), ("1", "2"), ("7", "8"), ("True", "False"), ("False", "True"),
    ("a[i:j]", "a[i + 1:j]"), ("a[i:j]", "a[i - 1:j]"), ("a[i:j]", "a[i:j + 1]"), ("a[i:j]", "a[i:j - 1]"),
])
def test_each_operator_gives_its_mutant(expression, mutant):
    found = _mutants(f"def f(a, b, i, j):\n    return {expression}\n")
    assert f"2: {expression} -> {mutant}" in found
    assert found[f"2: {expression} -> {mutant}"] == f"return {mutant}"
    assert found[f"2: return {expression} -> return None"] == "return None"


def test_statements_are_deleted_and_loops_swap_break_and_continue():
    found = _mutants("""
        def f(items):
            for item in items:
                if item:
                    break
                else:
                    continue
            items.append(1)
        """)
    assert found["5: break -> continue"] == ("for item in items:\n    if item:\n        continue\n"
                                             "    else:\n        continue\nitems.append(1)")
    assert found["7: continue -> break"].endswith("else:\n        break\nitems.append(1)")
    assert found["8: items.append(1) -> (deleted)"].endswith("continue\npass")
    assert "4: if item: ... -> (deleted)" in found


def test_docstrings_annotations_and_messages_are_left_alone():
    found = _mutants('''
        def f(a: list[int], n: int = 2) -> int:
            """Count 1 thing."""
            raise ValueError(f"{n + 1} items")
        ''')
    assert list(found) == ["2: 2 -> 3", "4: raise ValueError(f'{n + 1} items') -> (deleted)"]
    assert [m.line for m in mutate.generate("x: int = 1\n", "m.py")] == [1, 1]  # the value, not the type


def test_module_level_code_is_marked_as_running_at_import():
    mutants = mutate.generate("LIMIT = 4\n\ndef f(x):\n    return x < LIMIT\n", "m.py")
    assert {m.line: m.module_level for m in mutants} == {1: True, 4: False}


def test_module_names_follow_the_package_root(tmp_path):
    (tmp_path / "compiler").mkdir()
    assert mutate.module_name(tmp_path / "compiler" / "dag.py", tmp_path, "pipec") == "pipec.compiler.dag"
    assert mutate.module_name(tmp_path / "compiler" / "__init__.py", tmp_path, "pipec") == "pipec.compiler"


def _run_toy(tmp_path: Path, module: str, source: str, tests: str) -> tuple[subprocess.CompletedProcess, dict]:
    """scripts/mutate.py over a package `toy` of one module and one test file: the run, and
    the module's entry in its JSON."""
    toy = tmp_path / "toy"
    (toy / "tests").mkdir(parents=True)
    (toy / "__init__.py").write_text("")
    (toy / "pytest.ini").write_text("[pytest]\n")
    (toy / module).write_text(textwrap.dedent(source))
    (toy / "tests" / f"test_{Path(module).stem}.py").write_text(textwrap.dedent(tests))
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    run = subprocess.run([sys.executable, str(SCRIPT), module, "--root", str(toy), "--package", "toy",
                          "--jobs", "2", "--json", str(tmp_path / "out.json")],
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    return run, json.loads((tmp_path / "out.json").read_text())["modules"][module]


def test_a_run_kills_and_keeps_mutants_and_leaves_the_file_unchanged(tmp_path):
    source = """\
        def clamp(x, low, high):
            if x < low:
                return low
            if x > high:
                return high
            return x


        def unused(x):
            return x + 1
        """
    tests = """\
        from toy.calc import clamp


        def test_clamp():
            assert clamp(-1, 0, 10) == 0
            assert clamp(11, 0, 10) == 10
            assert clamp(5, 0, 10) == 5
        """
    run, result = _run_toy(tmp_path, "calc.py", source, tests)
    assert (tmp_path / "toy" / "calc.py").read_text() == textwrap.dedent(source)
    survivors = {(s["line"], s["original"], s["mutated"], s["status"]) for s in result["survivors"]}
    assert survivors == {
        (2, "x < low", "x <= low", "survived"),  # equivalent: clamp(low) is low either way
        (4, "x > high", "x >= high", "survived"),
        (10, "return x + 1", "return None", "uncovered"),
        (10, "x + 1", "x - 1", "uncovered"),
        (10, "1", "2", "uncovered"),
        (10, "1", "0", "uncovered"),
    }
    assert (result["total"], result["error"], result["timeout"]) == (result["killed"] + 6, 0, 0)
    assert result["killed"] == 5  # both `if`s deleted, three returns of None
    assert "calc.py:2: x < low -> x <= low" in run.stdout


def test_lines_a_test_runs_on_a_thread_of_its_own_are_covered(tmp_path):
    _, result = _run_toy(tmp_path, "worker.py", """\
        import threading


        def _work(out, x):
            out.append(x * 2)


        def double(x):
            out = []
            thread = threading.Thread(target=_work, args=(out, x))
            thread.start()
            thread.join()
            return out[0]
        """, "from toy.worker import double\n\n\ndef test_double():\n    assert double(3) == 6\n")
    assert [s for s in result["survivors"] if s["line"] == 5] == []  # `_work` runs only on the thread


def test_a_cached_functions_lines_count_for_every_test_that_calls_it(tmp_path):
    # the first test calls `label` without checking it; the second checks it: without clearing
    # the cache between tests, the mutant of its body would run the first test only, and survive
    _, result = _run_toy(tmp_path, "labels.py", """\
        from functools import cache


        @cache
        def label(mode):
            return "RAW" if mode & 1 else "WAW"
        """, """\
        from toy.labels import label


        def test_a_call():
            label(1), label(2)


        def test_the_label():
            assert label(2) == "WAW" and label(1) == "RAW"
        """)
    assert result["total"] > 0 and result["survivors"] == []


def test_a_line_that_runs_at_import_counts_for_the_tests_of_the_module(tmp_path):
    # a decorator's body runs when the module is imported, while pytest collects the tests:
    # its mutant (`return run` -> `return None`) must run them, not be left uncovered
    _, result = _run_toy(tmp_path, "deco.py", """\
        def logged(function):
            def run(x):
                return function(x)
            return run


        @logged
        def double(x):
            return 2 * x
        """, "from toy.deco import double\n\n\ndef test_double():\n    assert double(3) == 6\n")
    assert [s for s in result["survivors"] if s["line"] == 4] == []
    assert result["uncovered"] == 0


def test_a_constant_too_large_to_change_by_one_is_left_alone():
    assert [m.mutated for m in mutate.generate("x = 1e300\n", "m.py")] == []
