"""`pipec.Error`: the one base class of every exception pipec raises.

A leaf module (it imports nothing of pipec), so the DSL, the compiler and the runtime can all
derive their errors from it, and a caller can catch everything pipec raises with one
`except pipec.Error`. The concrete classes live next to the code that raises them;
docs/python-api.md lists them and when each is raised."""

from __future__ import annotations


class Error(Exception):
    """Anything pipec raises on purpose: a program that does not check, a GPU that is missing,
    a CUDA call that failed, a state file that does not fit, ..."""
