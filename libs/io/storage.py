"""Where tables, traces and exports live: a local path or a URI, opened the same way by the driver and the tasks.

A location is a local path (kept absolute) or a URI Spark, pyarrow and delta-rs all understand: `file://`
(taken as a local path), `s3a://bucket/prefix` and `s3://bucket/prefix` (S3 and S3-compatible stores).

S3 settings are read from the environment, the way the AWS tools read them, and handed to every client from here
(libs.io.session gives Spark the same as its `fs.s3a.*` settings and passes the variables on to the executors):

    AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN  credentials (else the SDKs' default chain)
    AWS_REGION (or AWS_DEFAULT_REGION)                           region (default us-east-1)
    AWS_ENDPOINT_URL                                             an S3-compatible server (http://127.0.0.1:9000)
    BLOCKHEAT_S3_PATH_STYLE                                      true: bucket in the path (default: with an endpoint)

    fs, path = filesystem("s3a://traces/msr/prn_0.csv.gz")          # pyarrow's S3FileSystem, "traces/msr/prn_0.csv.gz"
    join("s3a://lake/wh", "requests")                               # "s3a://lake/wh/requests"

pyarrow loads when a file is first opened, so a command's start (the endpoint file of a server, its token) costs
none of it.
"""
from __future__ import annotations

import datetime as dt
import functools
import hashlib
import hmac
import http.client
import os
import posixpath
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlparse

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

#: The warehouse when BLOCKHEAT_WAREHOUSE is not set.
DEFAULT_WAREHOUSE = "warehouse"

#: URI schemes of S3 and S3-compatible stores.
S3_SCHEMES = ("s3a", "s3")
#: The environment variables S3Settings reads (libs.io.session passes them on to Spark's executors).
S3_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION",
                "AWS_ENDPOINT_URL", "BLOCKHEAT_S3_PATH_STYLE")
DEFAULT_REGION = "us-east-1"


class StorageError(ValueError):
    """A location this product cannot use (an unknown scheme, a bucket missing)."""


def scheme(location: str | os.PathLike[str]) -> str:
    """The URI scheme of a location ("" for a local path)."""
    text = os.fspath(location)
    return urlparse(text).scheme.lower() if "://" in text else ""


def is_local(location: str | os.PathLike[str]) -> bool:
    return scheme(location) in ("", "file")


def normalize(location: str | os.PathLike[str]) -> str:
    """The location as this product keeps it: an absolute local path, or a URI without a trailing slash."""
    text = os.fspath(location)
    kind = scheme(text)
    if kind == "":
        return str(Path(text).resolve())
    if kind == "file":
        return str(Path(urlparse(text).path).resolve())
    if kind in S3_SCHEMES:
        parsed = urlparse(text)
        if not parsed.netloc:
            raise StorageError(f"{text}: an S3 location needs a bucket (s3a://bucket/prefix)")
        return f"{kind}://{parsed.netloc}{parsed.path.rstrip('/')}"
    raise StorageError(f"{text}: unsupported location scheme {kind!r} (use a local path, file://, s3a:// or s3://)")


def location(text: str | os.PathLike[str]) -> str | Path:
    """A location as configurations hold it: a Path for a local one, the normalized URI otherwise."""
    normalized = normalize(text)
    return Path(normalized) if is_local(normalized) else normalized


def warehouse_from_env() -> str | Path:
    """BLOCKHEAT_WAREHOUSE (default ./warehouse) as a location."""
    return location(os.environ.get("BLOCKHEAT_WAREHOUSE", DEFAULT_WAREHOUSE))


def join(base: str | os.PathLike[str], *parts: str) -> str:
    """base/part/...: a local path or a URI, as `base` is."""
    text = os.fspath(base)
    return os.path.join(text, *parts) if is_local(text) else posixpath.join(text, *parts)


def parent(location: str) -> str:
    return os.path.dirname(location) if is_local(location) else posixpath.dirname(location)


def name(location: str) -> str:
    """The last part of a location's path."""
    return os.path.basename(location.rstrip("/"))


