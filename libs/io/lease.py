"""One writer per trace id: a lease under the warehouse that ingests (replace and append) of a trace hold while
they run, on a local warehouse and on an object store alike.

A trace's leases are numbered files `<warehouse>/_locks/<trace_id>/<token>.json` (token: 12 digits, rising); the
highest is the current one. Each holds {trace, owner, host, pid, token, acquired_at, expires_at, decided, released}.
- acquire: the current lease absent, released, past expires_at, or (same host) its process gone: create the next
  token with put-if-absent (libs.io.storage.put_if_absent: a hard link locally, `If-None-Match: *` on S3), so of
  two writers exactly one gets it. Otherwise wait (polling) up to `wait_s`, then LockBusy names the holder.
- the holder renews its lease (expires_at = now + lease_s) from a thread every lease_s / 3; only the holder writes
  its own token's file, so a plain atomic replace is enough.
- fencing: the holder's check() fails (LeaseLost) once a higher token exists: it was stopped past expiry and
  another writer took over. The journal (libs.io.journal) checks before writing its entry (mark_decided, which
  also records `decided`) and before each step's commit, and records the token in the entry; recovery applies an
  entry only when no later lease has decided (libs.io.journal.finish).
- release: the holder rewrites its file with released = true (the file stays: the token never goes back).

Common path: one create, one rewrite at the decision and one at the release (plus a renewal per lease_s / 3).
BLOCKHEAT_LEASE_S overrides the lease length (default 60 s).
"""
from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from blockheat.libs.io import storage

log = logging.getLogger(__name__)

DIRECTORY = "_locks"
LEASE_ENV = "BLOCKHEAT_LEASE_S"
DEFAULT_LEASE_S = 60.0
DEFAULT_WAIT_S = 600.0


class LockBusy(RuntimeError):
    """Another writer held the trace's lease for longer than this one would wait."""


class LeaseLost(RuntimeError):
    """This writer's lease was taken over (it was stopped past its expiry): it must commit nothing more."""


def lease_seconds() -> float:
    """The lease length: BLOCKHEAT_LEASE_S, default 60 s."""
    text = os.environ.get(LEASE_ENV, "").strip()
    return float(text) if text else DEFAULT_LEASE_S


def folder(warehouse: str | os.PathLike[str], trace_id: str) -> str:
    return storage.join(storage.normalize(warehouse), DIRECTORY, trace_id)


def _file(base: str, token: int) -> str:
    return storage.join(base, f"{token:012d}.json")


@dataclass(frozen=True)
class Record:
    """One lease file's content."""

    trace: str
    owner: str
    host: str
    pid: int
    token: int
    acquired_at: float
    expires_at: float
    decided: bool = False
    released: bool = False

    def live(self, now: float | None = None) -> bool:
        """Held: not released, not expired, and (on this host) its process still there."""
        if self.released or (now or time.time()) >= self.expires_at:
            return False
        if self.host == socket.gethostname():
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                return False
            except PermissionError:
                pass
        return True

    def describe(self) -> str:
        return f"owner {self.owner} (host {self.host}, pid {self.pid}, lease {self.token})"

    def to_bytes(self) -> bytes:
        return json.dumps(self.__dict__).encode()


def _tokens(base: str) -> list[int]:
    found = []
    for path, _, _ in storage.file_infos(base):
        name = storage.name(path)
        if name.endswith(".json") and name[:-5].isdigit():
            found.append(int(name[:-5]))
    return sorted(found)


def current_lease(warehouse: str | os.PathLike[str], trace_id: str) -> Record | None:
    """The trace's current (highest) lease; None when it never had one."""
    base = folder(warehouse, trace_id)
    if storage.is_local(base) and not os.path.isdir(base):
        return None
    for token in reversed(_tokens(base)):
        try:
            data: dict[str, Any] = json.loads(storage.read_bytes(_file(base, token)))
        except FileNotFoundError:
            continue
        return Record(**data)
    return None


