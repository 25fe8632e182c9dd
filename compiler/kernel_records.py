"""What kernel analysis hands to the resolver: one frozen record per kernel, parameter,
finding and source location, and their JSON form for the cache.

The JSON carries `FORMAT`; an entry written in another format reads as a cache miss.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from .source_scan import ExtentAnnotation, TextRange

FORMAT = 9  # bump with any change to the records below


@dataclass(frozen=True)
class SourceLocation:
    """A line of CUDA source, as kernel analysis records it. The compiler's one plain location:
    the PTX IR's `ptx.ir.Location` is this plus the chain of inlined or called lines that
    reached it (kernel analysis turns the chain into `CallSite`s), and the plan's
    `plan.schema.Location` is the plan's own, on the far side of the seam, which imports
    nothing of the compiler."""

    file: str  # as the compiler names it in the PTX line info
    line: int
    column: int


@dataclass(frozen=True)
class CallSite:
    """A line through which the line before it in a chain is reached: it inlines the function
    holding that line, or calls it (`called`, a function that is not inlined)."""

    location: SourceLocation
    called: bool


def outermost(location: SourceLocation | None, reached_from: tuple[CallSite, ...]) -> SourceLocation | None:
    return reached_from[-1].location if reached_from else location


@dataclass(frozen=True)
class SiteRecord:
    """Where a kernel's PTX does something about one parameter (a read before a write, an
    access through a pointer loaded from its memory): the instruction's line and the lines
    that reach it, innermost first, as for findings."""

    location: SourceLocation | None
    reached_from: tuple[CallSite, ...] = ()

    @property
    def reported_at(self) -> SourceLocation | None:
        return outermost(self.location, self.reached_from)


@dataclass(frozen=True)
class FindingRecord:
    """An instruction a graph-safety rule forbids, where the kernel's PTX executes it."""

    rule: str  # atomics | fence-barrier | spin-wait | grid-sync | unfollowed-call
    instruction: str
    location: SourceLocation | None  # the instruction's own line (in a header, a helper)
    reached_from: tuple[CallSite, ...] = ()  # innermost first; the last is in the kernel's body

    @property
    def reported_at(self) -> SourceLocation | None:
        """The line of the kernel's own body that reaches the instruction."""
        return outermost(self.location, self.reached_from)


@dataclass(frozen=True)
class ParamRecord:
    index: int
    name: str  # from the source text, `argN` when unknown
    kind: str  # pointer | scalar | unsupported
    dtype: str | None  # pipec element type of a pointer (None for void*) or of a scalar
    ctype: str  # the C type as the compiler reported it, for messages
    const: bool  # a bindable pointer through which the kernel cannot write (False for others)
    write_only: bool  # `/// pipec: out NAME`
    extent: ExtentAnnotation | None  # `/// pipec: extent NAME = EXPR`
    written: str = "unknown"  # yes | no | unknown: whether the kernel's PTX stores through it
    written_at: SourceLocation | None = None  # a store that proves `yes`
    written_reached_from: tuple[CallSite, ...] = ()  # the lines that reach that store, as for findings
    table: bool = False  # a pointer to pointers (`float* const*`): it binds a table of addresses
    read_first: SiteRecord | None = None  # a load of its memory this thread has not stored first (ptx/first_reads.py)
    read_through: SiteRecord | None = None  # a load through a pointer loaded from its memory
    written_through: SiteRecord | None = None  # a store through such a pointer

    @property
    def written_reported_at(self) -> SourceLocation | None:
        return outermost(self.written_at, self.written_reached_from)


@dataclass(frozen=True)
class EarlyAccessRecord:
    """A global access the kernel can make before `griddepcontrol.wait` (compiler/ptx/pdl.py)."""

    params: tuple[int, ...] | None  # the parameters its address derives from; None: unknown origin
    mode: str  # r | w | rw
    instruction: str
    location: SourceLocation | None
    reached_from: tuple[CallSite, ...] = ()

    @property
    def reported_at(self) -> SourceLocation | None:
        return outermost(self.location, self.reached_from)


