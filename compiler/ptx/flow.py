"""What the values of a PTX module depend on: a dependence graph per function (or per loop body),
a summary per function of what its result and its writes depend on, and, per function, the
block memory that other threads of its block may fill with values read from global memory.

The graph's nodes are registers and what stands between them: ("read", i) is the value
instruction i reads (a load, an atomic's old value, a barrier reduction's result, a call's
result), ("write", i) what it writes (("write", i, k): a call's k-th write), ("cell", c) a
cell of memory.py, ("param", i) the function's parameter i, ("return",) its result,
("outside", reader) what the rest of the block (or a caller) leaves in the memory a reader
reads. An edge runs from a value to what it is
computed from (flow-insensitive: every definition of a register feeds every use). Memory
carries values like registers: a read of a cell depends on every write in the graph to a cell
that may overlap it (the same word, an unknown offset of its variable, any shared memory, a
pointer), so a value stored to `__shared__` by one thread and read back by the others, a status
written through a reference by a helper, or a predicate combined by `__syncthreads_or` keeps
its dependence on what was loaded.

A call is its callee's summary mapped onto the call: its result depends on the arguments the
callee's result depends on, on the polls the callee makes for it, and on the memory it reads
(a cell of a parameter becomes the cell that argument points to); each of the callee's writes
to memory the caller can see (shared memory, through a parameter or an unknown pointer, a
barrier) is a write at the call. Summaries are computed callees first, recursion until nothing
changes; a call the analysis cannot follow (a body not in the module, an indirect call when no
address is taken) reads and writes anything with a plain poll.

Shared memory and barriers belong to the whole block, whose threads may run any code of the
kernel at the same time: a function's block taint is every block cell that some function of a
kernel reaching it writes with a value that depends on a poll (the kernel's summary names them:
its graph holds every write of its threads, its callees' included, so a copy of a polled value
from one variable to another is polled too), ANY counting as any shared memory.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Union

from .calls import KNOWN_EXTERNALS, address_taken, call_target
from .graph import components
from .ir import Function, Instruction, PtxModule, destinations, sources
from .memory import ANY, Access, Bases, Cell, access, place

Node = Union[str, tuple]  # a register, or one of the tuples above
Label = tuple  # ("param", i) | ("poll", kind) | ("cell", c)
_SLOT = re.compile(r"\[\s*([\w$]+)")


@dataclass(frozen=True)
class Effect:
    """What a value depends on, as seen from outside its function."""

    params: frozenset[int] = frozenset()
    polls: frozenset[str] = frozenset()  # ordered | plain
    cells: frozenset[Cell] = frozenset()  # memory it reads that others may write

    def __or__(self, other: Effect) -> Effect:
        return Effect(self.params | other.params, self.polls | other.polls, self.cells | other.cells)


@dataclass
class Summary:
    result: Effect = field(default_factory=Effect)
    writes: dict[Cell, Effect] = field(default_factory=dict)  # memory the caller can see

    def __or__(self, other: Summary) -> Summary:
        writes = dict(self.writes)
        for cell, effect in other.writes.items():
            writes[cell] = writes.get(cell, Effect()) | effect
        return Summary(self.result | other.result, writes)


class Facts:
    """One function's instructions as the graphs use them: the bases of its addresses, its
    memory accesses, each call's arguments, and where its parameters and results are read."""

    def __init__(self, function: Function) -> None:
        self.function = function
        self.bases = Bases(function)
        self.accesses: dict[int, Access] = {
            i.position: a for i in function.instructions if (a := access(function, i, self.bases)) is not None}
        self.arguments: dict[int, list[tuple[str, ...]]] = {}  # call -> registers of each argument
        self.results: dict[int, int] = {}  # `ld.param [retval0]` -> its call
        self.params: dict[int, int] = {}  # `ld.param [f_param_i]` of a device function -> i
        self.returns: set[int] = set()  # `st.param [f_retval0]`
        own = re.compile(re.escape(function.name) + r"_param_(\d+)")
        slots: dict[str, list[str]] = {}
        call: int | None = None
        for instruction in function.instructions:
            slot = _slot(instruction)
            if instruction.opcode.startswith("st.param") and slot:
                if "retval" in slot:
                    self.returns.add(instruction.position)
                else:
                    slots.setdefault(slot, []).extend(sources(function, instruction))
            elif instruction.opcode.startswith("ld.param") and slot:
                if (m := own.fullmatch(slot)) and not function.is_entry:
                    self.params[instruction.position] = int(m.group(1))
                elif "retval" in slot and call is not None:
                    self.results[instruction.position] = call
            elif (target := call_target(instruction)) is not None:
                listed = next((o for o in instruction.operands[instruction.operands.index(target):]
                               if o.startswith("(")), "()")
                names = [n.strip() for n in listed.strip("()").split(",") if n.strip()]
                self.arguments[instruction.position] = [tuple(slots.get(n, ())) for n in names]
                slots, call = {}, instruction.position

    def pointed(self, argument: tuple[str, ...]) -> tuple[Cell, ...]:
        """The memory an argument points to, in this function's cells (none: global)."""
        return place(None, self.bases.base(*argument), None)[0]


