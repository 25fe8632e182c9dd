"""The compiler: `.pipe` source to a checked, planned DAG. compiler/stages.py runs the stages in order."""

from .config import Settings, load_settings
from .stages import Compilation, compile_file
from ..plan.schema import Plan

__all__ = ["Compilation", "Plan", "Settings", "compile_file", "load_settings"]
