"""Memory traffic without a GPU: count the 32-byte sectors each load and store touches.

A GPU serves memory in 32-byte sectors, and a warp (32 threads) issues its loads together. When the
32 lanes of a warp read 32 consecutive float32 values from an aligned address, they touch 4 sectors
(128 bytes, all of it used). Read every second value and the same 32 lanes touch 8 sectors, half of
each wasted; start one element off a 32-byte boundary and they touch 5.

In CPU mode the interpreter knows every address a kernel touches, so ``record()`` counts, for each
load and store, the sectors touched per group of 32 consecutive lanes of the block (a warp's worth)
against the fewest that could hold the data. It also counts the distinct sectors of the whole
launch, which is what device memory must deliver when the caches catch the overlap between warps.

    with traffic.record() as rec:
        kernel[grid](...)
    print(rec.table())

This is a model: on a GPU, lanes map to elements through the layout Triton picks (often several
contiguous elements per thread), and caches change what reaches memory. The timing chapter's
validation (results/traffic_validation_*.json) compares its predictions with H200 measurements.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from . import hooks, runtime

WARP = 32
SECTOR = 32  # bytes


def warp_sectors(addresses: np.ndarray, active: np.ndarray, itemsize: int, warp: int = WARP) -> tuple[int, int, int]:
    """(requests, sectors touched, fewest sectors possible) for one access of a block.

    ``addresses`` and ``active`` are the block's pointers and mask, flattened in row-major order;
    lanes are grouped ``warp`` at a time. An element that straddles a sector boundary counts both.
    """
    addr = np.asarray(addresses, dtype=np.uint64).reshape(-1)
    act = np.asarray(active, dtype=bool).reshape(-1)
    lane = np.arange(addr.size)[act]
    a = addr[act]
    if a.size == 0:
        return 0, 0, 0
    group = lane // warp
    first = a // np.uint64(SECTOR)
    last = (a + np.uint64(itemsize - 1)) // np.uint64(SECTOR)
    g = np.concatenate([group, group])
    s = np.concatenate([first, last])
    order = np.lexsort((s, g))
    g, s = g[order], s[order]
    new = np.ones(g.size, dtype=bool)
    new[1:] = (g[1:] != g[:-1]) | (s[1:] != s[:-1])
    sectors = int(new.sum())
    per_group = np.bincount(group)
    per_group = per_group[per_group > 0]
    ideal = int(np.sum(-(-(per_group * itemsize) // SECTOR)))
    return int(per_group.size), sectors, ideal


@dataclass
class OpTraffic:
    kind: str  # load, store, atomic
    where: str  # kernel and source line of the tl.load / tl.store
    itemsize: int
    calls: int = 0
    requests: int = 0  # groups of 32 lanes with at least one active lane
    sectors: int = 0
    ideal_sectors: int = 0
    useful_bytes: int = 0
    distinct: set = field(default_factory=set, repr=False)  # sectors of the whole launch
    first_request: tuple | None = field(default=None, repr=False)  # (addresses, active) of one warp

    @property
    def efficiency(self) -> float:
        """Useful bytes over bytes fetched: one element per 32-lane warp (BLOCK_SIZE 1) wastes 7/8
        of each 32-byte sector even though that warp touches the fewest sectors it can."""
        return self.useful_bytes / (self.sectors * SECTOR) if self.sectors else 1.0

    @property
    def sectors_per_request(self) -> float:
        return self.sectors / self.requests if self.requests else 0.0


def _source_line(kernel: str) -> str:
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == kernel:
            return f"{kernel}:{frame.f_lineno}"
        frame = frame.f_back
    return kernel


class Recorder:
    """Collects sector counts per load/store site while active (see ``record``)."""

    def __init__(self, keep_distinct: bool = True):
        self.ops: dict[tuple[str, str], OpTraffic] = {}
        self.keep_distinct = keep_distinct

    def __call__(self, kind, kernel, addresses, active, itemsize) -> None:
        where = _source_line(kernel)
        op = self.ops.get((kind, where))
        if op is None:
            op = self.ops[(kind, where)] = OpTraffic(kind, where, itemsize)
        requests, sectors, ideal = warp_sectors(addresses, active, itemsize)
        op.calls += 1
        op.requests += requests
        op.sectors += sectors
        op.ideal_sectors += ideal
        a = np.asarray(addresses, dtype=np.uint64).reshape(-1)
        act = np.asarray(active, dtype=bool).reshape(-1)
        op.useful_bytes += int(act.sum()) * itemsize
        if self.keep_distinct:
            live = a[act]
            op.distinct.update((live // np.uint64(SECTOR)).tolist())
            op.distinct.update(((live + np.uint64(itemsize - 1)) // np.uint64(SECTOR)).tolist())
        if op.first_request is None and act[:WARP].any():
            op.first_request = (a[:WARP].copy(), act[:WARP].copy())

    # summaries -------------------------------------------------------------------------------------

    @property
    def sectors(self) -> int:
        return sum(op.sectors for op in self.ops.values())

    @property
    def ideal_sectors(self) -> int:
        return sum(op.ideal_sectors for op in self.ops.values())

    @property
    def distinct_sectors(self) -> int:
        return sum(len(op.distinct) for op in self.ops.values())

    @property
    def useful_bytes(self) -> int:
        return sum(op.useful_bytes for op in self.ops.values())

    @property
    def efficiency(self) -> float:
        """Useful bytes over bytes fetched (sectors touched x 32 B), as ``OpTraffic.efficiency``."""
        return self.useful_bytes / (self.sectors * SECTOR) if self.sectors else 1.0

    def table(self) -> str:
        rows = [
            f"{'access':<8}{'where':<28}{'requests':>10}{'sectors':>10}{'per req':>9}{'ideal':>9}{'efficiency':>12}"
        ]
        for op in self.ops.values():
            rows.append(
                f"{op.kind:<8}{op.where:<28}{op.requests:>10}{op.sectors:>10}{op.sectors_per_request:>9.2f}"
                f"{op.ideal_sectors:>9}{op.efficiency:>12.0%}"
            )
        rows.append(
            f"total: {self.sectors} sectors touched per warp ({self.sectors * SECTOR:,} bytes) for "
            f"{self.useful_bytes:,} useful bytes; {self.distinct_sectors} distinct sectors in the launch"
        )
        rows.append("ideal: the fewest sectors that could hold each warp's data")
        rows.append(
            f"efficiency: useful bytes / bytes fetched (sectors x {SECTOR} B); a warp with one fp32 element "
            f"touches the ideal 1 sector and uses 4 of its {SECTOR} bytes: 12%"
        )
        return "\n".join(rows)

    def summary(self) -> dict:
        return {
            "sectors": self.sectors,
            "ideal_sectors": self.ideal_sectors,
            "distinct_sectors": self.distinct_sectors,
            "useful_bytes": self.useful_bytes,
            "efficiency": self.efficiency,
            "ops": [
                {
                    "kind": op.kind,
                    "where": op.where,
                    "requests": op.requests,
                    "sectors": op.sectors,
                    "ideal_sectors": op.ideal_sectors,
                    "distinct_sectors": len(op.distinct),
                }
                for op in self.ops.values()
            ],
        }

    def plot_first_warp(self, ax=None):
        """One warp's lanes against the sectors they touch, for each load and store."""
        import matplotlib.pyplot as plt

        ops = [op for op in self.ops.values() if op.first_request is not None]
        if ax is None:
            _, ax = plt.subplots(figsize=(6.4, 1.2 + 0.9 * max(1, len(ops))))
        for row, op in enumerate(ops):
            addr, act = op.first_request
            base = int(addr[act].min()) // SECTOR
            sectors = (addr[act].astype(np.int64) // SECTOR) - base
            lanes = np.arange(addr.size)[act]
            y = row * 12
            ax.scatter(lanes, y + sectors, s=12, label=f"{op.kind} {op.where}: {len(set(sectors.tolist()))} sectors")
        ax.set_xlabel("lane of the first warp")
        ax.set_ylabel("32-byte sector (relative)")
        ax.legend(fontsize=8, loc="upper left")
        return ax


@contextmanager
def record(keep_distinct: bool = True):
    """Count sectors for every load and store of the kernels launched inside the block (CPU mode)."""
    if not runtime.is_cpu():
        raise RuntimeError(
            "traffic.record() works in CPU mode, where the interpreter sees every address. On a GPU, "
            "measure instead (course_lib.timing.bench) or profile with Nsight Compute."
        )
    rec = Recorder(keep_distinct)
    hooks.access_listeners.append(rec)
    try:
        yield rec
    finally:
        hooks.access_listeners.remove(rec)
