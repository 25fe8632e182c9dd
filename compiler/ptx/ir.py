"""Reading PTX: kernel entries, their parameters and launch bounds, every instruction of every
function mapped back to CUDA source lines through `.loc` line info (with the whole chain of
lines that inlined it), and the instructions the graph-safety rules forbid.

PTX is the ground truth for what a kernel does: an atomic hidden in a macro, a template, an
inline device helper or inline assembly is an `atom`/`red` instruction here all the same.
Instructions are split at `;`, so a line of inline assembly holding several instructions, a
`{ }` scope of its own, or a `call` whose operands span several lines are read like any other.
A register declared inside a `{ }` scope is that scope's own (`__syncthreads_or` and inline
assembly declare `%p1` there, shadowing the function's `%p1`): its operands are renamed
`%p1$N`, N the scope, so data flow never mixes the two; the text shows them as written.
Loops (cfg.py), calls (calls.py) and pointer provenance (writes.py) build on this, through
analysis.py; nothing here imports them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

_FUNC_HEADER = re.compile(r"^\s*(?:\.(?:visible|weak|extern)\s+)*\.(entry|func)\s+(?:\([^)]*\)\s*)?([\w$]+)")
_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"')
_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)(?:.*?inlined_at\s+(\d+)\s+(\d+)\s+(\d+))?")
_LABEL = re.compile(r"^\s*([\w$]+)\s*:(?!:)")
_GUARD = re.compile(r"^@(!?)([%\w$]+)\s+")
_REG_DECL = re.compile(r"^\.reg\s+(?:\.v\d\s+)?\.\w+\s+(.*)$")
_BOUNDS = re.compile(r"\.(maxntid|reqntid)\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?")
_CLUSTER = re.compile(r"\.reqnctapercluster\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?")
_GLOBAL_ARRAY = re.compile(
    r"^\s*(?:\.visible\s+)?\.global\s+(?:\.align\s+\d+\s+)?\.(b8|u32|b32)\s+([\w$]+)\[(\d+)\]"
    r"(?:\s*=\s*\{([^}]*)\})?"
)
_INITIALIZER = re.compile(r"=\s*\{([^}]*)\}")

ATOMIC_OPCODES = ("atom.", "red.", "multimem.red", "cp.reduce.async")
_DEVICE_FENCE = re.compile(r"^(membar\.(gl|sys)|fence\.(sc|acq_rel|acquire|release)\.(gpu|sys)|fence\.(gpu|sys))\b")


@dataclass(frozen=True)
class Location:
    """A source line, with the chain of lines that reached it: `caller` is where the function
    holding this line was inlined (`.loc ... inlined_at`), or called when `called` is set (a
    `call` instruction, for a finding in a function that is not inlined). The outermost line of
    the chain lies in the kernel's own body."""

    file: str
    line: int
    column: int
    caller: Location | None = None
    called: bool = False  # `caller` is a call instruction, not an inlining

    def chain(self) -> list[Location]:
        """This line and every line that reached it, innermost first."""
        lines, current = [], self
        while current is not None:
            lines.append(current)
            current = current.caller
        return lines

    def called_from(self, call: Location) -> Location:
        """This location in a function that a `call` at `call` reaches: the call site becomes
        the caller of the chain's outermost line."""
        if self.caller is None:
            return replace(self, caller=call, called=True)
        return replace(self, caller=self.caller.called_from(call))


def reached_through(location: Location | None, call: Location | None) -> Location | None:
    """A callee's location seen from the call that reaches it (the call's own when the callee's
    instruction has no line info)."""
    if location is None or call is None:
        return location or call
    return location.called_from(call)


@dataclass(frozen=True)
class Finding:
    rule: str  # atomics | fence-barrier | spin-wait | grid-sync | unfollowed-call
    instruction: str
    location: Location | None


@dataclass(frozen=True)
class Instruction:
    position: int  # index in its function's instruction list
    guard: str | None  # the predicate of `@p` / `@!p`, without the `!`
    opcode: str  # `ld.volatile.global.u32`
    operands: tuple[str, ...]  # split at top-level commas
    location: Location | None  # with the chain of inlined call sites that reached it
    target: int | None = None  # a branch's resolved label position
    written: str | None = None  # the text before a scope's own registers were renamed

    @property
    def text(self) -> str:
        if self.written is not None:
            return self.written
        guard = f"@{self.guard} " if self.guard else ""
        return f"{guard}{self.opcode} {', '.join(self.operands)}".strip()

    def finding(self, rule: str, instruction: str | None = None) -> Finding:
        return Finding(rule, instruction or self.text, self.location)


@dataclass
class Function:
    name: str
    is_entry: bool
    params: int = 0
    max_threads: int | None = None
    cluster: tuple[int, int, int] | None = None  # `__cluster_dims__`: blocks per cluster
    has_body: bool = False
    instructions: list[Instruction] = field(default_factory=list)
    registers: set[str] = field(default_factory=set)  # names declared with `.reg` (inline asm)
    findings: list[Finding] = field(default_factory=list)  # of this body alone


