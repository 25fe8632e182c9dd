"""The tests compile kernels into a cache of their own (tests/conftest.py), never into the
user's `~/.cache/pipec`."""

from __future__ import annotations

from pathlib import Path

from pipec.compiler.cache import cache_dir


def test_the_tests_cache_is_not_the_user_s():
    assert not cache_dir().resolve().is_relative_to((Path.home() / ".cache").resolve())