def truthy(value: str | None) -> bool | None:
    if value is None or not value.strip():
        return None
    return value.strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class S3Settings:
    """The S3 settings of this process (from_env), in the form each client takes."""

    endpoint: str | None = None
    region: str = DEFAULT_REGION
    access_key: str | None = None
    secret_key: str | None = None
    session_token: str | None = None
    path_style: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> S3Settings:
        env = os.environ if env is None else env
        endpoint = env.get("AWS_ENDPOINT_URL") or None
        path_style = truthy(env.get("BLOCKHEAT_S3_PATH_STYLE"))
        return cls(endpoint=endpoint, region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or DEFAULT_REGION,
                   access_key=env.get("AWS_ACCESS_KEY_ID") or None, secret_key=env.get("AWS_SECRET_ACCESS_KEY") or None,
                   session_token=env.get("AWS_SESSION_TOKEN") or None,
                   path_style=endpoint is not None if path_style is None else path_style)

    @property
    def secure(self) -> bool:
        return self.endpoint is None or not self.endpoint.lower().startswith("http://")

    def pyarrow(self) -> pafs.S3FileSystem:
        """pyarrow's S3 file system with these settings."""
        import pyarrow.fs as pafs  # lazy: see the module's docstring
        args: dict[str, Any] = {"region": self.region, "force_virtual_addressing": not self.path_style}
        if self.endpoint:
            parsed = urlparse(self.endpoint)
            args["endpoint_override"] = parsed.netloc + parsed.path.rstrip("/")
            args["scheme"] = parsed.scheme or "https"
        if self.access_key:
            args.update(access_key=self.access_key, secret_key=self.secret_key, session_token=self.session_token)
        return pafs.S3FileSystem(**args)

    def delta_options(self) -> dict[str, str]:
        """delta-rs storage options (object_store's AWS keys). Commits use S3's conditional put (If-None-Match),
        so two writers cannot both write one log version (libs.io.delta_log)."""
        options = {"AWS_REGION": self.region, "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": str(not self.path_style).lower(),
                   "AWS_CONDITIONAL_PUT": "etag"}
        if self.endpoint:
            options["AWS_ENDPOINT_URL"] = self.endpoint
            if not self.secure:
                options["AWS_ALLOW_HTTP"] = "true"
        if self.access_key:
            options.update(AWS_ACCESS_KEY_ID=self.access_key, AWS_SECRET_ACCESS_KEY=self.secret_key or "")
            if self.session_token:
                options["AWS_SESSION_TOKEN"] = self.session_token
        return options

    def hadoop_conf(self) -> dict[str, str]:
        """Spark's `spark.hadoop.fs.s3a.*` settings for the same store."""
        conf = {"fs.s3a.endpoint.region": self.region, "fs.s3a.path.style.access": str(self.path_style).lower()}
        if self.endpoint:
            conf["fs.s3a.endpoint"] = self.endpoint
            conf["fs.s3a.connection.ssl.enabled"] = str(self.secure).lower()
        if self.access_key:
            conf["fs.s3a.access.key"] = self.access_key
            conf["fs.s3a.secret.key"] = self.secret_key or ""
            if self.session_token:
                conf["fs.s3a.session.token"] = self.session_token
                conf["fs.s3a.aws.credentials.provider"] = \
                    "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
        return {f"spark.hadoop.{k}": v for k, v in conf.items()}


@functools.lru_cache(maxsize=8)
def _s3(settings: S3Settings) -> pafs.S3FileSystem:
    return settings.pyarrow()


def filesystem(location: str | os.PathLike[str]) -> tuple[pafs.FileSystem, str]:
    """pyarrow's file system for a location and the path on it."""
    import pyarrow.fs as pafs  # lazy: see the module's docstring
    text = os.fspath(location)
    kind = scheme(text)
    if kind in ("", "file"):
        return pafs.LocalFileSystem(), normalize(text)
    if kind in S3_SCHEMES:
        parsed = urlparse(text)
        return _s3(S3Settings.from_env()), f"{parsed.netloc}{parsed.path}".rstrip("/")
    raise StorageError(f"{text}: unsupported location scheme {kind!r}")


def delta_uri(location: str) -> str:
    """A table's location as delta-rs takes it (s3a:// is S3 to it as well)."""
    return location


def delta_options(location: str) -> dict[str, str] | None:
    """delta-rs storage options for a table's location (None for a local one)."""
    return None if is_local(location) else S3Settings.from_env().delta_options()


def exists(location: str) -> bool:
    import pyarrow.fs as pafs  # lazy: see the module's docstring
    fs, path = filesystem(location)
    return fs.get_file_info(path).type != pafs.FileType.NotFound


def is_file(location: str) -> bool:
    import pyarrow.fs as pafs  # lazy: see the module's docstring
    fs, path = filesystem(location)
    return fs.get_file_info(path).type == pafs.FileType.File


def makedirs(location: str) -> None:
    """Create a directory and its parents (object stores have none to create)."""
    if is_local(location):
        os.makedirs(normalize(location), exist_ok=True)


def size(location: str) -> int:
    fs, path = filesystem(location)
    return int(fs.get_file_info(path).size)


