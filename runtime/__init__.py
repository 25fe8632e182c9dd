"""The runtime: a plan and its compiled modules made real on the GPU. `load(path)` compiles a
`.pipe` file and gives a `Pipeline`."""

from .load import PipelineError, load
from .pipeline import Pipeline

__all__ = ["Pipeline", "PipelineError", "load"]
