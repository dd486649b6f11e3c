"""A stand-in object store for the tests of the code paths a URI warehouse takes (libs.io.storage), without a
server: s3a://BUCKET/KEY (and s3://) is ROOT/BUCKET/KEY of a local directory.

    store = fake_s3(monkeypatch, tmp_path / "s3")
    warehouse = store.url("wh")                      # "s3a://bucket/wh"

libs.io.storage.filesystem answers such a URI with pyarrow's view of ROOT (fsspec's local file system behind a
SubTreeFileSystem, which creates the parent directories of a file it writes, as an object store has none to
create), and storage.delta_uri / delta_options point delta-rs at the local directory (delta-rs does not use
pyarrow's file systems). libs.io.storage.is_local still calls the URI remote, so every object-store branch runs.
The tasks of a Spark job see the stand-in too when their closure holds storage.filesystem as the driver has it
(libs.io.task_parquet.task_opener): a function of a test, unlike the module's own, is pickled by value.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pyarrow.fs as pafs
from fsspec.implementations.local import LocalFileSystem

from blockheat.libs.io import storage

BUCKET = "bucket"


@dataclass(frozen=True)
class FakeStore:
    root: Path
    bucket: str = BUCKET

    def url(self, key: str = "", scheme: str = "s3a") -> str:
        return f"{scheme}://{self.bucket}/{key}".rstrip("/")

    def local(self, location: str) -> Path:
        """The local file or directory behind a URI of the store."""
        parsed = urlparse(location)
        return self.root / parsed.netloc / parsed.path.lstrip("/")


def _filesystem(base: pafs.FileSystem, real: Any) -> Any:
    def filesystem(location: str | os.PathLike[str]) -> tuple[pafs.FileSystem, str]:
        text = os.fspath(location)
        if storage.scheme(text) in storage.S3_SCHEMES:
            parsed = urlparse(text)
            return base, f"{parsed.netloc}{parsed.path}".rstrip("/")
        return real(text)

    return filesystem


def fake_s3(monkeypatch: Any, root: Path) -> FakeStore:
    """Route s3a:// and s3:// locations to `root` for the rest of the test (see the module docstring)."""
    root.mkdir(parents=True, exist_ok=True)
    store = FakeStore(root)
    (root / store.bucket).mkdir(exist_ok=True)
    base = pafs.SubTreeFileSystem(str(root), pafs.PyFileSystem(pafs.FSSpecHandler(LocalFileSystem(auto_mkdir=True))))
    real_uri, real_options = storage.delta_uri, storage.delta_options
    monkeypatch.setattr(storage, "filesystem", _filesystem(base, storage.filesystem))
    monkeypatch.setattr(storage, "delta_uri", lambda location: str(store.local(location))
                        if storage.scheme(location) in storage.S3_SCHEMES else real_uri(location))
    monkeypatch.setattr(storage, "delta_options", lambda location: None
                        if storage.scheme(location) in storage.S3_SCHEMES else real_options(location))
    return store
