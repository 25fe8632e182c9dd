"""The compiler: `.pipe` source to a checked, planned DAG. See `driver.STAGES` for the flow."""

from .config import Settings, load_settings
from .stages import STAGES, Compilation, compile_file
from ..plan.schema import Plan

__all__ = ["STAGES", "Compilation", "Plan", "Settings", "compile_file", "load_settings"]
