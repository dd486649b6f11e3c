"""The bench scripts' `--warehouse`: a local directory (default <workdir>/warehouse) or an object-store URI.

An s3a:// (or s3://) warehouse with no AWS_ENDPOINT_URL in the environment gets an S3Proxy of its own on loopback
(tests.s3_server, its data under the bench's work directory, the URI's bucket created there), its settings put in
os.environ (before the bench builds its SparkSession) and the warehouse used as s3a://<bucket>/<path>. With
AWS_ENDPOINT_URL set, the URI and the environment's S3 settings are used as they are (libs.io.storage).

Reference engines that read local files only (DuckDB, polars) get local copies of the same files (local_copy).
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from unittest import mock
from urllib.parse import unquote, urlparse

import pyarrow.fs as pafs
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from blockheat.libs.io import storage

HELP = ("where blockheat's tables go: a local directory (default <workdir>/warehouse) or s3a://bucket/prefix; "
        "without AWS_ENDPOINT_URL set, the bench starts S3Proxy on loopback (data under its work directory) "
        "and uses s3a://<bucket>/<prefix> there, else the URI and the AWS_* settings as they are")


def add_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--warehouse", default=None, metavar="URI", help=HELP)


@dataclass(frozen=True)
class Warehouse:
    location: Path | str          # what SparkConfig.warehouse takes: a Path, or a URI
    label: str                    # for the output lines

    @property
    def local(self) -> bool:
        return storage.is_local(self.location)

    def join(self, *parts: str) -> str:
        return storage.join(self.location, *parts)


@contextmanager
def warehouse(uri: str | None, work: Path) -> Iterator[Warehouse]:
    """The bench's warehouse for `--warehouse uri` (None: work/warehouse), with S3Proxy running on loopback for
    the block's duration when the URI is an object store's and none is configured (see the module's doc)."""
    if uri is None or storage.is_local(uri):
        where = Path(storage.normalize(work / "warehouse" if uri is None else uri))
        yield Warehouse(where, f"local {where}")
        return
    normalized = storage.normalize(uri)
    if os.environ.get("AWS_ENDPOINT_URL"):
        yield Warehouse(normalized, f"{normalized} (AWS_ENDPOINT_URL={os.environ['AWS_ENDPOINT_URL']})")
        return
    from tests.s3_server import running_s3_server

    parsed = urlparse(normalized)
    with running_s3_server(work / "s3proxy", bucket=parsed.netloc) as server, mock.patch.dict(os.environ):
        for k in storage.S3_VARIABLES:
            os.environ.pop(k, None)
        os.environ.update(server.environment())
        where = server.url(parsed.path.lstrip("/"), scheme="s3a")
        yield Warehouse(where, f"{where} (S3Proxy on loopback, {server.endpoint})")


def _path(location: str) -> str:
    """A file location as Spark reports it (inputFiles: URL-escaped) made a libs.io.storage location."""
    parsed = urlparse(location)
    if parsed.scheme in ("", "file"):
        return unquote(parsed.path)
    return f"{parsed.scheme}://{parsed.netloc}{unquote(parsed.path)}"


def local_copy(files: Iterable[str], base: str | os.PathLike[str], dest: Path) -> list[Path]:
    """Copies of `files` (locations below `base`, e.g. a table's current files) under `dest`, at the same paths
    relative to `base` (partition directories kept); returns the copies' paths."""
    _, root = storage.filesystem(storage.normalize(base))
    local = pafs.LocalFileSystem()
    copies = []
    for f in files:
        fs, path = storage.filesystem(_path(f))
        if not path.startswith(root.rstrip("/") + "/"):
            raise ValueError(f"{f} is not below {base}")
        target = dest / path[len(root.rstrip("/")) + 1:]
        target.parent.mkdir(parents=True, exist_ok=True)
        pafs.copy_files(path, str(target), source_filesystem=fs, destination_filesystem=local)
        copies.append(target)
    return copies


def upload(local: Path, location: str) -> None:
    """A local file copied to a location (a local path or a URI)."""
    fs, path = storage.filesystem(location)
    storage.makedirs(storage.parent(storage.normalize(location)))
    pafs.copy_files(str(local), path, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs)


def read_parquet(location: str | os.PathLike[str], **kwargs: object):  # type: ignore[no-untyped-def]
    """pyarrow.parquet.read_table of a local or object-store file or directory."""
    fs, path = storage.filesystem(location)
    return pq.read_table(path, filesystem=fs, **kwargs)


def server_pids() -> list[int]:
    """This process's S3Proxy children (the tree the benches measure memory of includes them)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid != os.getpid():
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if b"s3proxy" in f.read():
                    pids.append(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    return pids
