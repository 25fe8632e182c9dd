"""The rule table: every diagnostic the compiler can emit has one stable code here.

Each code's long explanation (what it catches, why, an example, what to write instead) lives
in `compiler/explanations/<CODE>.md`; `pipec --explain CODE` prints it and `docs/rules.md` is
generated from the same files (`pipec --explain ALL > docs/rules.md`).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from pathlib import Path

EXPLANATIONS = Path(__file__).with_name("explanations")
EXAMPLES = EXPLANATIONS / "examples"


class Severity(enum.Enum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    severity: Severity
    summary: str
    # False for the findings that leave no meaningful plan (or a plan that fails or races for
    # sure): inline suppressions cannot silence them, and with or without `--select`/`--ignore`
    # no plan is built while one stands. True for findings a person may judge (hygiene, a
    # transfer to mapped memory, a conflict the whole-buffer access ranges overstate).
    suppressible: bool = False
    # the PTX rules a `waive` declaration exempts, for one kernel and with a reason
    waivable: bool = False

    def explanation(self) -> str:
        """The explanation with its examples in place: `<!-- example: FILE -->` stands for the
        program `explanations/examples/FILE`, which the rule tests check (it fires exactly as its
        inline comments say, or its `_ok` twin is clean), so no example can drift from the rule."""
        text = (EXPLANATIONS / f"{self.code}.md").read_text(encoding="utf-8")
        return _EXAMPLE.sub(_example_block, text)


_EXAMPLE = re.compile(r"^<!-- example: ([\w.-]+) -->$", re.MULTILINE)


def _example_block(match: re.Match) -> str:
    program = (EXAMPLES / match.group(1)).read_text(encoding="utf-8")
    return f"```pipe\n{program}```"


_E, _W = Severity.ERROR, Severity.WARNING
_DECLARED: list[Rule] = []


def _rule(code: str, name: str, severity: Severity, summary: str, *, suppressible: bool = False,
          waivable: bool = False) -> Rule:
    """One rule, bound below to a module-level name equal to its code, so that a call site
    writes `sink.add(PC205, ...)` and a mistyped code is an import error, not a runtime one."""
    rule = Rule(code, name, severity, summary, suppressible=suppressible, waivable=waivable)
    _DECLARED.append(rule)
    return rule


# PC0xx: about the linting itself
PC001 = _rule("PC001", "unused-suppression", _W, "a `# pipec: ignore[...]` comment suppresses nothing",
              suppressible=True)
PC002 = _rule("PC002", "suppression-without-reason", _E, "a suppression comment gives no reason",
              suppressible=True)
PC003 = _rule("PC003", "unused-waiver", _W, "a `waive` declaration waives nothing", suppressible=True)
# PC1xx: reading the program
PC101 = _rule("PC101", "syntax-error", _E, "the file does not follow the grammar")
PC102 = _rule("PC102", "import-error", _E, "an imported file is missing, cyclic or not importable")
PC103 = _rule("PC103", "undefined-name", _E, "a name refers to nothing that is declared")
PC104 = _rule("PC104", "duplicate-definition", _E, "a name is declared twice")
PC105 = _rule("PC105", "constant-error", _E, "a compile-time expression is invalid")
PC106 = _rule("PC106", "kernel-source-error", _E, "a kernel source does not compile or lacks the kernel")
PC107 = _rule("PC107", "buffer-declaration-error", _E, "a buffer's type, shape or initial value is invalid")
PC108 = _rule("PC108", "invalid-option", _E, "an `option` or waiver names nothing known or has a bad value")
PC109 = _rule("PC109", "kernel-declaration-not-found", _W,
              "the source text does not show a kernel's declaration, so its annotations cannot apply",
              suppressible=True)
PC110 = _rule("PC110", "import-outside-project", _E,
              "an import or `load` names a file outside the project and its allowed folders")
PC111 = _rule("PC111", "too-many-nodes", _E, "the unrolled program would exceed the node limit")
PC112 = _rule("PC112", "input-limit", _E,
              "a file, its nesting or one of its integers is larger than pipec reads")
PC113 = _rule("PC113", "import-binding-error", _E,
              "an import's `with (NAME = ...)` names no constant the imported file declares")
# PC2xx: binding launches to kernels
PC201 = _rule("PC201", "argument-count", _E,
              "a launch or graph use binds more or fewer arguments than it takes")
PC202 = _rule("PC202", "argument-kind", _E, "a pointer parameter gets a value or a scalar parameter a buffer")
PC203 = _rule("PC203", "pointer-type-mismatch", _E, "a buffer's element type differs from the pointer's")
PC204 = _rule("PC204", "scalar-out-of-range", _E, "a constant does not fit the scalar parameter's type")
PC205 = _rule("PC205", "access-conflict", _E, "an access qualifier contradicts the parameter")
PC206 = _rule("PC206", "slice-out-of-bounds", _E, "a slice lies outside its buffer")
# PC3xx: graph safety
PC301 = _rule("PC301", "host-branch", _E, "a decision depends on device data or the step index")
PC302 = _rule("PC302", "baked-per-step-value", _E, "a value that changes between steps is passed by value")
PC303 = _rule("PC303", "copy-mismatch", _E, "a copy's ends differ in type or size, or overlap")
PC304 = _rule("PC304", "host-transfer-in-step", _E,
              "a copy inside the step moves data between host and device", suppressible=True)
PC305 = _rule("PC305", "atomic-operation", _E, "a kernel the step uses performs atomic operations",
              waivable=True)
PC306 = _rule("PC306", "inter-block-spin-wait", _E, "a kernel spins on memory that other blocks write",
              waivable=True)
PC307 = _rule("PC307", "fence-as-barrier", _E, "a kernel orders its blocks with a device-wide fence",
              waivable=True)
PC308 = _rule("PC308", "shared-cufunction", _E,
              "two graphs, or a graph and eager launches, share a kernel handle")
PC309 = _rule("PC309", "null-pointer-argument", _E, "a pointer parameter is bound to `null`")
PC310 = _rule("PC310", "buffer-smaller-than-extent", _E,
              "a buffer is smaller than the extent the kernel declares")
PC311 = _rule("PC311", "block-too-large", _E, "a block has more threads than the device or the kernel allows")
PC312 = _rule("PC312", "shared-memory-over-limit", _E, "dynamic shared memory exceeds the device's limit")
PC313 = _rule("PC313", "invalid-grid", _E,
              "a launch has no blocks, no threads, more blocks than a grid holds, or a part of a cluster")
PC314 = _rule("PC314", "unordered-conflict", _E,
              "two nodes touch the same data, one writing, with no path between them", suppressible=True)
PC315 = _rule("PC315", "graph-cycle", _E, "a graph uses itself")
PC316 = _rule("PC316", "launch-over-device-limit", _E,
              "a launch needs more threads, registers or shared memory than the loaded device has")
PC317 = _rule("PC317", "unfollowed-call", _E, "a kernel makes a call the analysis cannot follow")
PC318 = _rule("PC318", "write-through-read-only", _E,
              "a kernel writes through a pointer bound `in` or declared const")
PC319 = _rule("PC319", "grid-sync", _E, "a kernel waits for the whole grid, which needs a cooperative launch")
PC320 = _rule("PC320", "invalid-device-condition", _E,
              "a device branch or loop does not decide on one element of an integer buffer")
PC321 = _rule("PC321", "condition-written-in-body", _E, "a branch writes the flag that decides it")
PC322 = _rule("PC322", "unbounded-while", _E, "nothing in a `while` body can clear its flag")
PC323 = _rule("PC323", "early-access-before-wait", _W,
              "a kernel that asks for programmatic launch touches an earlier node's data before its wait",
              suppressible=True)
PC324 = _rule("PC324", "read-through-unknown-pointer", _E,
              "a kernel loads through a pointer it read from memory that no table of addresses accounts for")
PC325 = _rule("PC325", "address-table-written", _E, "a node writes a table of addresses")
# PC4xx: warnings
PC401 = _rule("PC401", "read-before-write", _W, "a buffer is read before anything writes or initialises it",
              suppressible=True)
PC402 = _rule("PC402", "unused-buffer", _W, "no node reads or writes a buffer", suppressible=True)
PC403 = _rule("PC403", "stale-after-branch", _W,
              "a buffer written only inside a device branch is read after it on every step",
              suppressible=True)
PC404 = _rule("PC404", "out-read-before-write", _W,
              "a pointer bound `out` is one the kernel reads before it writes", suppressible=True)
# PC5xx: library nodes (GEMM)
PC501 = _rule("PC501", "gemm-form", _E,
              "a `gemm` is not `alpha * a @ b + bias + beta * target`, or an operand is no view")
PC502 = _rule("PC502", "gemm-shape-mismatch", _E, "a GEMM's operand shapes, batches or views do not agree")
PC503 = _rule("PC503", "gemm-misaligned", _E,
              "a GEMM operand starts, or its rows start, off a 16-byte boundary")
PC504 = _rule("PC504", "gemm-type-combination", _E,
              "a GEMM's element types are a combination the library lacks")
PC505 = _rule("PC505", "gemm-epilogue", _E,
              "a GEMM's epilogue options do not combine, or one lacks its `aux`")
PC506 = _rule("PC506", "gemm-output-size", _E,
              "a GEMM's `aux` or `bias_grad` is too small or of the wrong type")
PC507 = _rule("PC507", "gemm-runtime-scale", _E, "a GEMM's alpha or beta reads device data")
PC508 = _rule("PC508", "gemm-option", _E, "a GEMM's `with` option is unknown, repeated or has a bad value")
# PC6xx: collectives over several GPUs (NCCL)
PC601 = _rule("PC601", "collective-type", _E,
              "a collective's reduction or element types are ones NCCL does not provide as written")
PC602 = _rule("PC602", "collective-shape", _E,
              "a collective's sizes do not match the world size, or its root or views are invalid")
PC603 = _rule("PC603", "rank-dependent-collective", _E,
              "a collective runs under a decision that may differ between ranks")
PC604 = _rule("PC604", "collective-group-overlap", _E,
              "a grouped allreduce or broadcast names some elements twice")

RULES: tuple[Rule, ...] = tuple(sorted(_DECLARED, key=lambda rule: rule.code))

BY_CODE: dict[str, Rule] = {rule.code: rule for rule in RULES}
BY_NAME: dict[str, Rule] = {rule.name: rule for rule in RULES}


def lookup(code_or_name: str) -> Rule | None:
    key = code_or_name.strip()
    return BY_CODE.get(key.upper()) or BY_NAME.get(key.lower())


def select(patterns: list[str]) -> set[str]:
    """Codes matching any pattern: a full code, a prefix (`PC3`), a rule name or `ALL`."""
    chosen: set[str] = set()
    for pattern in patterns:
        key = pattern.strip()
        if key.upper() == "ALL":
            chosen.update(BY_CODE)
        elif key.lower() in BY_NAME:
            chosen.add(BY_NAME[key.lower()].code)
        else:
            chosen.update(code for code in BY_CODE if code.startswith(key.upper()))
    return chosen


def unmatched(patterns: list[str]) -> list[str]:
    """The patterns of a selection (`select`, `ignore`) that match no rule: a typo, or an empty
    item, which would otherwise select nothing (or, as a prefix, everything)."""
    return [p for p in patterns if not p.strip() or (p.strip().upper() != "ALL" and not select([p]))]


def _suppressible(rule: Rule) -> str:
    return "waive" if rule.waivable else "yes" if rule.suppressible else "no"


def rules_markdown() -> str:
    """docs/rules.md: every rule's explanation, in code order."""
    lines = [
        "# Rules",
        "",
        "Every diagnostic `pipec` emits, with the failure it prevents. Generated from",
        "`compiler/explanations/` by `pipec --explain ALL`; `pipec --explain CODE`",
        "prints one entry.",
        "",
        "**Suppressible** says what `# pipec: ignore[...]`, `--select`, `--ignore` and",
        "`[tool.pipec]` select/ignore can do. They change what is reported, never what is built:",
        "",
        "- *yes*: a finding a person may judge. Suppressed or left out of the selection, it no",
        "  longer stops `--emit plan`, `piperun` or `pipec.load`.",
        "- *no*: the finding leaves no meaningful plan (or one that fails or races for sure). An",
        "  inline suppression of it is itself reported (PC001) and silences nothing; `--select`",
        "  and `--ignore` may hide it from a `--check` report, but no plan is built while it",
        "  stands, and `--emit plan`, `piperun` and `pipec.load` report it.",
        "- *waive*: a PTX rule exempted per kernel, with a reason, by a `waive` declaration",
        "  (docs/language.md); otherwise as *no*.",
        "",
        "| code | name | severity | suppressible | summary |",
        "| --- | --- | --- | --- | --- |",
    ]
    lines += [f"| {r.code} | `{r.name}` | {r.severity.value} | {_suppressible(r)} | {r.summary} |"
              for r in RULES]
    for rule in RULES:
        lines += ["", rule.explanation().rstrip()]
    return "\n".join(lines) + "\n"
