"""The runtime: a checked plan made real on the GPU. `load(path)` gives a `Pipeline`."""

from .pipeline import Pipeline, PipelineError, load

__all__ = ["Pipeline", "PipelineError", "load"]
