"""Keys that Spark's hash partitioning sends to chosen partitions.

repartition(n, key) puts a row in partition pmod(hash(key), n), hash being Murmur3_x86_32 with seed 42
(Spark's hash()). Small keys 0..n-1 collide (about a third of the partitions stay empty), so work meant
to run as n equal tasks is routed by partition_keys(n) instead.
"""
from __future__ import annotations


def spark_hash_long(value: int, seed: int = 42) -> int:
    """Spark's hash() of one bigint (Murmur3_x86_32.hashLong), as a signed 32-bit int."""
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    h = seed & mask
    for word in (value & mask, (value >> 32) & mask):
        k = rotl((word * 0xCC9E2D51) & mask, 15) * 0x1B873593 & mask
        h = (rotl(h ^ k, 13) * 5 + 0xE6546B64) & mask
    h ^= 8
    h = ((h ^ (h >> 16)) * 0x85EBCA6B) & mask
    h = ((h ^ (h >> 13)) * 0xC2B2AE35) & mask
    h ^= h >> 16
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_keys(n: int) -> list[int]:
    """For each partition p of repartition(n, key), the smallest non-negative bigint key sent there."""
    if n < 1:
        raise ValueError(f"partitions must be >= 1, got {n}")
    first: dict[int, int] = {}
    k = 0
    while len(first) < n:
        first.setdefault(spark_hash_long(k) % n, k)
        k += 1
    return [first[p] for p in range(n)]
