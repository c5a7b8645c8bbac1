"""Triton's counter-based random numbers (``tl.rand``, ``tl.rand4x``), in numpy, for references.

``tl.rand(seed, offsets)`` runs 10 rounds of Philox 4x32 on the counter (offset, 0, 0, 0) with the
seed as key and turns the first of the four 32-bit words it computes into a float in [0, 1);
``tl.rand4x`` returns all four. Being counter-based, a number depends only on (seed, counter): the
same seed gives the same dropout mask on every run, whatever the block size or the order of the
programs.
"""

from __future__ import annotations

import numpy as np

_KEY_A, _KEY_B = np.uint32(0x9E3779B9), np.uint32(0xBB67AE85)
_ROUND_A, _ROUND_B = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_LOW = np.uint64(0xFFFFFFFF)


def _mulhilo(a: np.uint64, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    product = a * b.astype(np.uint64)
    return (product >> np.uint64(32)).astype(np.uint32), (product & _LOW).astype(np.uint32)


def randint4x(seed: int, offsets: np.ndarray, rounds: int = 10) -> tuple[np.ndarray, ...]:
    """The four 32-bit words of Philox for each offset (what ``tl.randint4x(seed, offsets)`` returns)."""
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
    return c0, c1, c2, c3


def randint(seed: int, offsets: np.ndarray, rounds: int = 10) -> np.ndarray:
    """The first 32-bit word of Philox for each offset (what ``tl.randint(seed, offsets)`` returns)."""
    return randint4x(seed, offsets, rounds)[0]


def _uniform(words: np.ndarray) -> np.ndarray:
    x = words.view(np.int32)
    x = np.where(x < 0, ~x, x)
    return x.astype(np.float32) * np.float32(4.6566127342e-10)


def rand(seed: int, offsets: np.ndarray) -> np.ndarray:
    """Uniform float32 in [0, 1), bit for bit what ``tl.rand(seed, offsets)`` gives."""
    return _uniform(randint(seed, offsets))


def rand4x(seed: int, offsets: np.ndarray) -> tuple[np.ndarray, ...]:
    """The four uniform float32 numbers per offset that ``tl.rand4x(seed, offsets)`` gives."""
    return tuple(_uniform(w) for w in randint4x(seed, offsets))


def rand_per_element(seed: int, indices: np.ndarray) -> np.ndarray:
    """One uniform number per element index, four per Philox call: element 4k + j gets the j-th number
    of ``tl.rand4x(seed, k)``. The dropout exercise draws its mask this way."""
    indices = np.asarray(indices, dtype=np.int64)
    if indices.ndim == 1 and indices.size and indices[0] % 4 == 0 and bool(np.all(np.diff(indices) == 1)):
        # a run of elements from a multiple of 4 (every reference's case): each Philox call once, not
        # once per element (4x less work: the timed case has 128 Mi elements)
        first = int(indices[0]) // 4
        calls = rand4x(seed, np.arange(first, first + (indices.size + 3) // 4, dtype=np.int64))
        return np.stack(calls, axis=1).reshape(-1)[: indices.size]
    words = rand4x(seed, indices // 4)
    out = np.empty(indices.shape, dtype=np.float32)
    for j in range(4):
        pick = indices % 4 == j
        out[pick] = words[j][pick]
    return out


# --------------------------------------------------------------------------------------------------
# the same numbers in torch, on the tensors' device: a reference on a GPU grader draws its mask there
# (numpy took about 20 s for the timed case's 128 Mi elements inside the GPU's shared hold, 2026-12-03)

_MASK16, _MASK32 = 0xFFFF, 0xFFFFFFFF


def _mulhilo_torch(a: int, b):
    """High and low 32-bit words of ``a * b`` for a 32-bit constant ``a`` and int64 tensor ``b`` of
    32-bit values, with no product above 2**49 (torch has no unsigned 64-bit multiply)."""
    low = (a & _MASK16) * b  # < 2**48
    mid = (a >> 16) * b + (low >> 16)  # < 2**49
    return mid >> 16, ((mid & _MASK16) << 16) | (low & _MASK16)


def rand4x_torch(seed: int, first: int, count: int, device="cpu"):
    """``tl.rand4x(seed, k)`` for k = first ... first + count - 1, as four float32 tensors on
    ``device``, bit for bit what :func:`rand4x` gives."""
    import torch

    c0 = torch.arange(first, first + count, dtype=torch.int64, device=device) & _MASK32
    c1 = torch.zeros_like(c0)
    c2 = torch.zeros_like(c0)
    c3 = torch.zeros_like(c0)
    seed = int(seed) & 0xFFFFFFFFFFFFFFFF
    k0, k1 = seed & _MASK32, seed >> 32
    for _ in range(10):
        hi_b, lo_b = _mulhilo_torch(int(_ROUND_B), c2)
        hi_a, lo_a = _mulhilo_torch(int(_ROUND_A), c0)
        c0, c1, c2, c3 = hi_b ^ c1 ^ k0, lo_b, hi_a ^ c3 ^ k1, lo_a
        k0 = (k0 + int(_KEY_A)) & _MASK32
        k1 = (k1 + int(_KEY_B)) & _MASK32
    scale = torch.tensor(4.6566127342e-10, dtype=torch.float32, device=device)

    def uniform(words):
        # the word read as a signed 32-bit integer x, then ~x where x < 0: 31 bits, as float32
        x = torch.where(words >= 2**31, words - 2**32, words)
        x = torch.where(x < 0, -x - 1, x)
        return x.to(torch.float32) * scale

    return tuple(uniform(w) for w in (c0, c1, c2, c3))


def rand_per_element_torch(seed: int, n: int, device="cpu", chunk: int = 1 << 22):
    """:func:`rand_per_element` for elements 0 ... n - 1 as a float32 tensor on ``device``, drawn
    there, ``chunk`` Philox calls at a time (each call's int64 words take 32 bytes a call)."""
    import torch

    calls = (n + 3) // 4
    out = torch.empty(calls, 4, dtype=torch.float32, device=device)
    for first in range(0, calls, chunk):
        count = min(chunk, calls - first)
        out[first : first + count] = torch.stack(rand4x_torch(seed, first, count, device), dim=1)
    return out.reshape(-1)[:n]
