"""A stand-in object store for the ingest tests: s3a:// and s3:// locations kept in a local directory, reached only
through pyarrow's file system abstraction (a PyFileSystem over fsspec, not pyarrow's LocalFileSystem), so the code
under test takes its remote paths (libs.io.storage.filesystem substituted by `resolver`).

The substitute is a picklable partial: the ingest's tasks get the driver's file system lookup with their closures
(libs.readers.binary.range_task), so Spark's Python workers open the same store. Every random-access open is logged
(`opens`, with the opening process) to show which process read what through pyarrow's RandomAccessFile.
"""
from __future__ import annotations

import functools
import os
from pathlib import Path
from urllib.parse import urlparse

import pyarrow.fs as pafs
from fsspec.implementations.dirfs import DirFileSystem
from fsspec.implementations.local import LocalFileSystem

from blockheat.libs.io import storage

BUCKET = "bucket"
OPENS = "_opens.log"
#: Objects whose name contains this cannot be read (what a store answers without read permission).
DENIED = "locked"


class _Handler(pafs.FSSpecHandler):
    def __init__(self, fs: DirFileSystem, root: str) -> None:
        super().__init__(fs)
        self.root = root

    def _check(self, path: str) -> None:
        if DENIED in path:
            raise PermissionError(13, "Access Denied", path)

    def open_input_stream(self, path: str):  # type: ignore[no-untyped-def]
        self._check(path)
        return super().open_input_stream(path)

    def open_input_file(self, path: str):  # type: ignore[no-untyped-def]
        self._check(path)
        with open(os.path.join(self.root, OPENS), "a") as log:
            log.write(f"{os.getpid()} {path}\n")
        return super().open_input_file(path)


def filesystem(root: str, location: str | os.PathLike[str]) -> tuple[pafs.FileSystem, str]:
    """libs.io.storage.filesystem with S3 locations in `root` (bucket = first directory)."""
    text = os.fspath(location)
    if storage.scheme(text) in storage.S3_SCHEMES:
        parsed = urlparse(text)
        fs = pafs.PyFileSystem(_Handler(DirFileSystem(root, LocalFileSystem(auto_mkdir=True)), root))
        return fs, f"{parsed.netloc}{parsed.path}".rstrip("/")
    return pafs.LocalFileSystem(), storage.normalize(text)


class Store:
    """The stand-in store in `root`: put objects, list them, see who opened what."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / BUCKET).mkdir(parents=True, exist_ok=True)
        self.resolver = functools.partial(filesystem, str(root))

    def url(self, key: str, scheme: str = "s3a") -> str:
        return f"{scheme}://{BUCKET}/{key}"

    def put(self, key: str, data: bytes, scheme: str = "s3a") -> str:
        path = self.root / BUCKET / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return self.url(key, scheme)

    def objects(self) -> list[str]:
        """The keys of the objects in the bucket."""
        base = self.root / BUCKET
        return sorted(str(p.relative_to(base)) for p in base.rglob("*") if p.is_file())

    def opens(self) -> list[tuple[int, str]]:
        """(process id, path) of every random-access open so far."""
        log = self.root / OPENS
        if not log.exists():
            return []
        return [(int(pid), path) for pid, path in (line.split(" ", 1) for line in log.read_text().splitlines())]
