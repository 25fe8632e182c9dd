"""PTX, the ground truth of what a kernel does: the IR and its reader (ir.py), the analyses over
it (calls.py, cfg.py, writes.py) and the module that joins them (analysis.py). Callers use the
names below."""

from .analysis import AnalysedModule, parse
from .ir import Finding, Function, Instruction, Location, PtxModule, split_operands
from .writes import Written

__all__ = ["AnalysedModule", "Finding", "Function", "Instruction", "Location", "PtxModule", "Written", "parse",
           "split_operands"]
