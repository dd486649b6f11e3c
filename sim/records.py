"""The slim request record the simulator consumes: five columns (plus optional think times), no Python
object per request. Builders from other shapes live in sim.workloads and sim.scenarios."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["FLAG_BACKGROUND", "FLAG_READ", "Requests"]

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

    def take(self, order: np.ndarray) -> Requests:
        """Rows in the given order (e.g. a stable argsort by arrival)."""
        return Requests(self.arrival_us[order], self.device[order], self.lbn[order], self.sectors[order],
                        self.flags[order], None if self.think_us is None else self.think_us[order])
