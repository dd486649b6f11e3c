"""Requests kept in local scratch files instead of memory: written a chunk at a time in arrival order (their
StreamFacts counted on the way), read back a chunk at a time as often as asked, for replays longer than memory
(sim.scenarios.simulate_chunks takes a SpilledRequests as its chunks).

    with SpilledRequests() as spill:
        for chunk in chunks_in_arrival_order:
            spill.append(chunk)
        out = simulate_chunks(spill, spill.facts(), devices, trace_id, cfg)
"""
from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

import numpy as np

from blockheat.sim.records import FactsCounter, Requests, StreamFacts

__all__ = ["SpilledRequests"]

#: The columns spilled (Requests' own, no think times: a streamed run is open loop), each in a file of its own.
COLUMNS = (("arrival_us", np.float64), ("device", np.int32), ("lbn", np.int64), ("sectors", np.int32),
           ("flags", np.int8))
#: Requests per chunk read back (about 27 MB of columns).
CHUNK_REQUESTS = 1 << 20


class SpilledRequests:
    """Requests in files under a scratch directory of their own (directory: where to make it; default the system's
    temporary directory), removed by close(). Calling the object starts a pass over them in chunks of
    chunk_requests."""

    def __init__(self, directory: str | Path | None = None, chunk_requests: int = CHUNK_REQUESTS) -> None:
        self._scratch = tempfile.TemporaryDirectory(prefix="blockheat-replay-", dir=directory)
        self._paths = {name: Path(self._scratch.name) / name for name, _ in COLUMNS}
        self._writers = {name: open(path, "wb") for name, path in self._paths.items()}  # noqa: SIM115
        self._counter = FactsCounter()
        self.chunk_requests = int(chunk_requests)

    def append(self, chunk: Requests) -> None:
        """The next requests (after the ones before them in arrival order, else ValueError)."""
        self._counter.add(chunk)
        for name, dtype in COLUMNS:
            np.ascontiguousarray(getattr(chunk, name), dtype=dtype).tofile(self._writers[name])

    def facts(self) -> StreamFacts:
        """The facts of the requests appended so far."""
        return self._counter.facts()

    def __len__(self) -> int:
        return self._counter.count

    def __call__(self) -> Iterator[Requests]:
        """A pass over the requests appended so far, chunk_requests at a time."""
        for w in self._writers.values():
            w.flush()
        n = self._counter.count
        with open(self._paths["arrival_us"], "rb") as a, open(self._paths["device"], "rb") as d, \
                open(self._paths["lbn"], "rb") as b, open(self._paths["sectors"], "rb") as s, \
                open(self._paths["flags"], "rb") as f:
            readers = (a, d, b, s, f)
            for start in range(0, n, self.chunk_requests):
                count = min(self.chunk_requests, n - start)
                yield Requests(*(np.fromfile(r, dtype=dtype, count=count)
                                 for r, (_, dtype) in zip(readers, COLUMNS, strict=True)))

    def close(self) -> None:
        """The files removed."""
        for w in self._writers.values():
            w.close()
        self._scratch.cleanup()

    def __enter__(self) -> SpilledRequests:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