def mtime_ms(location: str) -> int:
    """The file's modification time in milliseconds (what a Delta add action records)."""
    fs, path = filesystem(location)
    info = fs.get_file_info(path)
    return int(info.mtime_ns // 1_000_000) if info.mtime_ns is not None else 0


def file_infos(location: str) -> Iterator[tuple[str, int, int]]:
    """Every file below a directory or prefix (recursive): its location, size and modification time (ns);
    nothing when it is missing."""
    import pyarrow.fs as pafs  # lazy: see the module's docstring
    fs, path = filesystem(location)
    try:
        infos = fs.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True))
    except FileNotFoundError:
        return
    prefix = location.rstrip("/")
    for info in infos:
        if info.type == pafs.FileType.File:
            relative = info.path[len(path):].lstrip("/")
            yield join(prefix, *relative.split("/")), int(info.size or 0), int(info.mtime_ns or 0)


def files_under(location: str) -> Iterator[tuple[str, int]]:
    """Every file below a directory or prefix (recursive): its location and size; nothing when it is missing."""
    for found, size, _ in file_infos(location):
        yield found, size


def delete(location: str) -> bool:
    """Delete one file; False when it was not there."""
    fs, path = filesystem(location)
    try:
        fs.delete_file(path)
    except FileNotFoundError:
        return False
    return True


def delete_tree(location: str) -> None:
    """Delete a directory or prefix and everything below it (nothing when it is missing)."""
    import pyarrow.fs as pafs  # lazy: see the module's docstring
    fs, path = filesystem(location)
    if fs.get_file_info(path).type != pafs.FileType.NotFound:
        fs.delete_dir(path)


def write_bytes(location: str, data: bytes) -> None:
    """Write a whole file (its directory created where there are directories)."""
    makedirs(parent(location))
    fs, path = filesystem(location)
    with fs.open_output_stream(path, compression=None) as out:
        out.write(data)


def parquet_file(location: str) -> pq.ParquetFile:
    """A Parquet file opened for reading its footer and row groups, a row group's memory freed once its table is
    (no pre-buffering: pyarrow keeps pre-buffered column chunks as long as the file is open)."""
    import pyarrow.parquet as pq  # lazy: see the module's docstring
    fs, path = filesystem(location)
    return pq.ParquetFile(path, filesystem=fs, pre_buffer=False)


def read_parquet(location: str, columns: list[str] | None = None, filters: Any = None) -> pa.Table:
    """A Parquet file's columns (all by default), the rows matching the pyarrow filter `filters`."""
    import pyarrow.parquet as pq  # lazy: see the module's docstring
    fs, path = filesystem(location)
    return pq.read_table(path, filesystem=fs, columns=columns, filters=filters)


def dictionary_columns(schema: pa.Schema) -> list[str]:
    """The columns Parquet files get dictionary pages for: text (strings, dictionaries). On numbers pyarrow's writer
    builds a dictionary for each column chunk and gives it up at the page limit when the values are mostly distinct
    (sequence numbers, offsets, times, block numbers): work thrown away."""
    import pyarrow as pa  # lazy: see the module's docstring
    return [f.name for f in schema
            if pa.types.is_string(f.type) or pa.types.is_large_string(f.type) or pa.types.is_dictionary(f.type)]


def parquet_options(schema: pa.Schema) -> dict[str, Any]:
    """The writer options (pyarrow.parquet.write_table's, ParquetWriter's) of the Parquet files blockheat writes:
    integers, times and dates DELTA_BINARY_PACKED (a trace's sorted times and sequence numbers take a few bits a row),
    text dictionary-encoded (dictionary_columns), pages not compressed. Measured on a `requests` file of 2.5 M
    requests: 27 MB, 0.18 s to write and 0.02 s to read four integer columns, against 41 MB, 0.24 s and 0.11 s
    snappy-compressed plain pages; snappy over the packed pages saved 15% of the size and cost 40% more read time."""
    import pyarrow as pa  # lazy: see the module's docstring
    packed = [f.name for f in schema
              if pa.types.is_integer(f.type) or pa.types.is_timestamp(f.type) or pa.types.is_date(f.type)]
    return {"compression": "none", "use_dictionary": dictionary_columns(schema),
            "column_encoding": dict.fromkeys(packed, "DELTA_BINARY_PACKED")}


def write_parquet(location: str, table: pa.Table,
                  opener: Callable[[str], tuple[pafs.FileSystem, str]] = filesystem) -> None:
    """One Parquet file at a location (its directory created where there are directories), opened by `opener`
    (a task's own: libs.io.task_parquet), written with parquet_options."""
    import pyarrow.parquet as pq  # lazy: see the module's docstring
    if is_local(location):
        os.makedirs(os.path.dirname(os.fspath(location)), exist_ok=True)
    fs, path = opener(location)
    pq.write_table(table, path, filesystem=fs, **parquet_options(table.schema))


def read_bytes(location: str) -> bytes:
    if is_local(location):
        return Path(normalize(location)).read_bytes()
    fs, path = filesystem(location)
    with fs.open_input_stream(path, compression=None) as stream:
        return stream.read()


