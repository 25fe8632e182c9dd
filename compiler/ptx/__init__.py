"""PTX, the ground truth of what a kernel does: the IR and its reader (ir.py), the analyses over
it (calls.py, cfg.py, writes.py, first_reads.py, pdl.py) and the module that joins them (analysis.py). Callers use the
names below."""

from .analysis import AnalysedModule, parse
from .ir import Finding, Function, Instruction, Location, PtxModule, split_operands
from .pdl import EarlyAccess, LaunchControl, Waits
from .writes import READ, WRITE, Written

__all__ = ["AnalysedModule", "EarlyAccess", "Finding", "Function", "Instruction", "LaunchControl", "Location",
           "PtxModule", "READ", "WRITE", "Waits", "Written", "parse", "split_operands"]
