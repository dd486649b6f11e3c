"""libs.io.lease without Spark: of two writers of one trace exactly one holds the lease, the other waits for it or
is refused naming the holder; an expired lease is taken over and its old holder can commit nothing more; the
journal applies a left entry only when no later writer of the trace decided its own change. Locally and on S3
(S3Proxy's conditional PUT)."""
from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

from blockheat.libs.io import delta_log, journal, lease, storage
from blockheat.libs.io.delta_files import TableTarget, write_from_driver

SCHEMA = pa.schema([pa.field("trace_id", pa.string()), pa.field("n", pa.int64())])


def race(warehouse: str, trace: str) -> tuple[list[lease.Lease], list[lease.LockBusy]]:
    """Two acquirers at once, neither waiting: what each got."""
    won: list[lease.Lease] = []
    refused: list[lease.LockBusy] = []
    start = threading.Barrier(2)

    def one() -> None:
        start.wait()
        try:
            won.append(lease.acquire(warehouse, trace, wait_s=0, lease_s=30))
        except lease.LockBusy as exc:
            refused.append(exc)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return won, refused


def check_one_writer_and_takeover(warehouse: str) -> None:
    for attempt in range(5):
        trace = f"t{attempt}"
        won, refused = race(warehouse, trace)
        assert (len(won), len(refused)) == (1, 1)
        assert str(refused[0]).startswith(f"trace {trace} is being ingested by another writer, owner "
                                          f"{won[0].record.owner} (host ")
        assert "run again when it has finished (or with a longer --lock-wait)" in str(refused[0])
        won[0].release()
        again = lease.acquire(warehouse, trace, wait_s=0)     # released: the next one gets it at once
        assert again.token == won[0].token + 1
        again.release()
    # A holder stopped past its lease (its renewal stopped): the next writer waits for the expiry and takes over.
    first = lease.acquire(warehouse, "x", lease_s=0.6)
    first._stop.set()
    time.sleep(0.05)
    started = time.monotonic()
    second = lease.acquire(warehouse, "x", wait_s=10, lease_s=30)
    assert 0.3 < time.monotonic() - started < 5
    with pytest.raises(lease.LeaseLost, match=r"trace x: this ingest's lock .* expired while it was stopped and "
                                               r"another ingest took it over"):
        first.check()
    with pytest.raises(lease.LeaseLost):
        first.mark_decided()
    second.check()
    second.release()
    first.release()                                           # lost: leaves the later lease as it is
    assert lease.current_lease(warehouse, "x").token == second.token


def test_one_writer_per_trace_on_a_local_warehouse(tmp_path: Path) -> None:
    check_one_writer_and_takeover(str(tmp_path))


def test_one_writer_per_trace_on_an_object_store(s3_server, monkeypatch) -> None:
    for name, value in s3_server.environment().items():
        monkeypatch.setenv(name, value)
    warehouse = s3_server.url(f"lease-{uuid.uuid4().hex[:8]}", "s3a")
    key = storage.join(warehouse, "once")
    assert storage.put_if_absent(key, b"first")
    assert not storage.put_if_absent(key, b"second")
    assert storage.read_bytes(key) == b"first"
    check_one_writer_and_takeover(warehouse)


def table(warehouse: Path, name: str) -> TableTarget:
    root = str(warehouse / name)
    if not delta_log.is_table(root):
        delta_log.create_table(root, SCHEMA, ["trace_id"], {})
    return TableTarget(name, root, SCHEMA, ("trace_id",), ("n",))


def rows(t: TableTarget) -> list[int]:
    return sorted(delta_log.read(t.root, ["n"], {"trace_id": "x"}).column("n").to_pylist())


def left_entry(warehouse: Path, value: int, held: lease.Lease) -> None:
    """A decided commit of two tables under `held`, stopped before any step (the writer's lease stays)."""
    a, b = table(warehouse, "a"), table(warehouse, "b")
    writes = [write_from_driver(t, {"trace_id": "x"}, pa.table({"n": pa.array([value], pa.int64())}))
              for t in (a, b)]
    real = journal._apply
    journal._apply = lambda entry, **_: (_ for _ in ()).throw(KeyboardInterrupt())
    try:
        with pytest.raises(KeyboardInterrupt):
            journal.commit(warehouse, writes, f"write {value}", lease=held)
    finally:
        journal._apply = real


def test_a_left_entry_is_applied_only_before_a_later_writer_decides(tmp_path: Path) -> None:
    a, b = table(tmp_path, "a"), table(tmp_path, "b")
    old = lease.acquire(tmp_path, "x", lease_s=0.3)
    left_entry(tmp_path, 1, old)
    old._stop.set()                                           # stopped: its lease runs out
    new = lease.acquire(tmp_path, "x", wait_s=10, lease_s=0.3)
    assert journal.finish(tmp_path) == []                     # a reader leaves it to the later holder
    assert journal.finish(tmp_path, holder=new) == ["write 1"]
    assert (rows(a), rows(b)) == ([1], [1])
    # The later writer decided before an older entry was finished: the entry is dropped, never applied over it.
    left_entry(tmp_path, 2, new)
    new._stop.set()
    newer = lease.acquire(tmp_path, "x", wait_s=10, lease_s=0.3)
    newer.mark_decided()
    assert journal.finish(tmp_path) == []
    assert journal.pending(tmp_path) == []
    assert (rows(a), rows(b)) == ([1], [1])
    newer.release()


def test_the_commands_lock_wait_default_is_the_leases() -> None:
    from blockheat.jobs.cli.main import LOCK_WAIT_S, build_parser

    args = build_parser().parse_args(["ingest", "--format", "msr", "--trace-id", "x", "f.csv"])
    assert args.lock_wait == LOCK_WAIT_S == lease.DEFAULT_WAIT_S
