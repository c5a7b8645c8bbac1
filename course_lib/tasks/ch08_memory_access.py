"""Chapter 08, memory access: coalescing and the tiled transpose.

A case's shape is (M, N): x is (M, N), out is (N, M). The structural check counts, in the
interpreter, how many 32-byte sectors each warp's loads of x and stores to out touch.
"""

from __future__ import annotations

import torch

from .. import runtime
from . import DEFAULT_TOLERANCE, Case, SpeedTiers, TaskSpec, output_like, random_tensor, register

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16


# --------------------------------------------------------------------------------------------------
# inputs, reference, cases


def transpose_inputs(case: Case, gen: torch.Generator) -> dict:
    M, N = case.shape
    opts = case.options
    if opts.get("x_transposed", False):  # x = c.t() for a contiguous (N, M) c: strides (1, M)
        x = random_tensor(case, gen, shape=(N, M)).t()
    else:
        x = random_tensor(case, gen, shape=(M, N), row_pad=opts.get("x_row_pad", 0))
    return {"x": x, "out": output_like(case, gen, shape=(N, M), row_pad=opts.get("out_row_pad", 0))}


def transpose_reference(x: torch.Tensor) -> torch.Tensor:
    # read M*N elements; write M*N elements; no arithmetic. .contiguous() makes torch move the
    # bytes: x.t() alone is a view and costs nothing
    return x.t().contiguous()


def _transpose_cases(mode: str) -> list[Case]:
    wider_rows = (("x_row_pad", 5), ("out_row_pad", 3))
    rows = [
        ((1, 1), F32, "tiny", ()),
        ((2, 3), F16, "tiny", ()),
        ((33, 47), F32, "tail", ()),  # no multiple of any block size in either direction
        ((100, 37), F16, "tail", ()),
        ((70, 130), BF16, "tail", ()),  # no arithmetic: the interpreter's bf16 bits are only moved
        ((1, 200), F32, "one row", ()),
        ((200, 1), F16, "one column", ()),
        ((65, 70), F32, "transposed view", (("x_transposed", True),)),  # x = c.t(): strides (1, 65)
        ((40, 50), F32, "strided rows", wider_rows),  # rows further apart than their length
        ((37, 29), F16, "misaligned", ()),
    ]
    if mode == runtime.CPU:
        rows += [((384, 320), F32, "large", ()), ((320, 384), F16, "large", ())]
    else:
        rows += [
            ((4099, 3001), F32, "large", ()),
            ((3001, 4099), F16, "large", ()),
            ((2049, 1025), BF16, "large", ()),
            ((1000, 3000), F32, "transposed view", (("x_transposed", True),)),
        ]
    return [
        Case(shape, dtype, label, misaligned=label == "misaligned", params=params)
        for shape, dtype, label, params in rows
    ]


def _transpose_bytes(case: Case) -> int:
    M, N = case.shape
    return 2 * M * N * torch.empty((), dtype=case.dtype).element_size()  # read x once, write out once


def _transpose_diagnose(inputs: dict, got: torch.Tensor, case: Case) -> str | None:
    """Name the mistake a wrong output matches: a transposed view read as if it were contiguous."""
    from ..compare import close_enough

    x = inputs["x"]
    if not case.options.get("x_transposed"):
        return None
    M, N = x.shape
    # the memory of x = c.t(), in order, read as a contiguous (M, N) matrix, then transposed
    as_if_contiguous = x.t().reshape(M, N).t()  # (N, M)
    if close_enough(got, as_if_contiguous, DEFAULT_TOLERANCE[case.dtype]):
        return (
            f"the output is x.T with x read as if contiguous (row stride = row length {N}, column stride 1), "
            f"but x here is a transposed view (x.stride() = (1, {M})): pass each tensor's own strides, "
            "x.stride(0), x.stride(1), out.stride(0) and out.stride(1), and use all four"
        )
    return None


# --------------------------------------------------------------------------------------------------
# benchmarks: the copy a transpose aims for, and the naive kernel


class _IntoOwnOutput:
    """A baseline that writes into an output of its own, made on the first call (a warm-up), so the
    timed calls move only the bytes."""

    def __init__(self, fn, shape_of):
        self.fn, self.shape_of, self.out = fn, shape_of, None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.out is None:
            self.out = torch.empty(self.shape_of(x), dtype=x.dtype, device=x.device)
        return self.fn(x, self.out)