def put_if_absent(location: str, data: bytes) -> bool:
    """Create a whole file only when nothing is at `location`: True when this call created it, False when it was
    there already (another writer's). Atomic: two callers for one location never both get True, and a reader sees
    the whole content or no file. Local: a fsynced temporary file hard-linked into place; an object store: a PUT
    with `If-None-Match: *` (S3's conditional write, which delta-rs commits use too)."""
    if is_local(location):
        path, temporary = _synced_beside(location, data)
        try:
            os.link(temporary, path)
        except FileExistsError:
            return False
        finally:
            os.unlink(temporary)
        fsync_directory(os.path.dirname(path))
        return True
    status, body = _s3_put(location, data, {"If-None-Match": "*"})
    if status in (412, 409):               # 409: a concurrent conditional write of the same key is in flight
        return False
    if status != 200:
        raise OSError(f"{location}: conditional PUT answered {status}: {body[:300]!r}")
    return True


def replace_file(location: str, data: bytes) -> None:
    """Replace a whole file atomically (a reader sees the old content or the new, never part): local, a fsynced
    temporary file renamed over it; an object store, one PUT."""
    if not is_local(location):
        write_bytes(location, data)
        return
    path, temporary = _synced_beside(location, data)
    try:
        os.rename(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
    fsync_directory(os.path.dirname(path))


def _synced_beside(location: str, data: bytes) -> tuple[str, str]:
    """(the local file's path, a new temporary file beside it holding `data`, fsynced); its directory made."""
    path = normalize(location)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    temporary = f"{path}.{uuid.uuid4().hex[:12]}.tmp"
    _write_synced(temporary, data)
    return path, temporary


def _write_synced(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(path)
        raise
    os.close(fd)


def fsync_directory(folder: str) -> None:
    """Make a rename or link in a local directory durable (fsync of the directory)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _s3_put(location: str, data: bytes, headers: Mapping[str, str]) -> tuple[int, bytes]:
    """One PUT of an object with extra headers, signed with AWS Signature V4 from S3Settings.from_env() (pyarrow's
    client sends no conditional headers). Needs the credentials in the environment."""
    settings = S3Settings.from_env()
    if not settings.access_key:
        raise StorageError(f"{location}: a conditional write needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in "
                           "the environment")
    parsed = urlparse(location)
    bucket, key = parsed.netloc, parsed.path.lstrip("/")
    if settings.endpoint:
        endpoint = urlparse(settings.endpoint)
        secure, host = endpoint.scheme != "http", endpoint.netloc
        base = endpoint.path.rstrip("/")
    else:
        secure, host, base = True, f"s3.{settings.region}.amazonaws.com", ""
    if settings.path_style:
        path = f"{base}/{bucket}/{key}"
    else:
        host, path = f"{bucket}.{host}", f"{base}/{key}"
    path = quote(path, safe="/-_.~")
    now = dt.datetime.now(dt.UTC)
    stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    payload = hashlib.sha256(data).hexdigest()
    signed = {"host": host, "x-amz-date": stamp, "x-amz-content-sha256": payload,
              **{k.lower(): v.strip() for k, v in headers.items()}}
    if settings.session_token:
        signed["x-amz-security-token"] = settings.session_token
    names = sorted(signed)
    canonical = "\n".join(["PUT", path, "", *(f"{n}:{signed[n]}" for n in names), "", ";".join(names), payload])
    scope = f"{day}/{settings.region}/s3/aws4_request"
    to_sign = f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    signing = f"AWS4{settings.secret_key or ''}".encode()
    for part in (day, settings.region, "s3", "aws4_request"):
        signing = hmac.new(signing, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(signing, to_sign.encode(), hashlib.sha256).hexdigest()
    signed["authorization"] = (f"AWS4-HMAC-SHA256 Credential={settings.access_key}/{scope}, "
                               f"SignedHeaders={';'.join(names)}, Signature={signature}")
    kind = http.client.HTTPSConnection if secure else http.client.HTTPConnection
    conn = kind(host, timeout=60)
    try:
        conn.request("PUT", path, body=data, headers=signed)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


__all__ = [
    "S3_SCHEMES",
    "S3_VARIABLES",
    "S3Settings",
    "StorageError",
    "delete",
    "delete_tree",
    "delta_options",
    "delta_uri",
    "exists",
    "file_infos",
    "files_under",
    "filesystem",
    "fsync_directory",
    "is_file",
    "is_local",
    "join",
    "makedirs",
    "mtime_ms",
    "name",
    "normalize",
    "parent",
    "put_if_absent",
    "read_bytes",
    "replace_file",
    "scheme",
    "size",
    "write_bytes",
]