class Lease:
    """A held lease (acquire()); check() before each commit, release() at the end (or use it as a context)."""

    def __init__(self, warehouse: str | os.PathLike[str], record: Record, lease_s: float) -> None:
        self.warehouse = storage.normalize(warehouse)
        self.record = record
        self.lease_s = lease_s
        self.path = _file(folder(warehouse, record.trace), record.token)
        self._guard = threading.Lock()
        self._stop = threading.Event()
        self._lost: LeaseLost | None = None
        self._thread = threading.Thread(target=self._renew_loop, name=f"lease-{record.trace}", daemon=True)
        self._thread.start()

    @property
    def trace(self) -> str:
        return self.record.trace

    @property
    def token(self) -> int:
        return self.record.token

    def _rewrite(self, **changes: Any) -> None:
        self.record = Record(**{**self.record.__dict__, **changes})
        storage.replace_file(self.path, self.record.to_bytes())

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.lease_s / 3):
            try:
                self.check()
            except LeaseLost:
                return
            except Exception as exc:            # a store that did not answer once: the next round tries again
                log.warning("renewing the lease %s failed: %s", self.path, exc)

    def check(self) -> None:
        """LeaseLost when another writer holds a later lease of the trace; else renew this one."""
        with self._guard:
            if self._lost is not None:
                raise self._lost
            later = [t for t in _tokens(folder(self.warehouse, self.trace)) if t > self.token]
            if later:
                holder = current_lease(self.warehouse, self.trace)
                self._lost = LeaseLost(
                    f"trace {self.trace}: this ingest's lock {self.path} expired while it was stopped and another "
                    f"ingest took it over ({holder.describe() if holder else f'lease {later[-1]}'}); nothing more "
                    "is committed by this one: check the trace and ingest again if these files should be it")
                self._stop.set()
                raise self._lost
            self._rewrite(expires_at=time.time() + self.lease_s)

    def mark_decided(self) -> None:
        """check(), then record that this writer is about to write its journal entry: from then on an older entry
        of the trace is never applied (it would go over this writer's change)."""
        self.check()
        with self._guard:
            self._rewrite(decided=True)

    def release(self) -> None:
        """Stop renewing and let the next writer in (nothing when the lease was lost)."""
        self._stop.set()
        with self._guard:
            if self._lost is None:
                try:
                    self._rewrite(released=True, expires_at=time.time())
                except OSError as exc:
                    log.warning("releasing the lease %s failed (it expires by itself): %s", self.path, exc)

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *_: object) -> None:
        self.release()


def acquire(warehouse: str | os.PathLike[str], trace_id: str, *, wait_s: float = DEFAULT_WAIT_S,
            lease_s: float | None = None) -> Lease:
    """Take the trace's lease, waiting up to `wait_s` for a live holder; LockBusy naming the holder after that."""
    lease_s = lease_seconds() if lease_s is None else lease_s
    base = folder(warehouse, trace_id)
    owner, deadline, pause, told = uuid.uuid4().hex, time.monotonic() + wait_s, 0.05, False
    while True:
        tokens = _tokens(base)
        holder = current_lease(warehouse, trace_id) if tokens else None
        if holder is None or not holder.live():
            token = (tokens[-1] if tokens else 0) + 1
            now = time.time()
            record = Record(trace_id, owner, socket.gethostname(), os.getpid(), token, now, now + lease_s)
            if storage.put_if_absent(_file(base, token), record.to_bytes()):
                for old in tokens[:-1]:         # the one before stays until a later acquisition: not needed, small
                    storage.delete(_file(base, old))
                if holder is not None and not holder.released:
                    log.warning("trace %s: took over the lock of %s, which expired", trace_id, holder.describe())
                return Lease(warehouse, record, lease_s)
            continue                            # another writer created it first: look again
        if time.monotonic() >= deadline:
            raise LockBusy(f"trace {trace_id} is being ingested by another writer, {holder.describe()}, lock "
                           f"{_file(base, holder.token)}; waited {wait_s:g} s: run again when it has finished (or "
                           "with a longer --lock-wait)")
        if not told:
            log.info("trace %s: waiting for the ingest holding its lock, %s", trace_id, holder.describe())
            told = True
        time.sleep(pause)
        pause = min(pause * 2, 1.0)


__all__ = ["Lease", "LeaseLost", "LockBusy", "Record", "acquire", "current_lease", "lease_seconds"]
