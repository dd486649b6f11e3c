"""A real S3-compatible server for the tests: S3Proxy (Apache-2.0, one jar that `make` fetches into
<venv>/var/blockheat/), on 127.0.0.1 at a free port, its filesystem backend in a given directory, fixed test
credentials, path-style addressing, plain HTTP.

S3Proxy 4.x honours conditional writes on its filesystem backend (a second `PUT` with `If-None-Match: *` of an
existing key answers 412, atomically: the object is linked into place), which is what delta-rs commits rely on
(libs.io.delta_log). Started with `java` from PATH; about 1-2 s to its first answer.
"""
from __future__ import annotations

import datetime
import hashlib
import hmac
import http.client
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlsplit

from blockheat.libs.io.connect_server import free_port

#: Overrides where the jar is looked for (default: the newest s3proxy-*-jar-with-dependencies.jar that `make` put in
#: this interpreter's environment).
JAR_ENV = "BLOCKHEAT_S3PROXY_JAR"
#: S3Proxy's log level (default warn; debug logs every request) in <directory>/s3proxy.log.
LOG_LEVEL_ENV = "BLOCKHEAT_S3PROXY_LOG_LEVEL"
ACCESS_KEY = "blockheat-test"
SECRET_KEY = "blockheat-test-secret"
REGION = "us-east-1"
BUCKET = "blockheat-test"
START_TIMEOUT_S = 60.0
#: A short-lived test server: the JIT's first tier and the serial collector start it sooner.
JAVA_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xss512k")