def _copy(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    # the same M*N elements read and written, in order: the bandwidth a transpose can hope for
    return out.view(-1).copy_(x.view(-1))


def _naive(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    from .. import demos

    return demos.naive_transpose(x, out)


def _bench_variants(case: Case) -> dict:
    return {
        "copy": _IntoOwnOutput(_copy, lambda x: (x.numel(),)),
        "naive": _IntoOwnOutput(_naive, lambda x: (x.shape[1], x.shape[0])),
    }


# --------------------------------------------------------------------------------------------------
# the coalescing check: sectors per warp, in the interpreter

# The shape the check launches on: 4 x 3 tiles of 64 x 64 (8 x 6 of 32 x 32), whole tiles, so
# ragged edges take no part in the count; fp32, 4 bytes an element: a warp's 32 lanes hold 128
# bytes, 4 sectors at best.
PROBE_SHAPE = (256, 192)  # (M, N)

# Measured on PROBE_SHAPE in CPU mode (tests/test_ch08_access.py reproduces them):
# * solutions/tiled_transpose.py: loads 1.00x and stores 1.00x the fewest sectors (4 per warp);
# * the naive kernel (course_lib.demos, tests/wrong/ch08_naive_transpose): loads 1.00x, stores
#   8.00x (32 sectors per warp: each lane's element sits in a different row of out, 1024 bytes apart).
# On an H200 a tile stored through swapped pointers ran as fast as one stored with tl.trans (4137 GB/s
# both, results/experiment_transpose_h200.json): hence the two lane orders of ``_lane_orders``.
# A tile that is loaded or stored one element off a sector boundary costs at most 5 sectors for
# 4 (1.25x); a warp that reads every second element, 2x. The limit lets those through and stops
# a warp whose lanes each need a sector of their own (8x for fp32, 16x for fp16).
MAX_SECTOR_RATIO = 2.0


def _lane_orders(addresses, active):
    """The orders in which the compiler may hand a block's elements to lanes: row-major, and for a
    2-D block also column-major (Triton's coalescing pass lays each access out along the axis its
    pointers are contiguous in, and converts between layouts through shared memory)."""
    import numpy as np

    addr, act = np.asarray(addresses), np.asarray(active)
    yield addr.reshape(-1), act.reshape(-1)
    if addr.ndim == 2 and min(addr.shape) > 1:
        yield addr.T.reshape(-1), act.T.reshape(-1)


class _SectorCount:
    """An access listener: sectors per warp for the loads from x and the stores to out, each access
    counted in the better of its lane orders (``_lane_orders``), summed over the launch."""

    def __init__(self, x: torch.Tensor, out: torch.Tensor):
        self.spans = {"x": self._span(x), "out": self._span(out)}
        self.counts = {("load", "x"): [0, 0, 0], ("store", "out"): [0, 0, 0]}  # requests, sectors, ideal
        self.other: list[str] = []

    @staticmethod
    def _span(t: torch.Tensor) -> tuple[int, int]:
        return t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()

    def __call__(self, kind, kernel, addresses, active, itemsize) -> None:
        import numpy as np

        from ..traffic import warp_sectors

        act = np.asarray(active, dtype=bool)
        live = np.asarray(addresses, dtype=np.uint64)[act]
        if live.size == 0:
            return
        name = "x" if kind == "load" else "out"
        lo, hi = self.spans[name]
        if not bool(((live >= lo) & (live < hi)).all()):
            self.other.append(f"{kind} in {kernel}")
            return
        best = min((warp_sectors(a, m, itemsize) for a, m in _lane_orders(addresses, act)), key=lambda c: c[1])
        for i, value in enumerate(best):
            self.counts[(kind, name)][i] += value


def probe_sectors(module, entry) -> dict:
    """In the worker: run the learner's launcher once on PROBE_SHAPE (fp32, contiguous) and count the
    sectors each warp's loads of x and stores to out touch. Plain data, judged by ``judge_sectors``.
    On a GPU no access can be seen: the facts say so."""
    if not runtime.is_cpu():
        return {"mode": runtime.GPU}
    from .. import hooks

    M, N = PROBE_SHAPE
    x = torch.randn(M, N, generator=torch.Generator().manual_seed(0))
    out = torch.empty(N, M)
    listener = _SectorCount(x, out)
    hooks.access_listeners.append(listener)
    try:
        entry(x=x, out=out)
    finally:
        hooks.access_listeners.remove(listener)
    return {
        "mode": runtime.CPU,
        "shape": [M, N],
        "right": bool(torch.equal(out, x.t())),  # the sectors are counted on this run: it must be right
        "loads": listener.counts[("load", "x")],
        "stores": listener.counts[("store", "out")],
        "other": listener.other[:3],
    }


def judge_sectors(facts: dict) -> list[tuple[bool, str, list[str]]]:
    """In the grader's process: do a warp's loads of x and its stores to out touch few sectors?"""
    if facts.get("mode") == runtime.GPU:
        return [
            (
                True,
                "coalescing checked in CPU mode",
                [
                    "Sectors per warp are counted in CPU mode, where the interpreter sees every address: "
                    "COURSE_MODE=cpu python -m course_lib check tiled_transpose"
                ],
            )
        ]
    M, N = (int(v) for v in facts.get("shape", PROBE_SHAPE))
    where = f"a {M} x {N} float32 x (out {N} x {M})"
    checks = []
    lines = []
    for key, what, across in (
        ("loads", "loads of x", f"a column of x, {N} elements ({4 * N} bytes) apart"),
        ("stores", "stores to out", f"a column of out, {M} elements ({4 * M} bytes) apart"),
    ):
        requests, sectors, ideal = (int(v) for v in facts.get(key, [0, 0, 0]))
        if requests == 0:
            checks.append((False, f"no {what} were seen when the launcher ran on {where}", []))
            continue
        ratio = sectors / ideal if ideal else 1.0
        line = (
            f"{what}: {sectors:,} sectors for {requests:,} warps, {sectors / requests:.1f} per warp, "
            f"against the fewest that hold the data, {ideal:,} ({ideal / requests:.1f} per warp): {ratio:.2f}x"
        )
        lines.append(line)
        if ratio > MAX_SECTOR_RATIO:
            checks.append(
                (
                    False,
                    f"the {what} are not coalesced: {sectors / requests:.0f} sectors per warp of 32 lanes, "
                    f"{ratio:.1f}x the {ideal / requests:.0f} their data fits in",
                    [
                        f"Counted in the interpreter on {where}: {line}.",
                        f"A warp's 32 {key} land in 32 different rows: consecutive lanes walk down {across}, so",
                        "each lane needs a 32-byte sector of its own and uses 4 bytes of it.",
                        "Load a BLOCK x BLOCK tile of x along its rows, turn it over with tl.trans, and store it "
                        "along out's rows:",
                        f"then both sides touch about the fewest sectors (the limit here is {MAX_SECTOR_RATIO:g}x).",
                    ],
                )
            )
    if any(not ok for ok, _, _ in checks):
        return [c for c in checks if not c[0]]
    return [(True, "loads and stores are coalesced", [f"coalescing, counted on {where}: " + "; ".join(lines)])]


# --------------------------------------------------------------------------------------------------

register(
    TaskSpec(
        name="tiled_transpose",
        speed=SpeedTiers(case=Case((8192, 8192), F32, "timed")),
        chapter="08",
        title="out = x.T by tiles: loads and stores both coalesced (cases: (M, N) of x)",
        entry="tiled_transpose",
        make_inputs=transpose_inputs,
        reference=transpose_reference,
        cases=_transpose_cases,
        diagnose=_transpose_diagnose,
        bytes_moved=_transpose_bytes,
        bench_cases=[Case((16384, 16384), F32, "bench"), Case((8192, 8192), F32, "bench")],
        bench_variants=_bench_variants,
        probe=f"{__name__}:probe_sectors",
        judge=judge_sectors,
        hints=[
            "Give each program one BLOCK x BLOCK tile of x on a 2-D grid of (cdiv(M, BLOCK), "
            "cdiv(N, BLOCK)) programs: rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK), columns "
            "likewise from tl.program_id(1). Load the tile with x_ptr + rows[:, None] * stride_xm + "
            "cols[None, :] * stride_xn: consecutive lanes then read consecutive elements of an x row.",
            "Element (m, n) of x goes to element (n, m) of out. Store the tile's transpose, tl.trans(tile), "
            "through out_ptr + cols[:, None] * stride_on + rows[None, :] * stride_om: the store's block then "
            "runs along out's rows too, and a warp writes whole 32-byte sectors instead of one element per row.",
            "Mask both sides of the ragged edge: mask = (rows[:, None] < M) & (cols[None, :] < N) for the "
            "load, and the same condition in out's orientation, (cols[:, None] < N) & (rows[None, :] < M), "
            "for the store. Neither M nor N is a multiple of BLOCK in most cases.",
            "Address both tensors through their strides, never their shapes: one case hands you x = c.t() "
            "(strides (1, M)), another rows further apart than their length. Pass x.stride(0), x.stride(1), "
            "out.stride(0) and out.stride(1). 64 x 64 tiles with num_warps=8 are a good start on an H200.",
        ],
    )
)