@dataclass(frozen=True)
class LaunchControlRecord:
    """Programmatic dependent launch, as the kernel's PTX does it."""

    waits: str  # every-path | some-paths | never: whether griddepcontrol.wait ends every path
    early: tuple[EarlyAccessRecord, ...]  # what it touches before the wait (on some path)
    trigger: SourceLocation | None  # the first griddepcontrol.launch_dependents, None: never
    trigger_reached_from: tuple[CallSite, ...] = ()


@dataclass(frozen=True)
class KernelRecord:
    name: str
    params: tuple[ParamRecord, ...]
    max_threads: int | None  # from __launch_bounds__
    findings: tuple[FindingRecord, ...]
    signature: TextRange | None  # the declaration in the source; None when the text does not show it
    unreadable_annotations: tuple[TextRange, ...] = ()
    cluster: tuple[int, int, int] | None = None  # from __cluster_dims__
    launch_control: LaunchControlRecord = LaunchControlRecord("never", (), None)
    unknown_read: SiteRecord | None = None  # a load through a pointer of unknown origin (ptx/writes.py)
    unknown_write: SiteRecord | None = None  # a store through one


@dataclass(frozen=True)
class SourceAnalysis:
    path: Path
    key: str
    kernels: dict[str, KernelRecord]
    mangled: tuple[str, ...]  # entries that are not extern "C" (C++ names)


def to_json(kernels: dict[str, KernelRecord], mangled: tuple[str, ...]) -> bytes:
    return json.dumps({"format": FORMAT, "kernels": [asdict(k) for k in kernels.values()],
                       "mangled": list(mangled)}).encode()


def from_json(path: Path, key: str, data: bytes) -> SourceAnalysis | None:
    """The analysis stored by `to_json`, or None for an entry of another format."""
    try:
        stored = json.loads(data)
        if stored.get("format") != FORMAT:
            return None
        kernels = {k["name"]: _kernel(k) for k in stored["kernels"]}
        return SourceAnalysis(path, key, kernels, tuple(stored["mangled"]))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _kernel(k: dict) -> KernelRecord:
    return KernelRecord(
        k["name"], tuple(_param(p) for p in k["params"]), k["max_threads"],
        tuple(FindingRecord(f["rule"], f["instruction"], _location(f["location"]),
                            _call_sites(f["reached_from"])) for f in k["findings"]),
        _range(k["signature"]), tuple(_range(r) for r in k["unreadable_annotations"]),
        tuple(k["cluster"]) if k["cluster"] else None, _launch_control(k["launch_control"]),
        _site(k["unknown_read"]), _site(k["unknown_write"]),
    )


def _launch_control(c: dict) -> LaunchControlRecord:
    early = tuple(EarlyAccessRecord(tuple(a["params"]) if a["params"] is not None else None, a["mode"],
                                    a["instruction"], _location(a["location"]), _call_sites(a["reached_from"]))
                  for a in c["early"])
    return LaunchControlRecord(c["waits"], early, _location(c["trigger"]), _call_sites(c["trigger_reached_from"]))


def _param(p: dict) -> ParamRecord:
    e = p["extent"]
    extent = ExtentAnnotation(e["param"], e["text"], _range(e["where"])) if e else None
    return ParamRecord(p["index"], p["name"], p["kind"], p["dtype"], p["ctype"], p["const"],
                       p["write_only"], extent, p["written"], _location(p["written_at"]),
                       _call_sites(p["written_reached_from"]), p["table"], _site(p["read_first"]),
                       _site(p["read_through"]), _site(p["written_through"]))


def _site(data: dict | None) -> SiteRecord | None:
    return SiteRecord(_location(data["location"]), _call_sites(data["reached_from"])) if data else None


def _call_sites(data: list) -> tuple[CallSite, ...]:
    return tuple(CallSite(_location(c["location"]), c["called"]) for c in data)


def _location(data: dict | None) -> SourceLocation | None:
    return SourceLocation(data["file"], data["line"], data["column"]) if data else None


def _range(data: dict | None) -> TextRange | None:
    return TextRange(data["start"], data["end"]) if data else None
