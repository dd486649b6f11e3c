"""numba's on-disk cache kept in step with the package's sources.

numba keys a cached function on the content of the file that defines it, not on the files of the functions it
calls or inlines: after a change to sim/disk.py alone (an edit, a git pull, a wheel upgrade over a kept
__pycache__), sim/_kernel.py's cached loop would still hold the old disk model. A package with compiled code calls
`drop_stale` when it is imported: when the hash of the sources its compiled code reads differs from the one stored
beside its cache, the cache files of its modules (numba's `*.nbi` and `*.nbc` in its `__pycache__` folders) go
first, and numba compiles afresh. Covers numba's in-tree cache, where a writable install keeps it; a cache under
NUMBA_CACHE_DIR or the user's cache folder (a read-only install) is left to the user.
"""
from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

STAMP = "blockheat-jit.sha256"
#: sim's own folder: the sources that a compiled loop of another package calling sim's also reads.
SIM_DIR = Path(__file__).parent


def sources_hash(roots: Sequence[Path]) -> str:
    """SHA-256 over the .py files under `roots`: each one's path below its root and its bytes, in path order."""
    h = hashlib.sha256()
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            h.update(str(path.relative_to(root)).encode() + b"\0")
            h.update(path.read_bytes())
    return h.hexdigest()


def drop_stale(package: Path, roots: Sequence[Path]) -> bool:
    """Remove the numba cache files under `package` when `roots`' sources changed since the stamp in
    package/__pycache__ was written (or no stamp is there), then write the stamp; True if it removed any. Nothing
    happens where the package's folder cannot be written (numba does not cache there either)."""
    pycache = package / "__pycache__"
    if not os.access(pycache if pycache.is_dir() else package, os.W_OK):
        return False
    digest = sources_hash(roots)
    stamp = pycache / STAMP
    try:
        if stamp.read_text() == digest:
            return False
    except OSError:
        pass
    dropped = False
    for cached in (*package.rglob("__pycache__/*.nbi"), *package.rglob("__pycache__/*.nbc")):
        try:
            cached.unlink()
            dropped = True
        except FileNotFoundError:           # another process starting at the same time took it
            pass
    try:
        pycache.mkdir(exist_ok=True)
        partial = pycache / f"{STAMP}.{os.getpid()}"
        partial.write_text(digest)
        partial.replace(stamp)
    except OSError:
        pass
    return dropped