@dataclass
class PtxModule:
    functions: dict[str, Function]
    files: dict[int, str]
    globals: dict[str, list[int]]  # u32 arrays by name (the signature probe's output)
    initializer_names: set[str] = field(default_factory=set)  # names inside `.global` initialisers

    @property
    def entries(self) -> list[Function]:
        return [f for f in self.functions.values() if f.is_entry]


def _u32_words(kind: str, count: int, values: str) -> list[int]:
    numbers = [int(v.strip(), 0) for v in values.split(",") if v.strip()]
    if kind == "b8":
        data = bytes(numbers) + bytes(count - len(numbers))
        return [int.from_bytes(data[i : i + 4], "little") for i in range(0, len(data) - 3, 4)]
    return numbers + [0] * (count - len(numbers))


def parse(ptx: str) -> PtxModule:
    """The structure of a PTX text: its functions, instructions, files and u32 globals. The
    analyses (compiler/ptx/analysis.py) run over what this returns."""
    lines = ptx.splitlines()
    module = PtxModule({}, {}, {})
    for line in lines:
        if m := _FILE.match(line):
            module.files[int(m.group(1))] = m.group(2)
        elif m := _GLOBAL_ARRAY.match(line):
            module.globals[m.group(2)] = _u32_words(m.group(1), int(m.group(3)), m.group(4) or "")
        if line.lstrip().startswith(".global") and (m := _INITIALIZER.search(line)):
            module.initializer_names.update(re.findall(r"[A-Za-z_$][\w$]*", m.group(1)))
    i = 0
    while i < len(lines):
        m = _FUNC_HEADER.match(lines[i])
        if not m:
            i += 1
            continue
        function = Function(m.group(2), m.group(1) == "entry")
        i = _read_function(lines, i, function, module.files)
        if function.has_body or function.name not in module.functions:  # a prototype never hides a body
            module.functions[function.name] = function
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
        if m := _CLUSTER.search(text):
            function.cluster = (int(m.group(1)), int(m.group(2) or 1), int(m.group(3) or 1))
        i += 1
    if i >= len(lines):
        return i
    function.has_body = True
    depth, body = 0, []
    while i < len(lines):
        text = lines[i]
        depth += text.count("{") - text.count("}")
        body.append(text)
        i += 1
        if depth <= 0:
            break
    _BodyReader(function, files).read(body)
    return i


