"""A ring of shared-memory buffers between loads and tensor cores, as a timeline (chapter 09).

This is a teaching model, not a GPU simulator. It follows tiles through a ring of ``buffers`` slots
and says exactly, in its own arithmetic, when each load is issued and lands, when each tile is
computed and who waited for whom; the same parameters always give the same timeline. It knows
nothing of warps, registers, caches or clocks; what it shows is how latency, throughput and the
number of buffers decide whether the tensor cores wait.

The work: ``output_tiles`` output tiles in a row (one for a plain kernel, several for a persistent
one), each needing ``n_tiles`` input tiles (its K steps, one A and one B block each). Times are in
microseconds by convention; any unit works if every time uses it.

What the model assumes, in plain words:

- A load takes ``load_latency`` from its issue until its buffer is full (the "ready" barrier
  flips), however many loads are in flight.
- The SM's share of memory bandwidth delivers at most one tile per ``transfer_time``: a load lands no
  sooner than ``transfer_time`` after the one before it. Loads land in the order they were issued.
- A producer is busy for ``issue_time`` per load it issues (TMA: next to nothing), and otherwise only
  waits: for the "empty" barrier of the slot it wants to fill. It can have as many loads in flight as
  there are free slots. With several producers they take the tiles in turn (tile ``g`` goes to
  producer ``g % producers``); more producers add issue rate, never bandwidth.
- Tile ``g`` lives in slot ``g % buffers``; its slot is free again the moment its compute ends.
- The tensor cores are one resource of the SM: one K step takes ``compute_time`` of them whoever
  issues it, and steps run one after another in tile order.
- "cooperative": all consumers compute every K step together, each half (or 1/consumers) of the
  tile; splitting the tile spreads the accumulator's registers, it does not make the tensor cores
  faster. After an output tile's last K step they all run its epilogue, and the tensor cores wait.
- "pingpong": consumers take whole output tiles in turn (tile ``t`` goes to consumer
  ``t % consumers``). While one runs its epilogue (``epilogue_time``: the accumulator's math and
  stores, no tensor cores), the next one's main loop runs, so the epilogue is hidden once a main loop
  lasts longer than an epilogue.
- "stages": no producer. One warp group issues its loads ``buffers - 1`` tiles ahead (Triton's
  ``num_stages = buffers``), then waits for the oldest, computes it, and issues the next: issuing
  costs its own time, and a slow load stalls the only warp group there is. Over several output tiles
  the loop runs on across them (loads for the next tile are issued before this tile's epilogue), as
  Triton's flattened persistent loops do.

The numbers out (``Timeline``): every interval per role (load in flight, issue, compute, epilogue,
waiting on ready, waiting on empty, waiting its turn for the tensor cores), the total time, the
tensor cores' utilization, and what the rest of their time went to: waiting for data, epilogues, or
(in "stages") the warp group's own issuing. The three or four fractions add up to one.

Pure Python, standard library only: a few hundred tiles take a few milliseconds.

``predict_matmul_stages`` puts the course's matmul (128x256 bf16 tiles, BLOCK_K = 64, 8192^3 on an
H200) through the "stages" model for num_stages = 1, 2, 3, 4; ``matmul_costs`` holds the numbers it
assumes and where they come from.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

MODES = ("cooperative", "pingpong", "stages")
KINDS = ("load", "issue", "compute", "epilogue", "wait_ready", "wait_empty", "wait_turn")
KIND_LABELS = {
    "load": "load in flight",
    "issue": "issuing a load",
    "compute": "compute (tensor cores)",
    "epilogue": "epilogue",
    "wait_ready": "waiting on ready (no data yet)",
    "wait_empty": "waiting on empty (no free buffer)",
    "wait_turn": "waiting its turn (tensor cores busy)",
}
WAITS = ("wait_ready", "wait_empty", "wait_turn")


@dataclass(frozen=True)
class Interval:
    role: str  # "producer 0", "consumer 1", "warp group"
    kind: str  # one of KINDS
    start: float
    end: float
    tile: int  # the input tile (K step, counted over all output tiles); -1 for none
    slot: int = -1  # the ring buffer the load fills (loads and issues)

    @property
    def length(self) -> float:
        return self.end - self.start


@dataclass
class Timeline:
    """What one run of the model found; ``summary()`` says it in words."""

    params: dict
    roles: list[str]
    intervals: list[Interval]
    total: float
    busy: float  # tensor-core time
    idle_data: float  # tensor cores idle, the next tile not there yet
    idle_epilogue: float  # tensor cores idle while consumers run an epilogue
    idle_issue: float  # tensor cores idle while the one warp group issues loads ("stages")
    producer_wait_empty: float  # summed over producers
    notes: list[str] = field(default_factory=list)

    @property
    def utilization(self) -> float:
        """Fraction of the total time the tensor cores compute."""
        return min(1.0, self.busy / self.total) if self.total > 0 else 0.0  # min: float sums differ by an ulp

    @property
    def consumer_stall(self) -> float:
        """Fraction of the total time the tensor cores wait for data (the ready barrier)."""
        return self.idle_data / self.total if self.total > 0 else 0.0

    @property
    def epilogue_fraction(self) -> float:
        """Fraction of the total time the tensor cores wait for an epilogue to finish."""
        return self.idle_epilogue / self.total if self.total > 0 else 0.0

    @property
    def issue_fraction(self) -> float:
        return self.idle_issue / self.total if self.total > 0 else 0.0

    @property
    def producer_stall(self) -> float:
        """Fraction of the total time a producer waits for a free buffer (averaged over producers)."""
        n = self.params["producers"] if self.params["mode"] != "stages" else 0
        return self.producer_wait_empty / (n * self.total) if n and self.total > 0 else 0.0

    def of(self, role: str, kind: str | None = None) -> list[Interval]:
        return [i for i in self.intervals if i.role == role and (kind is None or i.kind == kind)]

    def time_in(self, role: str, kind: str) -> float:
        return sum(i.length for i in self.of(role, kind))

    def summary(self) -> str:
        p = self.params
        n = p["n_tiles"] * p["output_tiles"]
        who = (
            f"one warp group, num_stages = {p['buffers']} ({p['buffers'] - 1} loads ahead)"
            if p["mode"] == "stages"
            else f"{p['producers']} producer(s), {p['consumers']} consumer(s) ({p['mode']}), {p['buffers']} buffers"
        )
        lines = [
            f"{n} tiles ({p['output_tiles']} output tile(s) x {p['n_tiles']} K steps), {who}",
            f"load latency {p['load_latency']:g}, load spacing {p['transfer_time']:g}, issue {p['issue_time']:g}, "
            f"compute {p['compute_time']:g} per tile, epilogue {p['epilogue_time']:g} per output tile",
            f"total time {self.total:.4g} (the tensor cores alone would need {self.busy:.4g})",
            f"tensor cores busy {self.utilization:.1%}; waiting for data {self.consumer_stall:.1%}; "
            f"waiting for epilogues {self.epilogue_fraction:.1%}"
            + (f"; waiting while their warp group issues loads {self.issue_fraction:.1%}" if self.idle_issue else ""),
        ]
        if p["mode"] != "stages":
            lines.append(f"producer waiting for a free buffer {self.producer_stall:.1%} of the time")
        lines += self.notes
        return "\n".join(lines)


def _check(params: dict) -> None:
    if params["mode"] not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {params['mode']!r}")
    for name in ("n_tiles", "output_tiles", "buffers", "producers", "consumers"):
        if not isinstance(params[name], int) or params[name] < 1:
            raise ValueError(f"{name} must be a whole number >= 1, got {params[name]!r}")
    for name in ("load_latency", "transfer_time", "issue_time", "compute_time", "epilogue_time"):
        if params[name] < 0:
            raise ValueError(f"{name} must be >= 0, got {params[name]!r}")


class _Ring:
    """Loads through the shared memory pipe: latency after the issue, at most one per transfer_time."""

    def __init__(self, n: int, latency: float, transfer: float):
        self.ready = [0.0] * n
        self.latency, self.transfer = latency, transfer
        self.last = None

    def land(self, g: int, issued: float) -> float:
        t = issued + self.latency
        if self.last is not None:
            t = max(t, self.last + self.transfer)
        self.ready[g] = self.last = t
        return t


def _split_gap(start: float, end: float, busy: list[tuple[float, float]], ends: list[float]):
    """[start, end) cut into (piece, tensor cores busy?) pieces; busy is sorted and disjoint."""
    pieces, t = [], start
    for i in range(bisect.bisect_right(ends, start), len(busy)):
        a, b = busy[i]
        if a >= end:
            break
        if a > t:
            pieces.append((t, a, False))
        pieces.append((max(a, t), min(b, end), True))
        t = min(b, end)
    if t < end:
        pieces.append((t, end, False))
    return pieces


def _producer_consumer(p: dict) -> Timeline:
    K, T, B, P, C = p["n_tiles"], p["output_tiles"], p["buffers"], p["producers"], p["consumers"]
    n = K * T
    ring = _Ring(n, p["load_latency"], p["transfer_time"])
    release = [0.0] * n
    producers = [f"producer {i}" for i in range(P)]
    consumers = [f"consumer {i}" for i in range(C)]
    out: list[Interval] = []
    producer_free = [0.0] * P
    consumer_free = [0.0] * C
    busy: list[tuple[float, float]] = []
    busy_ends: list[float] = []
    tc_free = 0.0
    idle_data = idle_epi = wait_empty = 0.0
    end_all = 0.0
    for g in range(n):
        # the producer that owns tile g fills slot g % B once tile g - B has left it
        who, slot = g % P, g % B
        empty = release[g - B] if g >= B else 0.0
        issue_at = max(producer_free[who], empty)
        if issue_at > producer_free[who]:
            out.append(Interval(producers[who], "wait_empty", producer_free[who], issue_at, g, slot))
            wait_empty += issue_at - producer_free[who]
        issued = issue_at + p["issue_time"]
        if p["issue_time"] > 0:
            out.append(Interval(producers[who], "issue", issue_at, issued, g, slot))
        producer_free[who] = issued
        ready = ring.land(g, issued)
        out.append(Interval(producers[who], "load", issued, ready, g, slot))

        # the consumer(s) of tile g compute it once it is there and the tensor cores are free
        t, k = divmod(g, K)
        team = list(range(C)) if p["mode"] == "cooperative" else [t % C]
        free = max(consumer_free[c] for c in team)
        start = max(ready, tc_free, free)
        if start > tc_free:  # why the tensor cores sat idle before this step
            epi = max(0.0, min(free, start) - tc_free)
            idle_epi += epi
            idle_data += start - tc_free - epi
        for c in team:
            for a, b, tc_busy in _split_gap(consumer_free[c], start, busy, busy_ends):
                out.append(Interval(consumers[c], "wait_turn" if tc_busy else "wait_ready", a, b, g))
        end = start + p["compute_time"]
        for c in team:
            out.append(Interval(consumers[c], "compute", start, end, g))
        if end > start:
            busy.append((start, end))
            busy_ends.append(end)
        tc_free = release[g] = end
        if k == K - 1:  # this output tile's last K step: its epilogue follows
            for c in team:
                out.append(Interval(consumers[c], "epilogue", end, end + p["epilogue_time"], g))
            end += p["epilogue_time"]
        for c in team:
            consumer_free[c] = end
        end_all = max(end_all, end)
    idle_epi += end_all - tc_free  # the last epilogue, with nothing left to compute
    out = [i for i in out if i.end > i.start]
    return Timeline(p, producers + consumers, out, end_all, n * p["compute_time"], idle_data, idle_epi, 0.0, wait_empty)


def _stages(p: dict) -> Timeline:
    K, T, S = p["n_tiles"], p["output_tiles"], p["buffers"]
    n = K * T
    ring = _Ring(n, p["load_latency"], p["transfer_time"])
    role = "warp group"
    out: list[Interval] = []
    now = 0.0
    idle_data = idle_epi = idle_issue = 0.0

    def issue(j: int) -> None:
        nonlocal now, idle_issue
        if p["issue_time"] > 0:
            out.append(Interval(role, "issue", now, now + p["issue_time"], j, j % S))
        now += p["issue_time"]
        idle_issue += p["issue_time"]
        out.append(Interval(role, "load", now, ring.land(j, now), j, j % S))

    for j in range(min(S - 1, n)):  # the prologue: loads for the first S - 1 tiles
        issue(j)
    for g in range(n):
        if g + S - 1 < n:  # its slot held tile g - 1, computed by now
            issue(g + S - 1)
        if ring.ready[g] > now:
            out.append(Interval(role, "wait_ready", now, ring.ready[g], g))
            idle_data += ring.ready[g] - now
            now = ring.ready[g]
        out.append(Interval(role, "compute", now, now + p["compute_time"], g))
        now += p["compute_time"]
        if g % K == K - 1:
            out.append(Interval(role, "epilogue", now, now + p["epilogue_time"], g))
            now += p["epilogue_time"]
            idle_epi += p["epilogue_time"]
    out = [i for i in out if i.end > i.start]
    return Timeline(p, [role], out, now, n * p["compute_time"], idle_data, idle_epi, idle_issue, 0.0)


def simulate(
    n_tiles: int = 16,
    buffers: int = 3,
    load_latency: float = 1.0,
    compute_time: float = 0.7,
    mode: str = "cooperative",
    producers: int = 1,
    consumers: int = 2,
    epilogue_time: float = 0.0,
    output_tiles: int = 1,
    transfer_time: float = 0.0,
    issue_time: float = 0.0,
) -> Timeline:
    """Run the model once (the module docstring says what it assumes); returns the ``Timeline``.

    ``n_tiles``: K steps per output tile; ``output_tiles``: output tiles in a row (persistent kernel);
    ``buffers``: slots in the ring (in "stages" mode: num_stages); ``load_latency``: issue to full;
    ``transfer_time``: the least spacing of two loads' arrivals (tile bytes / the SM's bandwidth share);
    ``issue_time``: a producer's own time per load; ``compute_time``: tensor-core time per K step;
    ``epilogue_time``: per output tile; ``mode``: "cooperative", "pingpong" or "stages".
    """
    params = dict(
        n_tiles=n_tiles,
        output_tiles=output_tiles,
        buffers=buffers,
        producers=producers,
        consumers=consumers,
        mode=mode,
        load_latency=float(load_latency),
        transfer_time=float(transfer_time),
        issue_time=float(issue_time),
        compute_time=float(compute_time),
        epilogue_time=float(epilogue_time),
    )
    _check(params)
    timeline = _stages(params) if mode == "stages" else _producer_consumer(params)
    timeline.notes += _diagnosis(params)
    return timeline


def buffers_to_hide_latency(load_latency: float, compute_time: float, issue_time: float = 0.0) -> int:
    """The fewest buffers with which, after the first tile, the tensor cores never wait on a load.

    A slot freed when tile g's compute ends is full again ``issue + latency`` later, and must be by
    the time the tiles already in the other ``buffers - 1`` slots are computed.
    """
    if compute_time <= 0:
        return 1
    need = 1
    while (need - 1) * compute_time < issue_time + load_latency - 1e-12:
        need += 1
    return need


def _diagnosis(p: dict) -> list[str]:
    """One or two sentences on what limits the run in steady state."""
    notes = []
    c = p["compute_time"]
    issue_rate = p["issue_time"] / (1 if p["mode"] == "stages" else p["producers"])
    if p["transfer_time"] > c:
        notes.append(
            f"bandwidth bound: tiles can arrive only every {p['transfer_time']:g}, longer than the "
            f"{c:g} a tile takes to compute; no number of buffers helps."
        )
    elif p["mode"] != "stages" and issue_rate > c:
        notes.append(f"issue bound: the producers can start a load only every {issue_rate:g}; add producers.")
    elif c > 0:
        if p["mode"] == "stages":  # the warp group issues too: S - 1 computes and issues cover a load
            need = buffers_to_hide_latency(p["load_latency"], c + p["issue_time"])
        else:
            need = buffers_to_hide_latency(p["load_latency"], c, p["issue_time"])
        verdict = "enough" if p["buffers"] >= need else "too few"
        notes.append(
            f"hiding a latency of {p['load_latency']:g} behind computes of {c:g} takes {need} buffers: "
            f"{p['buffers']} is {verdict}."
        )
    return notes


# --------------------------------------------------------------------------------------------------
# the course's matmul on an H200


def matmul_costs(
    block_m: int = 128,
    block_n: int = 256,
    block_k: int = 64,
    size: int = 8192,
    element_bytes: int = 2,  # bf16
    tflops: float = 800.0,  # the H200's bf16 tensor-core rate reached by cuBLAS at 8192^3 (~790-800)
    n_sms: int = 132,
    bandwidth_tbs: float = 4.3,  # a large copy's rate from DRAM on the H200 (results/: 4.2 TB/s)
    load_latency_us: float = 1.0,  # a global (TMA) load's round trip under load, about 1 us
) -> dict:
    """Per-K-step costs, in microseconds, for one SM running the course's tiled matmul.

    Every SM gets 1/n_sms of the tensor-core rate and of the bandwidth. With the defaults:
    compute per K step 2*128*256*64 FLOP / (800 TFLOP/s / 132) = 0.69 us; a step's loads
    (128 + 256) * 64 * 2 B = 48 KiB at 4.3 TB/s / 132 arrive at most every 1.51 us; the epilogue
    stores 128*256*2 B = 64 KiB at the same share, 2.0 us. At that share the loads cannot keep up
    (48 KiB per 0.69 us is 9.4 TB/s over 132 SMs): the kernel only runs at ~780 TFLOP/s because L2
    serves most tile loads (each A and B block is read by many programs). Pass ``bandwidth_tbs`` for
    L2's rate to model that.
    """
    flops = 2 * block_m * block_n * block_k
    load_bytes = (block_m + block_n) * block_k * element_bytes
    store_bytes = block_m * block_n * element_bytes
    share = bandwidth_tbs * 1e12 / n_sms  # bytes per second per SM
    return {
        "n_tiles": size // block_k,
        "output_tiles_total": (size // block_m) * (size // block_n),
        "flops_per_step": flops,
        "load_bytes_per_step": load_bytes,
        "compute_us": flops / (tflops * 1e12 / n_sms) * 1e6,
        "transfer_us": load_bytes / share * 1e6,
        "epilogue_us": store_bytes / share * 1e6,
        "load_latency_us": load_latency_us,
        "n_sms": n_sms,
        "bandwidth_tbs": bandwidth_tbs,
        "tflops": tflops,
    }


@dataclass(frozen=True)
class StagePrediction:
    stages: int
    total_us: float  # one program: one output tile's K loop and its epilogue
    utilization: float
    stall: float  # tensor cores waiting for data
    tflops: float  # every SM doing the same, back to back


def predict_matmul_stages(stages=(1, 2, 3, 4), **costs) -> list[StagePrediction]:
    """The "stages" model for the course's matmul at each num_stages (``matmul_costs``'s numbers;
    keyword arguments override them, e.g. ``bandwidth_tbs=12``)."""
    c = matmul_costs(**costs)
    rows = []
    for s in stages:
        tl = simulate(
            n_tiles=c["n_tiles"],
            buffers=s,
            load_latency=c["load_latency_us"],
            compute_time=c["compute_us"],
            transfer_time=c["transfer_us"],
            epilogue_time=c["epilogue_us"],
            mode="stages",
        )
        rate = c["n_sms"] * c["n_tiles"] * c["flops_per_step"] / (tl.total * 1e-6) / 1e12
        rows.append(StagePrediction(s, tl.total, tl.utilization, tl.consumer_stall, rate))
    return rows


def prediction_table(rows: list[StagePrediction]) -> str:
    lines = [f"{'num_stages':>10} {'time/program':>13} {'tensor busy':>12} {'data stall':>11} {'TFLOP/s':>8}"]
    for r in rows:
        lines.append(f"{r.stages:>10} {r.total_us:>10.1f} us {r.utilization:>12.1%} {r.stall:>11.1%} {r.tflops:>8.0f}")
    return "\n".join(lines)
