"""Stored GEMM algorithms: the cuBLASLt algorithm chosen for each GEMM node of a pipeline on one
GPU, written where the GPU is (`piperun FILE --save-gemm-algorithms F`, `Pipeline.gemm_algorithms()`)
and carried by a bundle (`pipec build --gemm-algorithms F`, the bundle's gemm_algorithms.json), and
the part of the rule by which a runtime uses one that needs no cuBLASLt. A leaf beside
bundle_format.py: the compiler writes these files, both runtimes read them (the C runtime in
native/src/gemm_algorithms.c). docs/native.md, "GEMM algorithms", describes both files.

An algorithm (cuBLASLt's 64-byte `cublasLtMatmulAlgo_t`, as hex) holds for the GEMM it was chosen
for (the node's spec), on the GPU and the cuBLASLt it was chosen on (what cuBLASLt's heuristic and
kernels depend on: the GPU's name, architecture and multiprocessor count, the library's version),
and for operands at least as aligned as they were then (the heuristic was told their alignment).
A file names the spec of each node; `pipec build` checks it against the plan, so a bundle's file
needs none: its plan is the one the choices were checked against.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .bundle_format import BundleError
from .schema import GemmNodeSpec, Plan, to_json

FORMAT = "pipec-gemm-algorithms"
VERSION = 1
ALGORITHM_BYTES = 64  # sizeof(cublasLtMatmulAlgo_t)
CHOSEN_BY = ("heuristic", "tune")
# The parts of a node's JSON that say nothing about its GEMM: where it is and what it is called.
_NOT_THE_GEMM = ("kind", "id", "name", "location", "accesses")


@dataclass(frozen=True)
class ChosenOn:
    """The GPU and cuBLASLt an algorithm was chosen on; it is used on the same only."""

    name: str
    arch: str  # sm_90
    multiprocessors: int
    cublaslt: int  # cublasLtGetVersion()

    def describe(self) -> str:
        return f"{self.name} ({self.arch}, {self.multiprocessors} SMs, cuBLASLt {self.cublaslt})"


@dataclass(frozen=True)
class StoredAlgorithm:
    algorithm: bytes  # the cublasLtMatmulAlgo_t
    alignments: tuple[int, int, int, int]  # bytes, of cuBLASLt's A, B, C and D when it was chosen
    chosen_by: str  # heuristic | tune
    spec: Mapping | None = None  # the node's `gemm_spec` it was chosen for (a file's; a bundle's plan holds it)


@dataclass(frozen=True)
class GemmAlgorithms:
    """The algorithms of one pipeline's GEMM nodes on one GPU, by node name."""

    chosen_on: ChosenOn
    gemms: Mapping[str, StoredAlgorithm]
    pipe: str = ""  # the file's `.pipe`, for people reading it


def gemm_spec(node: GemmNodeSpec) -> dict:
    """What the algorithm was chosen for: the node as the plan's JSON holds it, without its name,
    id, location and accesses (which follow from the rest)."""
    return {k: v for k, v in to_json(node).items() if k not in _NOT_THE_GEMM}


def gemm_nodes(plan: Plan) -> dict[str, GemmNodeSpec]:
    return {n.name: n for g in plan.graphs for n in g.nodes if isinstance(n, GemmNodeSpec)}


def stored_for(stored: Sequence[GemmAlgorithms], here: ChosenOn, node: str,
               alignments: tuple[int, int, int, int]) -> tuple[StoredAlgorithm | None, str]:
    """The rule's first steps, before cuBLASLt checks the algorithm against the node's descriptor
    (`cublasLtMatmulAlgoCheck`): the algorithm a bundle stores for `node` on this GPU and
    cuBLASLt, for operands aligned as they are here, or None and why not. The C runtime's
    `stored_gemm_for` says the same words."""
    if not stored:
        return None, "the bundle stores no GEMM algorithms"
    chosen = next((s for s in stored if s.chosen_on == here), None)
    if chosen is None:
        return None, (f"the bundle's GEMM algorithms were chosen on {'; '.join(s.chosen_on.describe() for s in stored)}, "
                      f"and this is {here.describe()}")
    entry = chosen.gemms.get(node)
    if entry is None:
        return None, "the bundle stores none for this node on this GPU"
    if any(now < then for now, then in zip(alignments, entry.alignments)):
        return None, (f"its operands (cuBLASLt's A, B, C, D) are aligned to {_bytes(alignments)} bytes here, and the "
                      f"stored algorithm was chosen for {_bytes(entry.alignments)}")
    return entry, ""