class _BodyReader:
    """Splits a function body into instructions: at `;`, at `{`/`}` that open and close scopes
    (inline assembly declares registers and labels of its own inside them), and at labels."""

    def __init__(self, function: Function, files: dict[int, str]) -> None:
        self.function, self.files = function, files
        self.location: Location | None = None
        self.recent: dict[tuple[str, int, int], Location] = {}  # the latest `.loc` of each line
        self.scopes: list[int] = [0]  # the open scopes, innermost last
        self.parents: dict[int, int] = {0: 0}
        self.labels: dict[tuple[int, str], int] = {}
        self.branches: list[tuple[int, str, int]] = []  # (position, label, scope)
        self.declared: dict[int, dict[str, int | None]] = {}  # a nested scope's registers: name or
        self.pending = ""                                      # `%r<5>` prefix -> None or count

    def read(self, body: list[str]) -> None:
        for text in body[1:-1] if len(body) > 1 else []:
            if m := _LOC.match(text):
                self._locate(m)
                continue
            self._feed(text.split("//", 1)[0])
        instructions = self.function.instructions
        for position, label, scope in self.branches:
            target = self._resolve(label, scope)
            instructions[position] = replace(instructions[position], target=target)
        self._scan_findings()

    def _locate(self, m: re.Match) -> None:
        """A `.loc`: an inlined line names its call site, which the compiler has just given a
        `.loc` of its own (itself inlined elsewhere, or in this function's body), outermost
        first; the latest `.loc` of that line carries the rest of the chain."""
        line = (self.files.get(int(m.group(1)), m.group(1)), int(m.group(2)), int(m.group(3)))
        caller = None
        if m.group(4):
            site = (self.files.get(int(m.group(4)), m.group(4)), int(m.group(5)), int(m.group(6)))
            caller = self.recent.get(site) or Location(*site)
        self.location = self.recent[line] = Location(*line, caller)

    def _feed(self, text: str) -> None:
        nesting = 0  # braces inside one statement: vector operands `{%r1, %r2}`
        for ch in text:
            if ch == "{" and not self.pending.strip():
                child = len(self.parents)
                self.parents[child] = self.scopes[-1]
                self.scopes.append(child)
            elif ch == "}" and nesting == 0 and not self.pending.strip():
                if len(self.scopes) > 1:
                    self.scopes.pop()
            elif ch == ";":
                self._statement(self.pending)
                self.pending = ""
            else:
                nesting += {"{": 1, "}": -1}.get(ch, 0)
                self.pending += ch
                if ch == ":" and (m := _LABEL.match(self.pending)) and m.end() == len(self.pending):
                    self.labels[(self.scopes[-1], m.group(1))] = len(self.function.instructions)
                    self.pending = ""
        self.pending += " "

    def _statement(self, text: str) -> None:
        text = " ".join(text.split())
        if not text:
            return
        if text.startswith("."):
            if m := _REG_DECL.match(text):
                self._declare([name.strip() for name in m.group(1).split(",")])
            return
        guard = None
        if m := _GUARD.match(text):
            guard, text = m.group(2), text[m.end():]
        opcode, _, rest = text.partition(" ")
        position = len(self.function.instructions)
        instruction = Instruction(position, guard, opcode, tuple(split_operands(rest)), self.location)
        if any(scope in self.declared for scope in self.scopes):
            instruction = self._scoped(instruction)
        self.function.instructions.append(instruction)
        if opcode.split(".")[0] in ("bra", "brx") and instruction.operands:
            self.branches.append((position, instruction.operands[-1], self.scopes[-1]))

    def _declare(self, names: list[str]) -> None:
        scope = self.scopes[-1]
        self.function.registers.update(name for name in names if "<" not in name)
        if scope == 0:
            return
        for name in names:
            prefix, _, count = name.partition("<")
            self.declared.setdefault(scope, {})[prefix] = int(count.rstrip(">")) if count else None

    def _owner(self, name: str) -> int | None:
        """The innermost open nested scope that declares a register of this name."""
        for scope in reversed(self.scopes):
            for prefix, count in self.declared.get(scope, {}).items():
                if name == prefix if count is None else (
                        name.startswith(prefix) and name[len(prefix):].isdigit()
                        and int(name[len(prefix):]) < count):
                    return scope
        return None

    def _scoped(self, instruction: Instruction) -> Instruction:
        """The instruction with the registers its scopes declare renamed `name$scope`."""
        def rename(match: re.Match) -> str:
            name = match.group(0)
            scope = self._owner(name)
            if scope is None:
                return name
            self.function.registers.add(f"{name}${scope}")
            return f"{name}${scope}"

        operands = tuple(_REGISTER.sub(rename, operand) for operand in instruction.operands)
        guard = instruction.guard and _REGISTER.sub(rename, instruction.guard)
        if (operands, guard) == (instruction.operands, instruction.guard):
            return instruction
        return replace(instruction, operands=operands, guard=guard, written=instruction.text)

    def _resolve(self, label: str, scope: int) -> int | None:
        while True:
            if (scope, label) in self.labels:
                return self.labels[(scope, label)]
            if scope == 0:
                return None
            scope = self.parents[scope]

    def _scan_findings(self) -> None:
        for instruction in self.function.instructions:
            if instruction.opcode.startswith(ATOMIC_OPCODES):
                self.function.findings.append(instruction.finding("atomics"))
            elif _DEVICE_FENCE.match(instruction.opcode):
                self.function.findings.append(instruction.finding("fence-barrier"))


def split_operands(text: str) -> list[str]:
    """Operands split at commas outside `{}`, `[]` and `()`."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    if "".join(current).strip():
        parts.append("".join(current).strip())
    return parts


_REGISTER = re.compile(r"%[\w$]+|[A-Za-z_$][\w$]*")


def registers(function: Function, operand: str) -> list[str]:
    """The registers an operand names: `%r1`, the parts of `{%r1, %r2}`, the base of `[%rd1+4]`,
    and registers inline assembly declares without a `%`."""
    return [t for t in _REGISTER.findall(operand) if t.startswith("%") or t in function.registers]


NO_DESTINATION = ("st", "red", "bra", "brx", "call", "ret", "exit", "bar", "barrier", "membar", "fence",
                  "prefetch", "prefetchu", "nanosleep", "cp", "multimem", "trap", "brkpt", "setmaxnreg",
                  "stmatrix", "sust", "sured", "pmevent", "griddepcontrol", "discard", "applypriority",
                  "tensormap")


def _has_destination(instruction: Instruction) -> bool:
    """Whether the first operand is a result: not for the heads above, except a barrier's
    reduction (`bar.red.or.pred %p2, 0, %p1`, `__syncthreads_or`) and a multicast load
    (`multimem.ld_reduce`)."""
    parts = instruction.opcode.split(".")
    if parts[0] in ("bar", "barrier"):
        return "red" in parts
    return parts[0] not in NO_DESTINATION or instruction.opcode.startswith("multimem.ld_reduce")


def destinations(function: Function, instruction: Instruction) -> list[str]:
    if not instruction.operands or not _has_destination(instruction):
        return []
    return registers(function, instruction.operands[0])


def sources(function: Function, instruction: Instruction) -> list[str]:
    """Registers the instruction reads (its guard included)."""
    operands = instruction.operands[1:] if _has_destination(instruction) else instruction.operands
    found = [r for operand in operands for r in registers(function, operand)]
    return found + ([instruction.guard] if instruction.guard else [])