@dataclass(frozen=True)
class S3Server:
    """Where a running S3Proxy answers and how to sign in to it."""

    endpoint: str                 # http://127.0.0.1:PORT
    bucket: str
    access_key: str
    secret_key: str
    region: str

    def url(self, key: str = "", scheme: str = "s3") -> str:
        """s3://bucket/key (or s3a://)."""
        return f"{scheme}://{self.bucket}/{key}".rstrip("/")

    def environment(self) -> dict[str, str]:
        """The AWS_* variables that point this product's clients (libs.io.storage.S3Settings: Spark, pyarrow,
        delta-rs) at this server."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": self.access_key,
                "AWS_SECRET_ACCESS_KEY": self.secret_key, "AWS_REGION": self.region}

    def request(self, method: str, path: str, body: bytes = b"",
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        """One signed (AWS Signature V4) request, e.g. ("PUT", "/bucket/key"): status, headers, body."""
        return signed_request(self.endpoint, method, path, self.access_key, self.secret_key, self.region, body,
                              headers)


def signed_request(endpoint: str, method: str, path: str, access_key: str, secret_key: str, region: str,
                   body: bytes = b"", headers: dict[str, str] | None = None,
                   timeout: float = 30.0) -> tuple[int, dict[str, str], bytes]:
    """An S3 request signed with AWS Signature V4 (no query string), by the standard library alone."""
    parts = urlsplit(endpoint)
    now = datetime.datetime.now(datetime.UTC)
    stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    payload = hashlib.sha256(body).hexdigest()
    signed = {"host": parts.netloc, "x-amz-date": stamp, "x-amz-content-sha256": payload,
              **{k.lower(): v.strip() for k, v in (headers or {}).items()}}
    names = sorted(signed)
    canonical = "\n".join([method, quote(path), "", *(f"{n}:{signed[n]}" for n in names), "", ";".join(names),
                           payload])
    scope = f"{day}/{region}/s3/aws4_request"
    to_sign = f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    key = f"AWS4{secret_key}".encode()
    for part in (day, region, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    signed["authorization"] = (f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, "
                               f"SignedHeaders={';'.join(names)}, Signature={signature}")
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=signed)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def s3proxy_jar() -> Path:
    """The S3Proxy jar: $BLOCKHEAT_S3PROXY_JAR, else the newest that `make` fetched into the environment."""
    if os.environ.get(JAR_ENV):
        return Path(os.environ[JAR_ENV])
    jars = sorted((Path(sys.prefix) / "var" / "blockheat").glob("s3proxy-*-jar-with-dependencies.jar"),
                  key=lambda p: tuple(int(x) for x in p.name.split("-")[1].split(".") if x.isdigit()))
    if not jars:
        raise FileNotFoundError(f"no S3Proxy jar in {Path(sys.prefix) / 'var' / 'blockheat'}: run `make venv` "
                                f"(or set {JAR_ENV})")
    return jars[-1]


class ExitedEarly(RuntimeError):
    """The server process ended before it answered (its log's tail in the message)."""


class S3Proxy:
    """One S3Proxy process over `directory` (its buckets in directory/data, its settings and log beside)."""

    def __init__(self, directory: Path, bucket: str = BUCKET, jar: Path | None = None) -> None:
        self.directory = Path(directory)
        self.bucket = bucket
        self.jar = jar or s3proxy_jar()
        self.process: subprocess.Popen[bytes] | None = None
        self.server: S3Server | None = None

    @property
    def log_path(self) -> Path:
        return self.directory / "s3proxy.log"

    def start(self, timeout: float = START_TIMEOUT_S) -> S3Server:
        """Start the server, wait until it answers, create the bucket. A port taken between choosing and binding
        it (another process's) is retried with another."""
        for attempt in range(3):
            try:
                return self._start(free_port(), timeout)
            except ExitedEarly:
                self.stop()
                if attempt == 2:
                    raise
            except BaseException:
                self.stop()
                raise
        raise AssertionError("unreachable")

    def _start(self, port: int, timeout: float) -> S3Server:
        data = self.directory / "data"
        data.mkdir(parents=True, exist_ok=True)
        endpoint = f"http://127.0.0.1:{port}"
        properties = self.directory / "s3proxy.properties"
        properties.write_text("\n".join([
            f"s3proxy.endpoint={endpoint}",
            "s3proxy.authorization=aws-v2-or-v4",
            f"s3proxy.identity={ACCESS_KEY}",
            f"s3proxy.credential={SECRET_KEY}",
            "jclouds.provider=filesystem-nio2",
            f"jclouds.filesystem.basedir={data}",
            f"jclouds.identity={ACCESS_KEY}",
            f"jclouds.credential={SECRET_KEY}",
            f"jclouds.region={REGION}", ""]))
        level = os.environ.get(LOG_LEVEL_ENV, "warn")
        env = {**os.environ, "LOG_LEVEL": level, "JETTY_LOG_LEVEL": "warn"}
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(["java", *JAVA_OPTIONS, "-jar", str(self.jar), "--properties",
                                             str(properties)], stdin=subprocess.DEVNULL, stdout=log,
                                            stderr=subprocess.STDOUT, env=env, cwd=self.directory)
        self._wait_until_answering(endpoint, timeout)
        server = S3Server(endpoint, self.bucket, ACCESS_KEY, SECRET_KEY, REGION)
        status, _, body = server.request("PUT", f"/{self.bucket}")
        if status not in (200, 409):                                       # 409: the bucket is there already
            raise RuntimeError(f"S3Proxy did not create bucket {self.bucket}: {status} {body[:300]!r}")
        self.server = server
        return server

    def _wait_until_answering(self, endpoint: str, timeout: float) -> None:
        parts = urlsplit(endpoint)
        deadline = time.monotonic() + timeout
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                tail = self.log_path.read_text(errors="replace")[-2000:]
                raise ExitedEarly(f"S3Proxy exited with {self.process.returncode} before answering:\n{tail}")
            try:
                conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=2)
                conn.request("GET", "/")
                conn.getresponse().read()                                   # any answer (403 unsigned) will do
                conn.close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise TimeoutError(f"S3Proxy did not answer at {endpoint} in {timeout} s") from None
                time.sleep(0.05)

    def stop(self, timeout: float = 15.0) -> None:
        """Terminate the process and wait for it (killed if it does not exit in `timeout` s)."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def running_s3_server(directory: Path, bucket: str = BUCKET, cleanup: bool = True) -> Iterator[S3Server]:
    """An S3Proxy over `directory` for the block's duration; stopped after it, and the directory removed
    (`cleanup`)."""
    proxy = S3Proxy(directory, bucket)
    try:
        yield proxy.start()
    finally:
        proxy.stop()
        if cleanup:
            shutil.rmtree(directory, ignore_errors=True)