class Dependence:
    """The dependence graph of some instructions of one function: all of them for its
    summary, a loop's body for its exits. `outside` names what a reader of a cell may find
    there that the graph does not write (labels of ("outside", reader))."""

    def __init__(self, flow: ModuleFlow, function: Function, positions: Iterable[int],
                 outside: Callable[[Cell], Iterable[Label]]) -> None:
        self.flow, self.function, self.facts = flow, function, flow.facts[function.name]
        self.outside = outside
        self.edges: dict[Node, list[Node]] = {}
        self.labels: dict[Node, set[Label]] = {}
        self.written: list[tuple[Node, Cell]] = []  # write nodes and the cells they write
        for position in positions:
            self._add(function.instructions[position])
        for node, cell in self.written:
            self._link(("cell", cell), [node])
        for cell in {cell for _, cell in self.written}:
            for group in _groups(cell):
                self._link(group, [("cell", cell)])

    def _link(self, node: Node, inputs: Iterable[Node]) -> None:
        self.edges.setdefault(node, []).extend(inputs)

    def _label(self, node: Node, labels: Iterable[Label]) -> None:
        found = set(labels)
        if found:
            self.labels.setdefault(node, set()).update(found)

    def _read(self, reader: Node, cells: Sequence[Cell]) -> None:
        """A reader depends on every write that may overlap the cells, and on what others leave there."""
        self._link(reader, [a for cell in cells for a in _aliases(cell)] + [("outside", reader)])
        self._label(("outside", reader), [label for cell in cells for label in self.outside(cell)])

    def _add(self, instruction: Instruction) -> None:
        position, facts = instruction.position, self.facts
        guard = [instruction.guard] if instruction.guard else []
        if position in facts.arguments:
            self._call(instruction)
        elif position in facts.returns:
            self._link(("return",), sources(self.function, instruction))
        elif position in facts.params:
            for register in destinations(self.function, instruction):
                self._link(register, [("param", facts.params[position])])
                self._label(("param", facts.params[position]), [("param", facts.params[position])])
        elif position in facts.results:
            for register in destinations(self.function, instruction):
                self._link(register, [("read", facts.results[position])])
        elif (memory := facts.accesses.get(position)) is not None:
            self._memory(instruction, memory, guard)
        else:
            for register in destinations(self.function, instruction):
                self._link(register, sources(self.function, instruction))

    def _memory(self, instruction: Instruction, memory: Access, guard: list[str]) -> None:
        position = instruction.position
        results = destinations(self.function, instruction)
        if memory.writes:
            write = ("write", position)
            self._link(write, [*memory.data, *memory.address, *guard])
            if memory.reads and (memory.modifies or not results):
                self._read(write, memory.reads)  # an atomic's new value, a copy's source
            if memory.poll and not results:
                self._label(write, [("poll", memory.poll)])  # a copy from global memory
            self.written += [(write, cell) for cell in memory.writes]
        if results:
            read = ("read", position)
            self._link(read, [*memory.address, *guard, *(memory.data if memory.modifies else ())])
            if memory.reads:
                self._read(read, memory.reads)
            if memory.poll:
                self._label(read, [("poll", memory.poll)])
            if memory.advances:
                self._link(read, [read])  # it moves what it reads: a counter in memory
            for register in results:
                self._link(register, [read])

    def _call(self, instruction: Instruction) -> None:
        position = instruction.position
        arguments = self.facts.arguments[position]
        summary = self.flow.call_summary(instruction, len(arguments))
        self._effect(("read", position), summary.result, arguments)
        for number, (cell, effect) in enumerate(sorted(summary.writes.items(), key=repr)):
            write = ("write", position, number)
            self._effect(write, effect, arguments)
            self.written += [(write, mapped) for mapped in self._mapped(cell, arguments)]

    def _effect(self, node: Node, effect: Effect, arguments: list[tuple[str, ...]]) -> None:
        self._link(node, [r for i in sorted(effect.params) if i < len(arguments) for r in arguments[i]])
        self._label(node, [("poll", kind) for kind in effect.polls])
        cells = [mapped for cell in effect.cells for mapped in self._mapped(cell, arguments)]
        if cells:
            self._read(node, cells)

    def _mapped(self, cell: Cell, arguments: list[tuple[str, ...]]) -> tuple[Cell, ...]:
        """A callee's cell as the caller names it: a parameter's memory is what its argument points to."""
        if cell[0] == "param":
            return self.facts.pointed(arguments[cell[1]]) if cell[1] < len(arguments) else (ANY,)
        return (cell,)

    def summary(self) -> Summary:
        """What the function's result and its writes to memory its callers see depend on."""
        outputs = [node for node, cell in self.written if cell[0] != "local"]
        reached = self.reaching([("return",), *outputs])
        writes: dict[Cell, Effect] = {}
        for node, cell in self.written:
            if cell[0] != "local":
                writes[cell] = writes.get(cell, Effect()) | _effect(reached[node])
        return Summary(_effect(reached[("return",)]), writes)

    def reaching(self, roots: list[Node]) -> dict[Node, set[Label]]:
        """The labels each root reaches, through the components of the graph (each done after
        those it reaches), labels as bits."""
        index: dict[Label, int] = {}
        own = {node: sum(1 << index.setdefault(label, len(index)) for label in labels)
               for node, labels in self.labels.items()}
        bits: dict[Node, int] = {}
        for members in components(roots, lambda n: self.edges.get(n, ())):
            found = 0
            for member in members:
                found |= own.get(member, 0)
                for following in self.edges.get(member, ()):
                    found |= bits.get(following, 0)
            for member in members:
                bits[member] = found
        names = list(index)
        return {root: {names[i] for i in range(bits[root].bit_length()) if bits[root] >> i & 1} for root in roots}


