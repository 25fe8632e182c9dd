"""The runtime: a plan and its compiled modules made real on the GPU. `load(path, LoadOptions(...),
Backends(...))` compiles a `.pipe` file and gives a `Pipeline` (`pipec.load` takes the options
as keywords)."""

from .load import Backends, LoadOptions, PipelineError, load
from .pipeline import Pipeline

__all__ = ["Backends", "LoadOptions", "Pipeline", "PipelineError", "load"]
