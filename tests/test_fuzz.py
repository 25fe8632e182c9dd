"""A grammar-aware fuzzer for `pipec --check`: hypothesis builds syntactically valid `.pipe`
programs from the grammar's structure (constants, buffers, graphs with parameters, `init` and
`step` blocks, launches of the kernels in tests/fixtures/fuzz/kernels.cu with random arguments
and slices, `gemm` statements over views, `for`/`if`/`parallel` blocks and graph uses, device
control flow and collectives), then sometimes mutates them (truncation, deletion, duplication,
stray tokens, random bytes), and checks them in surroundings of their own (tests/
fuzz_surroundings.py: an imported library, `-D`, `pyproject.toml`, the environment). What
every answer must satisfy, tracebacks, hangs and silent passes included, is
tests/fuzz_oracle.py.

CI runs a bounded number of examples and a seeded campaign of a quarter of a minute;
`scripts/fuzz.py --minutes 10` runs the same generator and oracle for longer and counts inputs
and findings."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz_oracle import problems, run_check
from fuzz_surroundings import Surroundings, surroundings

KERNELS = Path(__file__).parent / "fixtures" / "fuzz" / "kernels.cu"
PROGRAM = "fuzzed.pipe"  # the fuzzed program's name, which the library's import cycle names
CAMPAIGN_MINUTES = 0.25
# name: parameter kinds, as the generator should bind them (it sometimes binds them wrongly)
KERNEL_PARAMS = {
    "fill_f32": ("out f32", "int"),
    "scale_f32": ("in f32", "out f32", "float", "int"),
    "bump_i32": ("inout i32", "int"),
    "flag_select": ("in i32", "in f32", "out f32", "int"),
}
DTYPES = ("f32", "i32", "f64", "u8", "bf16", "f16", "i64")
FUNCTIONS = ("min", "max", "abs", "log2", "ceil_div", "sqrt", "pow", "fill", "nope")
OPERATORS = ("+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^", "==", "!=", "<", "<=", ">",
             ">=", "and", "or", "@")
# Inserted by mutations: tokens of the language and characters it has no use for.
STRAY = ("{", "}", "(", ")", "[", "]", "<<<", ">>>", ",", ":", "..", "->", "=", "not", "step",
         "launch", "gemm", "with", "@", ".T", "graph", "for", "in", "out", "if", "else", "parallel", '"', "'", ";", "#",
         "\n", "\r", "\t", "\x00", "\ufeff", "\u00e9", "\U0001f600", "1e999", "0x", "9" * 400,
         '"\\x"', '"\\0"', "pow(1 << 255, 4096)")


def _names(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(count)]


def expressions(names: list[str], depth: int = 3) -> st.SearchStrategy[str]:
    """Constant expressions over `names`: literals, operators, calls, parentheses."""
    leaves = st.one_of(
        st.integers(-3, 300).map(str), st.sampled_from(["0x1F", "1_000", "2.5", "1e-3", "true",
                                                         "false", '"s"', "null", "step"]),
        *([st.sampled_from(names)] if names else []),
    )
    if depth == 0:
        return leaves
    inner = expressions(names, depth - 1)
    return st.one_of(
        leaves, leaves, leaves, leaves,
        # around the nesting limit, and long flat chains
        st.tuples(st.sampled_from(["-(", "abs(", "(1, ", "not ("]), st.integers(150, 260)).map(
            lambda p: p[0] * p[1] + "1" + ")" * p[1]),
        st.tuples(st.sampled_from([" + ", " * ", " - ", " or "]), st.integers(100, 3000)).map(
            lambda p: p[0].join(["1"] * p[1])),
        st.tuples(inner, st.sampled_from(OPERATORS), inner).map(" ".join),
        st.tuples(st.sampled_from(["-", "~", "not ", "+"]), inner).map("".join),
        inner.map(lambda e: f"({e})"),
        st.tuples(st.sampled_from(FUNCTIONS), st.lists(inner, max_size=3)).map(
            lambda c: f"{c[0]}({', '.join(c[1])})"),
    )


def small(names: list[str]) -> st.SearchStrategy[str]:
    """Loop bounds, sizes and indices: literals and loop variables or graph parameters, never
    the constants `C<n>`, whose values are random: the unrolled program stays small, so that
    an example takes well under a second."""
    names = [n for n in names if not n.startswith("C")] or ["1"]
    return st.one_of(st.integers(0, 4).map(str), st.sampled_from(names),
                     st.tuples(st.sampled_from(names), st.integers(1, 3)).map(lambda p: f"{p[0]} + {p[1]}"))


@st.composite
def arguments(draw, kernel: str, buffers: list[str], scope: list[str]) -> str:
    wanted = list(KERNEL_PARAMS.get(kernel, ("in f32",)))
    if draw(st.integers(0, 5)) == 0:  # a wrong count now and then
        wanted = wanted[: draw(st.integers(0, len(wanted)))] + ["int"] * draw(st.integers(0, 2))
    args = []
    for kind in wanted:
        if " " in kind and buffers:
            access, _ = kind.split()
            access = draw(st.sampled_from([access, access, "", "in", "out", "inout"]))
            buffer = draw(st.sampled_from(buffers))
            view = draw(st.sampled_from(["", "", "slice", "index"]))
            if view == "slice":
                buffer += f"[{draw(st.one_of(st.just(''), small(scope)))} : {draw(small(scope))}]"
            elif view == "index":
                buffer += f"[{draw(small(scope))}]"
            args.append(f"{access} {buffer}".strip())
        else:
            args.append(draw(st.one_of(small(scope), expressions(scope, 1))))
    return ", ".join(args)


@st.composite
def gemms(draw, buffers: list[str], scope: list[str]) -> str:
    """`gemm` statements over views of the buffers, scales, a bias, accumulation and options."""
    def view() -> str:
        name = draw(st.sampled_from(buffers or ["nothing"]))
        shapes = [name, f"{name}.T", f"{name}[{draw(small(scope))}]", f"{name}[0, {draw(small(scope))}]",
                  f"view({name}, {draw(small(scope))}, {draw(small(scope))})",
                  f"view({name}[0 : {draw(small(scope))}], 1, {draw(small(scope))}, {draw(small(scope))})"]
        return draw(st.sampled_from(shapes))

    target = view()
    text = f"gemm {target} = "
    if draw(st.booleans()):
        text += f"{draw(expressions(scope, 1))} * "
    text += f"{view()} @ {view()}"
    if draw(st.booleans()):
        text += f" + {view()}"
    if draw(st.booleans()):
        text += f" + {draw(st.sampled_from(['', '0.5 * ', 'step * ']))}{target}"
    options = draw(st.lists(st.sampled_from([
        "activation = relu", "activation = gelu", "gradient = relu", "compute = tf32", "compute = x",
        f"aux = {view()}", f"bias_grad = {view()}", "colour = red"]), max_size=3))
    return text + (f" with {', '.join(options)}" if options else "")


@st.composite
def collectives(draw, buffers: list[str], scope: list[str]) -> str:
    """`allreduce`, `broadcast`, `allgather`, `reducescatter`, over whole buffers, views and
    groups, with roots that depend on the rank now and then (PC601 to PC604)."""
    def operand() -> str:
        name = draw(st.sampled_from(buffers or ["nothing"]))
        return draw(st.sampled_from([name, name, f"{name}[0 : {draw(small(scope))}]"]))

    op = draw(st.sampled_from(["sum", "avg", "max", "min", "prod", "xor"]))
    group = ", ".join(operand() for _ in range(draw(st.integers(1, 2))))
    root = draw(st.sampled_from(["0", "WORLD_SIZE - 1", "RANK", "1", "-1"]))
    return draw(st.sampled_from([
        f"allreduce {op} {group}", f"broadcast {group} from {root}", f"allgather {operand()} -> {operand()}",
        f"reducescatter {op} {operand()} -> {operand()}"]))


@st.composite
def device_control_flow(draw, buffers: list[str], graphs, scope: list[str], depth: int) -> str:
    """Decisions the GPU takes, on a buffer's element: `if`/`else`, `switch`, `while`,
    `repeat`, `every`; with a condition written in the body, unbounded, or on a float now and
    then (PC320 to PC322)."""
    flag = f"{draw(st.sampled_from(buffers or ['nothing']))}[{draw(small(scope))}]"
    body = lambda: draw(blocks(buffers, graphs, scope, depth - 1))  # noqa: E731
    kind = draw(st.sampled_from(["if", "switch", "while", "repeat", "every"]))
    if kind == "if":
        return f"if {flag} {body()}" + (f" else {body()}" if draw(st.booleans()) else "")
    if kind == "switch":
        cases = draw(st.lists(st.integers(-1, 3), min_size=1, max_size=3))
        return f"switch {flag} {{\n" + "".join(f"    case {c} {body()}\n" for c in cases) + "}"
    if kind == "while":
        return f"while {flag} {body()}"
    return f"{kind} {draw(st.sampled_from(['0', '1', '3', 'C0', '-2', '1 << 40']))} {body()}"


@st.composite
def statements(draw, buffers: list[str], graphs: list[tuple[str, int]], scope: list[str],
               depth: int) -> str:
    kinds = ["launch", "launch", "fill", "copy", "gemm", "collective"]
    kinds += ["for", "if", "parallel", "device"] if depth else []
    kinds += ["call"] if graphs else []
    kind = draw(st.sampled_from(kinds))
    if kind == "collective":
        return draw(collectives(buffers, scope))
    if kind == "device":
        return draw(device_control_flow(buffers, graphs, scope, depth))
    if kind == "launch":
        kernel = draw(st.sampled_from([*KERNEL_PARAMS, "missing_kernel"]))
        grid = draw(st.one_of(small(scope), small(scope).map(lambda g: f"({g}, 1)")))
        block = draw(st.sampled_from(["32", "64", "(8, 4)", "2048", "0"]))
        shared = draw(st.sampled_from(["", "", ", 0", ", 1 << 20"]))
        return f"launch {kernel}<<<{grid}, {block}{shared}>>>({draw(arguments(kernel, buffers, scope))})"
    if kind == "fill":
        target = draw(st.sampled_from(buffers or ["nothing"]))
        return f"fill {target} = {draw(st.sampled_from(['0', '1.5', '-2', 'true']))}"
    if kind == "copy":
        a, b = draw(st.sampled_from(buffers or ["nothing"])), draw(st.sampled_from(buffers or ["nothing"]))
        return f"copy {a} -> {b}[0 : {draw(small(scope))}]"
    if kind == "gemm":
        return draw(gemms(buffers, scope))
    if kind == "call":
        name, arity = draw(st.sampled_from(graphs))
        count = draw(st.sampled_from([arity, arity, arity + 1]))
        args = [draw(small(scope)) for _ in range(count)]
        return name + (f"({', '.join(args)})" if args or draw(st.booleans()) else "")
    body = lambda inner_scope: draw(blocks(buffers, graphs, inner_scope, depth - 1))  # noqa: E731
    if kind == "for":
        var = f"i{depth}"
        return f"for {var} in {draw(small(scope))} .. {draw(small(scope))} {body(scope + [var])}"
    if kind == "if":
        condition = draw(st.one_of(expressions(scope, 1), st.sampled_from(["true", "false"])))
        text = f"if {condition} {body(scope)}"
        if draw(st.booleans()):
            text += f" else {body(scope)}"
        return text
    if draw(st.booleans()):
        return f"parallel {body(scope)}"
    return f"parallel for p{depth} in 0 .. {draw(small(scope))} {body(scope + [f'p{depth}'])}"


@st.composite
def blocks(draw, buffers, graphs, scope, depth: int) -> str:
    items = draw(st.lists(statements(buffers, graphs, scope, depth), max_size=4))
    return "{\n" + "".join(f"    {item}\n" for item in items) + "}"


@st.composite
def programs(draw) -> str:
    """A `.pipe` program that follows the grammar; its meaning is random."""
    lines = [f'from "kernels.cu" import {", ".join(KERNEL_PARAMS)}']
    consts: list[str] = []
    for name in _names("C", draw(st.integers(0, 4))):
        lines.append(f"const {name} = {draw(expressions(consts))}")
        consts.append(name)
    buffers = _names("b", draw(st.integers(0, 4)))
    for name in buffers:
        dims = st.one_of(small([]), st.sampled_from(consts)) if consts else small([])
        shape = ", ".join(draw(st.lists(dims, min_size=1, max_size=2)))
        modifiers = draw(st.sampled_from(["", "", " mapped", " mapped labels(a, b)", " replicated"]))
        init = draw(st.sampled_from(["", "", " = uninit", " = fill(1.5)", " = uniform(-1.0, 1.0, seed=3)",
                                     " = fill(C0)", ' = load("missing.npy")']))
        lines.append(f"buffer {name}: {draw(st.sampled_from(DTYPES))}[{shape}]{modifiers}{init}")
    if draw(st.booleans()):
        lines.append(f"option lanes = {draw(st.integers(0, 4))}")
    graphs: list[tuple[str, int]] = []
    for name in _names("g", draw(st.integers(0, 2))):
        params = _names(f"{name}_", draw(st.integers(0, 2)))
        body = draw(blocks(buffers, graphs, consts + params, 2))
        lines.append(f"graph {name}{'(' + ', '.join(params) + ')' if params else ''} {body}")
        graphs.append((name, len(params)))
    if draw(st.booleans()):
        lines.append(f"init {draw(blocks(buffers, [], consts, 1))}")
    if draw(st.integers(0, 9)):
        lines.append(f"step {draw(blocks(buffers, graphs, consts, 2))}")
    if draw(st.integers(0, 5)) == 0:
        lines.append(f'waive {draw(st.sampled_from(["PC305", "PC999"]))} for fill_f32: "reason"')
    return "\n".join(lines) + "\n"


@st.composite
def mutated(draw, sources: st.SearchStrategy[str]) -> bytes:
    """A program with a few edits: cut off, a range deleted or duplicated, a stray token, a
    random byte. Bytes, since an edit may break the encoding."""
    data = draw(sources).encode()
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(data)))
        action = draw(st.sampled_from(["truncate", "delete", "duplicate", "insert", "byte"]))
        if action == "truncate":
            data = data[:at]
        elif action == "delete":
            data = data[:at] + data[at + draw(st.integers(1, 40)):]
        elif action == "duplicate":
            data = data[:at] + data[max(0, at - draw(st.integers(1, 60))):at] + data[at:]
        elif action == "insert":
            data = data[:at] + draw(st.sampled_from(STRAY)).encode() + data[at:]
        else:
            data = data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1:]
    return data


def inputs() -> st.SearchStrategy[bytes]:
    return st.one_of(programs().map(str.encode), mutated(programs()))


def cases() -> st.SearchStrategy[tuple[bytes, Surroundings]]:
    """A program (or a mutated one) with its imports on top, in its surroundings."""
    return st.tuples(inputs(), surroundings()).map(
        lambda case: ("".join(f"{line}\n" for line in case[1].imports).encode() + case[0], case[1]))


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("fuzz")
    shutil.copy(KERNELS, folder / "kernels.cu")
    return folder


def _check(workspace: Path, data: bytes, around: Surroundings = Surroundings()) -> None:
    path = workspace / PROGRAM
    path.write_bytes(data)
    around.write(workspace)
    assert problems(path, around)[2] == []


# CI bounds these by example counts (and the campaign below by time): together some two minutes
# on two cores.
_BOUNDED = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])


@_BOUNDED
@given(programs().map(str.encode))
def test_generated_programs(workspace, data):
    _check(workspace, data)


@_BOUNDED
@given(mutated(programs()))
def test_mutated_programs(workspace, data):
    _check(workspace, data)


@settings(_BOUNDED, max_examples=40)
@given(cases())
def test_programs_in_their_surroundings(workspace, case):
    """Imports, -D, pyproject.toml and the environment, right and wrong, around a program."""
    _check(workspace, *case)


def test_a_fixed_seed_campaign_in_a_time_bound_finds_nothing(tmp_path):
    """scripts/fuzz.py as CI runs it: seeded rounds (the same inputs on every run, as far as
    the time bound reaches), each input under a hang alarm; any traceback, hang, wrong status
    or silent pass is a finding."""
    spec = importlib.util.spec_from_file_location("fuzz_script", Path(__file__).parents[1] / "scripts" / "fuzz.py")
    assert spec is not None and spec.loader is not None
    fuzz_script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fuzz_script)
    count, statuses, _, findings = fuzz_script.fuzz(CAMPAIGN_MINUTES, tmp_path)
    assert findings == [] and count > 0, (count, statuses)  # how many: as fast as the machine is


def test_the_generator_reaches_clean_and_failing_programs(workspace):
    """The generator is worth its time only if some programs pass and others fail late."""
    seen: set[int] = set()
    Surroundings().write(workspace)  # no pyproject.toml another test left

    @settings(max_examples=30, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(programs())
    def collect(text):
        path = workspace / "collect.pipe"
        path.write_text(text)
        seen.add(run_check(path, "json")[0])

    collect()
    assert {0, 1} <= seen


@pytest.mark.parametrize("text", [
    # Findings of scripts/fuzz.py, kept as fixed examples.
    'buffer b: f32[4]\nstep { launch fill_f32<<<1, 32>>>(out b, "s") }\n',  # a string for an int
])
def test_former_findings(workspace, text):
    _check(workspace, f'from "kernels.cu" import {", ".join(KERNEL_PARAMS)}\n{text}'.encode())