def _slot(instruction: Instruction) -> str | None:
    """The `.param` slot an `st.param` writes or an `ld.param` reads: `param0`, `retval0`, `f_param_1`."""
    if not instruction.opcode.startswith(("st.param", "ld.param")) or len(instruction.operands) < 2:
        return None
    m = _SLOT.match(instruction.operands[0 if instruction.opcode.startswith("st") else 1])
    return m.group(1) if m else None


def _effect(labels: set[Label]) -> Effect:
    return Effect(frozenset(label[1] for label in labels if label[0] == "param"),
                  frozenset(label[1] for label in labels if label[0] == "poll"),
                  frozenset(label[1] for label in labels if label[0] == "cell"))


def _groups(cell: Cell) -> list[Node]:
    """The nodes that gather the writes a read of unknown offset, or of any shared memory, meets."""
    if cell[0] == "shared":
        return [("all", "shared", cell[1]), ("all", "shared")]  # ("all", "shared", None): read by nothing
    if cell[0] in ("local", "param"):
        return [("all", cell[0])]
    return []


def _aliases(cell: Cell) -> list[Node]:
    """The nodes whose writes a read of the cell may see."""
    reach: list[Node] = [("all", "param"), ("cell", ANY)]  # a pointer may point to any shared memory
    if cell[0] == "shared":
        symbol, word = cell[1], cell[2]
        if symbol is None:
            return [("all", "shared"), *reach]
        unknown = [("cell", ("shared", None, None)), *reach]
        if word is None:
            return [("all", "shared", symbol), *unknown]
        return [("cell", cell), ("cell", ("shared", symbol, None)), *unknown]
    if cell[0] == "local":
        return [("all", "local"), ("cell", ANY)] if cell[1] is None else [
            ("cell", cell), ("cell", ("local", None)), ("cell", ANY)]
    if cell[0] == "barrier":
        return [("cell", cell)]
    return [("all", "shared"), *reach] + ([("all", "local")] if cell == ANY else [])


