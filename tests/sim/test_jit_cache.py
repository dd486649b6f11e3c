"""sim.jit_cache: numba's cache files go when any source the compiled code reads changes, and only then."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from blockheat.sim import jit_cache
from blockheat.sim.jit_cache import STAMP, drop_stale, sources_hash


def _package(root: Path) -> tuple[Path, Path, list[Path]]:
    pkg, dep = root / "pkg", root / "dep"
    (pkg / "sub" / "__pycache__").mkdir(parents=True)
    (pkg / "__pycache__").mkdir()
    dep.mkdir()
    (pkg / "kernel.py").write_text("LOOP = 1\n")
    (pkg / "sub" / "inner.py").write_text("X = 1\n")
    (dep / "disk.py").write_text("MODEL = 1\n")
    cached = [pkg / "__pycache__" / "kernel.run_loop-10.py311.nbi",
              pkg / "__pycache__" / "kernel.run_loop-10.py311.1.nbc",
              pkg / "sub" / "__pycache__" / "inner.f-3.py311.nbi"]
    for f in cached:
        f.write_bytes(b"compiled")
    (pkg / "__pycache__" / "kernel.cpython-311.pyc").write_bytes(b"bytecode")
    return pkg, dep, cached


def test_a_change_in_a_dependency_drops_the_cache_once(tmp_path: Path) -> None:
    pkg, dep, cached = _package(tmp_path)
    assert drop_stale(pkg, [pkg, dep])                      # no stamp yet: whatever is cached may be stale
    assert not any(f.exists() for f in cached)
    assert (pkg / "__pycache__" / "kernel.cpython-311.pyc").exists()       # Python's own bytecode stays
    assert (pkg / "__pycache__" / STAMP).read_text() == sources_hash([pkg, dep])

    for f in cached:                                        # numba compiles and caches again
        f.write_bytes(b"compiled")
    assert not drop_stale(pkg, [pkg, dep])                  # nothing changed: the cache stays
    assert all(f.exists() for f in cached)

    (dep / "disk.py").write_text("MODEL = 2\n")             # only the inlined dependency changes
    assert drop_stale(pkg, [pkg, dep])
    assert not any(f.exists() for f in cached)
    assert not drop_stale(pkg, [pkg, dep])


def test_the_hash_follows_content_and_names_not_times(tmp_path: Path) -> None:
    pkg, dep, _ = _package(tmp_path)
    before = sources_hash([pkg, dep])
    os.utime(pkg / "kernel.py", (1, 1))
    assert sources_hash([pkg, dep]) == before
    (pkg / "kernel.py").rename(pkg / "kernel2.py")
    assert sources_hash([pkg, dep]) != before


def test_a_package_folder_it_cannot_write_is_left_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read-only install: numba caches elsewhere, and no stamp could be kept here."""
    pkg, dep, cached = _package(tmp_path)
    asked: list[tuple[Path, int]] = []
    monkeypatch.setattr(jit_cache.os, "access", lambda path, mode: asked.append((Path(path), mode)) or False)
    assert not drop_stale(pkg, [pkg, dep])
    assert asked == [(pkg / "__pycache__", os.W_OK)]
    assert all(f.exists() for f in cached)
    assert not (pkg / "__pycache__" / STAMP).exists()