def _bytes(alignments: Sequence[int]) -> str:
    return "/".join(str(a) for a in alignments)


# --- the file -----------------------------------------------------------------------------------

def file_json(algorithms: GemmAlgorithms) -> dict:
    """The file's content (what `Pipeline.gemm_algorithms()` gives)."""
    return {"format": FORMAT, "version": VERSION, "pipe": algorithms.pipe, **_chosen_json(algorithms, with_specs=True)}


def file_text(data: dict) -> str:
    """The file `piperun --save-gemm-algorithms` writes: `file_json`, sorted keys, one space of indent."""
    return json.dumps(data, sort_keys=True, indent=1) + "\n"


def read_file(path: Path) -> GemmAlgorithms:
    """A GEMM algorithms file, checked; BundleError (one line naming the file) otherwise."""
    try:
        data = json.loads(Path(path).read_bytes())
    except OSError as error:
        raise BundleError(f"cannot read {path}: {error.strerror or error}") from None
    except ValueError as error:
        raise BundleError(f"{path} is not JSON (truncated?): {error}") from None
    where = str(path)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise BundleError(f"{where} is not a GEMM algorithms file (its `format` is not `{FORMAT}`; "
                          "`piperun FILE --save-gemm-algorithms F` writes one)")
    if data.get("version") != VERSION:
        raise BundleError(f"{where} is GEMM algorithms version {data.get('version')!r}; this pipec reads version "
                          f"{VERSION}: save the algorithms again with this pipec's piperun")
    pipe = data.get("pipe")
    return _chosen(data, where, with_specs=True, pipe=pipe if isinstance(pipe, str) else "")


def check_for_plan(algorithms: GemmAlgorithms, plan: Plan, where: str) -> None:
    """Every node the file names is a GEMM node of `plan` with the spec it was chosen for."""
    nodes = gemm_nodes(plan)
    for name, entry in algorithms.gemms.items():
        node = _node(nodes, name, where)
        assert entry.spec is not None, "a file's entries name their spec"
        if (difference := _first_difference(entry.spec, gemm_spec(node))) is not None:
            key, then, now = difference
            raise BundleError(f"{where}: gemm `{name}` was chosen for another GEMM: its `{key}` was {then}, and the "
                              f"plan's is {now} ({node.location}); choose again "
                              "(piperun FILE --tune-gemms --save-gemm-algorithms F)")


def check_distinct(files: Sequence[tuple[str, GemmAlgorithms]]) -> None:
    """One file per GPU and cuBLASLt: two would leave the choice between them to chance."""
    seen: dict[ChosenOn, str] = {}
    for where, algorithms in files:
        if (earlier := seen.setdefault(algorithms.chosen_on, where)) != where:
            raise BundleError(f"{where} and {earlier} are both for {algorithms.chosen_on.describe()}: give one")


# --- the bundle's file ----------------------------------------------------------------------------

def bundle_text(chosen: Sequence[GemmAlgorithms]) -> bytes:
    """The bundle's gemm_algorithms.json: each GPU's algorithms in the order given, without specs."""
    data = {"choices": [_chosen_json(c, with_specs=False) for c in chosen]}
    return (json.dumps(data, sort_keys=True, indent=1) + "\n").encode()


def read_bundle_file(data: bytes, where: str, plan: Plan) -> tuple[GemmAlgorithms, ...]:
    """A bundle's gemm_algorithms.json, checked against its plan; BundleError otherwise (the C
    runtime's gemm_algorithms.c checks the same, in the same order, with the same words)."""
    try:
        document = json.loads(data)
    except ValueError as error:
        raise BundleError(f"{where} is not JSON: {error}") from None
    choices = document.get("choices") if isinstance(document, dict) else None
    if not isinstance(choices, list):
        raise BundleError(f"{where} has no `choices` list")
    nodes = gemm_nodes(plan)
    return tuple(_chosen(c, f"{where}: choices[{i}]", with_specs=False, nodes=nodes) for i, c in enumerate(choices))


# --- parts of both --------------------------------------------------------------------------------

