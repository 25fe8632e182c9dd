"""A content-addressed store for compiled kernels and their analyses.

Location: `$PIPEC_CACHE_DIR`, else `$XDG_CACHE_HOME/pipec`, else `~/.cache/pipec`.
`PIPEC_NO_CACHE=1` turns it off. Keys are hex digests of everything that affects the result
(sources, includes, options, target, compiler version); writes are atomic, so concurrent
`pipec` runs never see half a file.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path


def cache_dir() -> Path:
    if explicit := os.environ.get("PIPEC_CACHE_DIR"):
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "pipec"


def enabled() -> bool:
    return os.environ.get("PIPEC_NO_CACHE", "") in ("", "0")


def digest(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def load(kind: str, key: str) -> bytes | None:
    if not enabled():
        return None
    try:
        return (cache_dir() / kind / key).read_bytes()
    except OSError:
        return None


def store(kind: str, key: str, data: bytes) -> None:
    if not enabled():
        return
    folder = cache_dir() / kind
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, folder / key)
    except OSError:
        pass  # a read-only or full cache only costs a recompile next time
