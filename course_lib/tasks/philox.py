"""Triton's counter-based random numbers (``tl.rand(seed, offsets)``), in numpy, for references.

``tl.rand`` runs 10 rounds of Philox 4x32 on the counter (offset, 0, 0, 0) with the seed as key and
turns the first 32-bit word into a float in [0, 1). Being counter-based, the number for an element
depends only on (seed, offset): the same seed gives the same dropout mask on every run, whatever the
block size or the order of the programs.
"""

from __future__ import annotations

import numpy as np

_KEY_A, _KEY_B = np.uint32(0x9E3779B9), np.uint32(0xBB67AE85)
_ROUND_A, _ROUND_B = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_LOW = np.uint64(0xFFFFFFFF)


def _mulhilo(a: np.uint64, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    product = a * b.astype(np.uint64)
    return (product >> np.uint64(32)).astype(np.uint32), (product & _LOW).astype(np.uint32)


def randint(seed: int, offsets: np.ndarray, rounds: int = 10) -> np.ndarray:
    """The first 32-bit output of Philox for each offset (what ``tl.randint(seed, offsets)`` returns)."""
    c0 = np.asarray(offsets).astype(np.int64).astype(np.uint32)
    c1 = np.zeros_like(c0)
    c2 = np.zeros_like(c0)
    c3 = np.zeros_like(c0)
    seed = int(seed) & 0xFFFFFFFFFFFFFFFF
    k0, k1 = np.uint32(seed & 0xFFFFFFFF), np.uint32(seed >> 32)
    with np.errstate(over="ignore"):
        for _ in range(rounds):
            hi_b, lo_b = _mulhilo(_ROUND_B, c2)
            hi_a, lo_a = _mulhilo(_ROUND_A, c0)
            c0, c1, c2, c3 = hi_b ^ c1 ^ k0, lo_b, hi_a ^ c3 ^ k1, lo_a
            k0 = np.uint32(k0 + _KEY_A)
            k1 = np.uint32(k1 + _KEY_B)
    return c0


def rand(seed: int, offsets: np.ndarray) -> np.ndarray:
    """Uniform float32 in [0, 1), bit for bit what ``tl.rand(seed, offsets)`` gives."""
    x = randint(seed, offsets).view(np.int32)
    x = np.where(x < 0, ~x, x)
    return x.astype(np.float32) * np.float32(4.6566127342e-10)