class BlockTaint:
    """The block memory (shared cells, barriers) that some thread may fill with polled values."""

    def __init__(self) -> None:
        self.cells: set[Cell] = set()
        self.symbols: set[str] = set()  # shared variables with some tainted word
        self.any_shared = False

    def add(self, cell: Cell) -> None:
        if cell[0] in ("any", "param") or cell == ("shared", None, None):
            self.any_shared = True
        elif cell[0] == "shared":
            self.symbols.add(cell[1])
        self.cells.add(cell)

    def update(self, other: BlockTaint) -> None:
        for cell in other.cells:
            self.add(cell)

    def reads(self, cell: Cell) -> bool:
        """Whether a read of the cell may find a polled value another thread left there."""
        if cell[0] == "local":
            return False  # the thread's own
        if cell[0] == "barrier":
            return cell in self.cells
        if self.any_shared:
            return True
        if cell[0] != "shared" or cell[1] is None:
            return bool(self.symbols)
        return cell[2] is None and cell[1] in self.symbols or \
            cell in self.cells or ("shared", cell[1], None) in self.cells


class ModuleFlow:
    """The facts, summaries and block taint of every function with a body."""

    def __init__(self, module: PtxModule) -> None:
        self.module = module
        self.facts = {name: Facts(f) for name, f in module.functions.items() if f.has_body}
        self.taken = sorted(address_taken(module))
        self.summaries: dict[str, Summary] = {}
        self.calls: dict[str, set[str]] = {name: set() for name in self.facts}
        for name, facts in self.facts.items():
            for instruction in facts.function.instructions:
                self.calls[name].update(self._callees(instruction) or ())
        for group in components(self.facts, lambda name: self.calls[name]):
            self._summarise(group)
        self.taint: dict[str, BlockTaint] = {name: BlockTaint() for name in self.facts}
        for entry in module.entries:
            if entry.has_body:
                self._spread(entry.name, self._entry_taint(entry.name))

    def _callees(self, instruction: Instruction) -> list[str] | None:
        """The functions with a body a call may reach; None when it may reach code that is not here."""
        target = call_target(instruction)
        if target is None:
            return []
        names = self.taken if target.startswith("%") else [target]
        if not names or any(n not in self.facts and n not in KNOWN_EXTERNALS for n in names):
            return None
        return [n for n in names if n in self.facts]

    def call_summary(self, instruction: Instruction, arguments: int) -> Summary:
        callees = self._callees(instruction)
        if callees is None:
            anything = Effect(frozenset(range(arguments)), frozenset({"plain"}), frozenset({ANY}))
            return Summary(anything, {ANY: anything})
        found = Summary()
        for name in callees:
            found = found | self.summaries.get(name, Summary())
        return found

    def _summarise(self, group: list[str]) -> None:
        recursive = len(group) > 1 or group[0] in self.calls[group[0]]
        while True:
            changed = False
            for name in group:
                function = self.module.functions[name]
                graph = Dependence(self, function, range(len(function.instructions)), _exported)
                summary = graph.summary()
                changed |= summary != self.summaries.get(name)
                self.summaries[name] = summary
            if not (recursive and changed):
                return

    def _entry_taint(self, entry: str) -> BlockTaint:
        """The block cells a kernel's threads may write with polled values, its callees' included:
        its summary holds every write of its threads, so a copy of a polled value is polled too."""
        taint = BlockTaint()
        for cell, effect in self.summaries[entry].writes.items():
            if effect.polls:
                taint.add(cell)
        return taint

    def _spread(self, entry: str, taint: BlockTaint) -> None:
        seen, stack = {entry}, [entry]
        while stack:
            name = stack.pop()
            self.taint[name].update(taint)
            for callee in self.calls[name] - seen:
                seen.add(callee)
                stack.append(callee)


def _exported(cell: Cell) -> list[Label]:
    """In a summary, a read of memory others may write is labelled with its cell."""
    return [] if cell[0] == "local" else [("cell", cell)]