def _chosen_json(algorithms: GemmAlgorithms, *, with_specs: bool) -> dict:
    on = algorithms.chosen_on
    gemms: dict[str, dict[str, object]] = {}
    for name, entry in algorithms.gemms.items():
        gemms[name] = {"algorithm": entry.algorithm.hex(), "alignments": list(entry.alignments),
                       "chosen_by": entry.chosen_by}
        if with_specs:
            gemms[name]["spec"] = entry.spec
    return {"device": {"name": on.name, "arch": on.arch, "multiprocessors": on.multiprocessors},
            "cublaslt": on.cublaslt, "gemms": gemms}


def _chosen(data: object, where: str, *, with_specs: bool, pipe: str = "",
            nodes: dict[str, GemmNodeSpec] | None = None) -> GemmAlgorithms:
    """One GPU's algorithms; with `nodes`, each entry's node checked first (a bundle's)."""
    if not isinstance(data, dict):
        raise BundleError(f"{where} is not an object")
    device, gemms = data.get("device"), data.get("gemms")
    if not (isinstance(device, dict) and isinstance(device.get("name"), str) and device["name"]
            and isinstance(device.get("arch"), str) and re.fullmatch(r"sm_\d+[af]?", device["arch"])
            and _positive(device.get("multiprocessors"))):
        raise BundleError(f"{where}: `device` is not {{\"name\": ..., \"arch\": \"sm_XY\", \"multiprocessors\": N}}")
    if not _positive(data.get("cublaslt")):
        raise BundleError(f"{where}: `cublaslt` is not cuBLASLt's version (a positive integer)")
    if not isinstance(gemms, dict):
        raise BundleError(f"{where}: `gemms` is not an object of GEMM nodes")
    on = ChosenOn(device["name"], device["arch"], device["multiprocessors"], data["cublaslt"])
    entries = {}
    for name, entry in gemms.items():
        if not isinstance(entry, dict):
            raise BundleError(f"{where}: gemm `{name}` is not an object")
        if nodes is not None:
            _node(nodes, name, where)
        entries[name] = _entry(entry, f"{where}: gemm `{name}`", with_specs)
    return GemmAlgorithms(on, entries, pipe)


def _entry(data: dict, where: str, with_spec: bool) -> StoredAlgorithm:
    text, alignments, chosen_by = data.get("algorithm"), data.get("alignments"), data.get("chosen_by")
    if not isinstance(text, str) or not re.fullmatch(r"(?:[0-9a-f]{2})*", text):
        raise BundleError(f"{where}: `algorithm` is not hex (the bytes of a cublasLtMatmulAlgo_t)")
    if len(text) != 2 * ALGORITHM_BYTES:
        raise BundleError(f"{where}: `algorithm` holds {len(text) // 2} bytes; a cublasLtMatmulAlgo_t has "
                          f"{ALGORITHM_BYTES} ({2 * ALGORITHM_BYTES} hex digits)")
    if not (isinstance(alignments, list) and len(alignments) == 4
            and all(_positive(a) and a & (a - 1) == 0 and a <= 256 for a in alignments)):
        raise BundleError(f"{where}: `alignments` is not four powers of two up to 256 (bytes of A, B, C and D)")
    if chosen_by not in CHOSEN_BY:
        raise BundleError(f"{where}: `chosen_by` is not one of {', '.join(CHOSEN_BY)}")
    spec = data.get("spec")
    if with_spec and not isinstance(spec, dict):
        raise BundleError(f"{where}: `spec` is not the node's GEMM (an object)")
    return StoredAlgorithm(bytes.fromhex(text), (alignments[0], alignments[1], alignments[2], alignments[3]), chosen_by,
                           spec if with_spec else None)


def _positive(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _node(nodes: dict[str, GemmNodeSpec], name: str, where: str) -> GemmNodeSpec:
    if name not in nodes:
        listed = ", ".join(f"`{n}`" for n in list(nodes)[:4]) + (", ..." if len(nodes) > 4 else "")
        raise BundleError(f"{where}: `{name}` is not a GEMM node of the plan "
                          f"({'its GEMM nodes: ' + listed if nodes else 'it has none'})")
    return nodes[name]


def _first_difference(then: object, now: object, key: str = "") -> tuple[str, object, object] | None:
    """The first key (dotted) where two JSON values differ, with both values; None when equal."""
    if isinstance(then, dict) and isinstance(now, dict):
        for k in sorted(set(then) | set(now)):
            found = _first_difference(then.get(k), now.get(k), f"{key}.{k}" if key else k)
            if found is not None:
                return found
        return None
    return None if then == now else (key, json.dumps(then), json.dumps(now))
