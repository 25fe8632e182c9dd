"""pipec: a compiler and runtime that turns a declarative GPU training step into a CUDA graph."""

__version__ = "0.1.0"
