"""The slim request record the simulator consumes: five columns (plus optional think times), no Python
object per request. Builders from other shapes live in sim.workloads and sim.scenarios."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

__all__ = ["FLAG_BACKGROUND", "FLAG_READ", "Chunks", "FactsCounter", "Requests", "StreamFacts"]

FLAG_READ = 1        # bit 0: read (else write)
FLAG_BACKGROUND = 2  # bit 1: background traffic (always open loop; reported apart)


@dataclass(frozen=True, eq=False)
class Requests:
    """Columns of equal length N, sorted by arrival_us.

    arrival_us float64 (us), device int32 (traced device index, 0-based), lbn int64 (start, in the disk
    spec's sectors, relative to the device), sectors int32 (> 0), flags int8 (FLAG_READ | FLAG_BACKGROUND).
    think_us float64 [N] or None: closed-loop think time after each request completes.
    """

    arrival_us: np.ndarray
    device: np.ndarray
    lbn: np.ndarray
    sectors: np.ndarray
    flags: np.ndarray
    think_us: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.arrival_us)
        for name, dtype in (("arrival_us", np.float64), ("device", np.int32), ("lbn", np.int64),
                            ("sectors", np.int32), ("flags", np.int8)):
            arr = getattr(self, name)
            if not isinstance(arr, np.ndarray) or arr.dtype != dtype or arr.ndim != 1:
                raise TypeError(f"Requests.{name} must be a 1-d {np.dtype(dtype).name} array, got "
                                f"{getattr(arr, 'dtype', type(arr))}")
            if len(arr) != n:
                raise ValueError(f"Requests.{name} has {len(arr)} values, arrival_us has {n}")
        if self.think_us is not None and (self.think_us.dtype != np.float64 or len(self.think_us) != n):
            raise ValueError(f"Requests.think_us must be float64 with {n} values")
        if n == 0:
            return
        if not np.all(np.isfinite(self.arrival_us)) or self.arrival_us[0] < 0:
            raise ValueError("Requests.arrival_us must be finite and >= 0")
        back = np.flatnonzero(np.diff(self.arrival_us) < 0)
        if back.size:
            i = int(back[0]) + 1
            raise ValueError(f"Requests must be sorted by arrival_us: request {i} arrives at "
                             f"{self.arrival_us[i]} us, before request {i - 1} at {self.arrival_us[i - 1]} us")
        for name in ("device", "lbn"):
            arr = getattr(self, name)
            if arr.min() < 0:
                i = int(np.argmin(arr))
                raise ValueError(f"Requests.{name} must be >= 0, request {i} has {arr[i]}")
        if self.sectors.min() <= 0:
            i = int(np.argmin(self.sectors))
            raise ValueError(f"Requests.sectors must be > 0, request {i} has {self.sectors[i]}")
        if self.think_us is not None and (not np.all(np.isfinite(self.think_us)) or self.think_us.min() < 0):
            raise ValueError("Requests.think_us must be finite and >= 0")

    def __len__(self) -> int:
        return len(self.arrival_us)

    @property
    def is_read(self) -> np.ndarray:
        out: np.ndarray = (self.flags & FLAG_READ) != 0
        return out

    @property
    def is_background(self) -> np.ndarray:
        out: np.ndarray = (self.flags & FLAG_BACKGROUND) != 0
        return out

    @classmethod
    def build(cls, arrival_us: np.ndarray, device: np.ndarray, lbn: np.ndarray, sectors: np.ndarray,
              is_read: np.ndarray, *, background: np.ndarray | None = None,
              think_us: np.ndarray | None = None) -> Requests:
        """Coerce dtypes and pack the flags (inputs need not be sorted only if they already are)."""
        flags = np.where(np.asarray(is_read, dtype=bool), FLAG_READ, 0).astype(np.int8)
        if background is not None:
            flags |= np.where(np.asarray(background, dtype=bool), FLAG_BACKGROUND, 0).astype(np.int8)
        return cls(np.ascontiguousarray(arrival_us, dtype=np.float64),
                   np.ascontiguousarray(device, dtype=np.int32),
                   np.ascontiguousarray(lbn, dtype=np.int64),
                   np.ascontiguousarray(sectors, dtype=np.int32), flags,
                   None if think_us is None else np.ascontiguousarray(think_us, dtype=np.float64))

    @classmethod
    def empty(cls) -> Requests:
        return cls(np.zeros(0), np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.int32),
                   np.zeros(0, np.int8))

    @classmethod
    def concat(cls, parts: Iterable[Requests]) -> Requests:
        """The parts one after another (each in arrival order, each starting where the one before ended)."""
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls.empty()
        if len(parts) == 1:
            return parts[0]
        think = None if any(p.think_us is None for p in parts) else np.concatenate([p.think_us for p in parts])
        return cls(*(np.concatenate([getattr(p, c) for p in parts])
                     for c in ("arrival_us", "device", "lbn", "sectors", "flags")), think)

    def rows(self, start: int, stop: int) -> Requests:
        """Requests start..stop - 1 (views)."""
        return Requests(self.arrival_us[start:stop], self.device[start:stop], self.lbn[start:stop],
                        self.sectors[start:stop], self.flags[start:stop],
                        None if self.think_us is None else self.think_us[start:stop])

    def take(self, order: np.ndarray) -> Requests:
        """Rows in the given order (e.g. a stable argsort by arrival)."""
        return Requests(self.arrival_us[order], self.device[order], self.lbn[order], self.sectors[order],
                        self.flags[order], None if self.think_us is None else self.think_us[order])


#: A workload too long to hold: each call starts a pass over it, yielding Requests chunks that continue each
#: other in arrival order (sim.engine.Simulation's `more`, sim.scenarios.simulate_chunks).
Chunks = Callable[[], Iterator[Requests]]


@dataclass(frozen=True, eq=False)
class StreamFacts:
    """What a run over chunks needs of the whole workload before its first request: the number of requests and of
    foreground ones, the largest request (sectors), each device's highest sector addressed + 1 (index: device code),
    the first and the last arrival (us)."""

    count: int
    foreground: int
    max_sectors: int
    device_ends: np.ndarray
    first_us: float
    last_us: float

    @classmethod
    def of(cls, chunks: Iterable[Requests]) -> StreamFacts:
        """One pass over the chunks; an error names the chunk that arrives before the one before it ended."""
        counter = FactsCounter()
        for c in chunks:
            counter.add(c)
        return counter.facts()

    def joined(self, other: StreamFacts) -> StreamFacts:
        """The facts of this workload merged in arrival order with `other` (sim.workloads.mix), from both facts."""
        if not other.count:
            return self
        if not self.count:
            return other
        ends = np.zeros(max(len(self.device_ends), len(other.device_ends)), dtype=np.int64)
        ends[:len(self.device_ends)] = self.device_ends
        ends[:len(other.device_ends)] = np.maximum(ends[:len(other.device_ends)], other.device_ends)
        return StreamFacts(self.count + other.count, self.foreground + other.foreground,
                           max(self.max_sectors, other.max_sectors), ends, min(self.first_us, other.first_us),
                           max(self.last_us, other.last_us))

    def scaled(self, speedup: float) -> StreamFacts:
        """The facts with arrivals divided by speedup (the scaled chunks' facts)."""
        return StreamFacts(self.count, self.foreground, self.max_sectors, self.device_ends, self.first_us / speedup,
                           self.last_us / speedup)


class FactsCounter:
    """StreamFacts counted chunk by chunk as they come (add); facts() gives them so far."""

    def __init__(self) -> None:
        self.count = self.foreground = self.max_sectors = self.chunks = 0
        self.ends = np.zeros(0, dtype=np.int64)
        self.first_us, self.last_us = 0.0, -np.inf

    def add(self, c: Requests) -> None:
        """The next chunk; an error names it when it arrives before the chunk before it ended."""
        j = self.chunks
        self.chunks += 1
        if not len(c):
            return
        if c.arrival_us[0] < self.last_us:
            raise ValueError(f"requests chunk {j} starts at {c.arrival_us[0]} us, before the previous chunk's last "
                             f"arrival at {self.last_us} us")
        if self.count == 0:
            self.first_us = float(c.arrival_us[0])
        self.last_us = float(c.arrival_us[-1])
        self.count += len(c)
        self.foreground += int(np.count_nonzero(~c.is_background))
        self.max_sectors = max(self.max_sectors, int(c.sectors.max()))
        reach = np.zeros(int(c.device.max()) + 1, dtype=np.int64)
        np.maximum.at(reach, c.device, c.lbn + c.sectors)
        if len(reach) > len(self.ends):
            self.ends = np.concatenate([self.ends, np.zeros(len(reach) - len(self.ends), dtype=np.int64)])
        self.ends[:len(reach)] = np.maximum(self.ends[:len(reach)], reach)

    def facts(self) -> StreamFacts:
        return StreamFacts(self.count, self.foreground, self.max_sectors, self.ends.copy(), self.first_us,
                           self.last_us if self.count else 0.0)
