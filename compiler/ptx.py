"""Reading PTX: kernel entries, their parameters and launch bounds, and the instructions the
graph-safety rules forbid, mapped back to CUDA source lines through `.loc` line info.

PTX is the ground truth for what a kernel does: an atomic hidden in a macro, a template, an
inline device helper or inline assembly is an `atom`/`red` instruction here all the same.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_FUNC_HEADER = re.compile(r"^\s*(?:\.(?:visible|weak|extern)\s+)*\.(entry|func)\s+(?:\([^)]*\)\s*)?([\w$]+)")
_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"')
_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)(?:.*?inlined_at\s+(\d+)\s+(\d+)\s+(\d+))?")
_LABEL = re.compile(r"^\s*(\$?[\w$]+):")
_BRANCH = re.compile(r"\bbra(?:\.uni)?\s+(\$?[\w$]+)\s*;")
_CALL = re.compile(r"\bcall(?:\.uni)?\s+(?:\([^)]*\)\s*,\s*)?([\w$]+)")
_BOUNDS = re.compile(r"\.(maxntid|reqntid)\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?")
_GLOBAL_ARRAY = re.compile(
    r"^\s*(?:\.visible\s+)?\.global\s+(?:\.align\s+\d+\s+)?\.(b8|u32|b32)\s+([\w$]+)\[(\d+)\]"
    r"(?:\s*=\s*\{([^}]*)\})?"
)

ATOMIC_OPCODES = ("atom.", "red.", "multimem.red", "cp.reduce.async")
_DEVICE_FENCE = re.compile(r"^(membar\.(gl|sys)|fence\.(sc|acq_rel|acquire|release)\.(gpu|sys)|fence\.(gpu|sys))\b")
_STRONG_LOAD = re.compile(
    r"^ld\.(volatile(\.global)?|global\.cv|(acquire|relaxed)\.(gpu|sys)(\.global)?)\.[a-z]\d+"
)
_SHARED_OR_LOCAL_STORE = re.compile(r"^st\.(shared|local|param)")


@dataclass(frozen=True)
class Location:
    file: str
    line: int
    column: int


@dataclass(frozen=True)
class Finding:
    rule: str  # atomics | fence-barrier | spin-wait
    instruction: str
    location: Location | None
    inlined_at: Location | None = None


@dataclass
class Function:
    name: str
    is_entry: bool
    params: int = 0
    max_threads: int | None = None
    findings: list[Finding] = field(default_factory=list)
    callees: set[str] = field(default_factory=set)


@dataclass
class PtxModule:
    functions: dict[str, Function]
    files: dict[int, str]
    globals: dict[str, list[int]]  # u32 arrays by name (the signature probe's output)

    @property
    def entries(self) -> list[Function]:
        return [f for f in self.functions.values() if f.is_entry]

    def findings(self, entry: str) -> list[Finding]:
        """Findings of an entry and of every function it calls, transitively."""
        seen, stack, out = set(), [entry], []
        while stack:
            name = stack.pop()
            if name in seen or name not in self.functions:
                continue
            seen.add(name)
            function = self.functions[name]
            out.extend(function.findings)
            stack.extend(function.callees)
        return out


def _opcode(line: str) -> str:
    body = " ".join(line.split())
    if body.startswith("@"):
        body = body.split(None, 1)[1] if " " in body else ""
    return body


def _u32_words(kind: str, count: int, values: str) -> list[int]:
    numbers = [int(v.strip(), 0) for v in values.split(",") if v.strip()]
    if kind == "b8":
        data = bytes(numbers) + bytes(count - len(numbers))
        return [int.from_bytes(data[i : i + 4], "little") for i in range(0, len(data) - 3, 4)]
    return numbers + [0] * (count - len(numbers))


def parse(ptx: str) -> PtxModule:
    lines = ptx.splitlines()
    module = PtxModule({}, {}, {})
    for line in lines:
        if m := _FILE.match(line):
            module.files[int(m.group(1))] = m.group(2)
        elif m := _GLOBAL_ARRAY.match(line):
            module.globals[m.group(2)] = _u32_words(m.group(1), int(m.group(3)), m.group(4) or "")
    i = 0
    while i < len(lines):
        m = _FUNC_HEADER.match(lines[i])
        if not m:
            i += 1
            continue
        function = Function(m.group(2), m.group(1) == "entry")
        module.functions[function.name] = function
        i = _read_function(lines, i, function, module.files)
    return module


def _read_function(lines: list[str], i: int, function: Function, files: dict[int, str]) -> int:
    # Header: parameters and performance directives up to the opening brace.
    while i < len(lines) and not lines[i].strip().startswith("{"):
        text = lines[i]
        if text.rstrip().endswith(";"):  # a prototype (`.extern .func ...;`), no body
            return i + 1
        function.params += len(re.findall(r"\.param\b", text)) if function.is_entry else 0
        for kind, x, y, z in _BOUNDS.findall(text):
            threads = int(x) * int(y or 1) * int(z or 1)
            function.max_threads = min(function.max_threads or threads, threads)
        i += 1
    if i >= len(lines):
        return i
    depth, body = 0, []
    while i < len(lines):
        text = lines[i]
        depth += text.count("{") - text.count("}")
        body.append(text)
        i += 1
        if depth <= 0:
            break
    _scan_body(body, function, files)
    return i


def _scan_body(body: list[str], function: Function, files: dict[int, str]) -> None:
    location: Location | None = None
    inlined: Location | None = None
    labels: dict[str, int] = {}
    instructions: list[tuple[int, str, Location | None, Location | None]] = []
    for index, text in enumerate(body):
        if m := _LOC.match(text):
            file = files.get(int(m.group(1)), m.group(1))
            location = Location(file, int(m.group(2)), int(m.group(3)))
            inlined = (
                Location(files.get(int(m.group(4)), m.group(4)), int(m.group(5)), int(m.group(6)))
                if m.group(4) else None
            )
            continue
        if m := _LABEL.match(text):
            labels[m.group(1)] = index
            continue
        op = _opcode(text)
        if not op or op.startswith((".", "//", "{", "}")):
            continue
        instructions.append((index, op, location, inlined))
        if op.startswith(ATOMIC_OPCODES):
            function.findings.append(Finding("atomics", op.rstrip(";"), location, inlined))
        elif _DEVICE_FENCE.match(op):
            function.findings.append(Finding("fence-barrier", op.rstrip(";"), location, inlined))
        if m := _CALL.search(op):
            function.callees.add(m.group(1))
    _find_spin_loops(instructions, labels, function)


def _find_spin_loops(instructions, labels: dict[str, int], function: Function) -> None:
    """A backward branch whose loop body polls memory other blocks can write, and stores
    nothing that another thread could observe, is a spin wait."""
    for position, (index, op, location, inlined) in enumerate(instructions):
        m = _BRANCH.search(op)
        if not m or labels.get(m.group(1), index) >= index:
            continue
        start = labels[m.group(1)]
        body = [entry for entry in instructions[: position + 1] if entry[0] >= start]
        polls = [e for e in body if _STRONG_LOAD.match(e[1]) or e[1].startswith("nanosleep")]
        stores = [
            e for e in body
            if e[1].startswith(("st.", "atom.", "red.")) and not _SHARED_OR_LOCAL_STORE.match(e[1])
        ]
        if polls and not stores:
            _, poll_op, poll_loc, poll_inlined = polls[0]
            function.findings.append(Finding("spin-wait", poll_op.rstrip(";"), poll_loc, poll_inlined))
