"""Chapter 06: matmul. Output tiles, tl.dot into a float32 accumulator, and programs ordered in L2 groups.

A case's shape is (M, N, K): a is (M, K), b is (K, N), out is (M, N).
"""

from __future__ import annotations

import torch

from .. import runtime
from ..compare import close_enough
from . import DEFAULT_TOLERANCE, Case, SpeedTiers, TaskSpec, Tier, Tolerance, output_like, random_tensor, register

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16


# --------------------------------------------------------------------------------------------------
# inputs, reference, cases, tolerance: the same for both tasks


def _operand(case: Case, gen: torch.Generator, rows: int, cols: int, transposed: bool, row_pad: int, scale: float):
    """A (rows, cols) operand: contiguous, a view of a wider matrix (row_pad), or the transpose of a
    contiguous (cols, rows) matrix, so that its strides are (1, rows)."""
    if transposed:
        return random_tensor(case, gen, shape=(cols, rows), scale=scale).t()
    return random_tensor(case, gen, shape=(rows, cols), scale=scale, row_pad=row_pad)


def matmul_inputs(case: Case, gen: torch.Generator) -> dict:
    M, N, K = case.shape
    opts = case.options
    # entries of a and b with variance K^-1/2: every element of out is a sum of K products of
    # variance 1/K, so out ~ N(0, 1) at any depth and one tolerance serves every K
    scale = K**-0.25
    return {
        "a": _operand(case, gen, M, K, opts.get("a_transposed", False), opts.get("a_row_pad", 0), scale),
        "b": _operand(case, gen, K, N, opts.get("b_transposed", False), opts.get("b_row_pad", 0), scale),
        "out": output_like(case, gen, shape=(M, N), row_pad=opts.get("out_row_pad", 0)),
    }


def matmul_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # read M*K + K*N elements; write M*N elements; 2*M*N*K FLOPs
    return a @ b


def _matmul_cases(mode: str) -> list[Case]:
    transposed_b = (("b_transposed", True),)
    both_transposed = (("a_transposed", True), ("b_transposed", True))
    wider_rows = (("a_row_pad", 3), ("b_row_pad", 5), ("out_row_pad", 7))
    rows = [
        ((1, 1, 1), F32, "tiny", ()),
        ((3, 5, 2), F16, "tiny", ()),
        ((33, 47, 65), F32, "tail", ()),  # no multiple of any block size in M, N or K
        ((100, 37, 129), F16, "tail", ()),
        ((128, 128, 100), F32, "K tail", ()),  # whole tiles in M and N; the last K step sticks out
        # 128 K steps of 64: a running sum kept in fp16 rounds at every step, 1.6e-3 to 1.7e-3
        # relative-norm error (measured, 3 seeds) against 2.1e-4 for a float32 accumulator
        ((32, 48, 8191), F16, "long K", ()),
        ((65, 70, 96), F32, "transposed b", transposed_b),  # b = b_t.t(): strides (1, K)
        ((48, 80, 72), F16, "transposed a and b", both_transposed),
        ((40, 50, 60), F32, "strided rows", wider_rows),  # rows further apart than their length
        ((37, 29, 41), F16, "misaligned", ()),
    ]
    if mode == runtime.CPU:
        rows += [((384, 320, 160), F32, "large", ()), ((384, 320, 160), F16, "large", ())]
    else:
        rows += [
            ((2048, 1536, 1029), F32, "large", ()),
            ((2048, 1536, 1029), F16, "large", ()),
            ((100, 37, 129), BF16, "tail", ()),
            ((65, 70, 96), BF16, "transposed b", transposed_b),
            ((2048, 1536, 1029), BF16, "large", ()),
        ]
    # bf16 on a GPU only: course_lib mends the interpreter's bf16 tl.dot, but CPU mode grades fp16 and fp32
    return [
        Case(shape, dtype, label, misaligned=label == "misaligned", gpu_only=dtype == BF16, params=params)
        for shape, dtype, label, params in rows
    ]


# Against a float64 reference, measured on both solutions in CPU mode over the cases above, 3 seeds
# each (out ~ N(0, 1)):
# * float32, exact products (input_precision="ieee"): relative-norm error at most 1.4e-7, largest
#   element error 1.3e-6 (2.4e-7 and 1.4e-6 at K = 4099). TF32, Triton's default for float32 on a
#   GPU, gives about 5e-4 and fails here on purpose: the solutions multiply float32 exactly.
# * float16 with a float32 accumulator: one rounding of the result, 2.1e-4 relative-norm error (2.4e-4
#   on 15 elements; never more than 2^-11 = 4.9e-4 per element); a running sum kept in fp16 reaches
#   1.6e-3 to 1.7e-3 on the long-K case and fails it.
# * bfloat16 (GPU cases, not measured yet): one rounding, about 1.7e-3 expected; the default limit, 8e-3, stands.
MATMUL_TOLERANCE = dict(DEFAULT_TOLERANCE)
MATMUL_TOLERANCE[F32] = Tolerance(rtol=1e-5, atol=1e-5, norm=1e-5)
MATMUL_TOLERANCE[F16] = Tolerance(rtol=2e-3, atol=1e-5, norm=5e-4)
# The tasks of this chapter, on the H200 (tensor cores, K = 8191): one element in 1536 of the long-K case
# came out 9.96e-4 off with the course's tiled and grouped solutions (2026-12-03, a seed of `check --all`),
# past 1e-5 + 2e-3 * |expected| where |expected| is under 0.49: the accumulator's error is absolute (about
# 2e-4 rms on outputs of variance 1), not relative. atol 2e-3 allows ten times that; the norm limit (5e-4)
# still fails a running sum kept in fp16 (1.6e-3). The chapters that build on this one keep atol 1e-5
# where it tells two roundings from one (chapter 10's steps).
CH06_TOLERANCE = dict(MATMUL_TOLERANCE)
CH06_TOLERANCE[F16] = Tolerance(rtol=2e-3, atol=2e-3, norm=5e-4)


def _as_if_contiguous(t: torch.Tensor) -> torch.Tensor:
    """The values a kernel reads from the transpose of a contiguous matrix when it takes the row
    stride for the row length and 1 for the column stride: the memory, in order, in t's shape."""
    return t.t().reshape(t.shape)


def _matmul_diagnose(inputs: dict, got: torch.Tensor, case: Case) -> str | None:
    """Name the mistake a wrong output matches: a transposed operand read as if it were contiguous."""
    from ..compare import close_enough

    a, b = inputs["a"], inputs["b"]
    tol = MATMUL_TOLERANCE[case.dtype]
    opts = case.options
    for name, a_read, b_read in (
        ("b", a, _as_if_contiguous(b)),
        ("a", _as_if_contiguous(a), b),
        ("a and b", _as_if_contiguous(a), _as_if_contiguous(b)),
    ):
        if all(opts.get(f"{x}_transposed") for x in name.split(" and ")) and close_enough(got, a_read @ b_read, tol):
            shown = {"a": f"a.stride() = (1, {a.shape[0]})", "b": f"b.stride() = (1, {b.shape[0]})"}
            strides = ", ".join(shown[x] for x in name.split(" and "))
            return (
                f"the output is a @ b with {name} read as if contiguous (row stride = row length, column "
                f"stride 1), but {name} here {'is a transposed view' if len(name) == 1 else 'are transposed views'} "
                f"({strides}): pass each tensor's own strides, x.stride(0) and x.stride(1), and use both"
            )
    return None


def _matmul_flops(case: Case) -> int:
    M, N, K = case.shape
    return 2 * M * N * K


def _matmul_bytes(case: Case) -> int:
    M, N, K = case.shape
    return (M * K + K * N + M * N) * torch.empty((), dtype=case.dtype).element_size()


BENCH_CASES = [
    Case((8192, 8192, 8192), BF16, "bench"),
    Case((4096, 4096, 4096), BF16, "bench"),
    Case((8192, 8192, 512), BF16, "bench"),  # short K: the epilogue and the start-up weigh more
]


def _spec(**fields) -> TaskSpec:
    return TaskSpec(
        chapter="06",
        make_inputs=matmul_inputs,
        reference=matmul_reference,
        cases=_matmul_cases,
        tolerance=CH06_TOLERANCE,
        diagnose=_matmul_diagnose,
        bytes_moved=_matmul_bytes,
        flops=_matmul_flops,
        tensor_cores=True,
        bench_cases=list(BENCH_CASES),
        # torch eager is a @ b, which is cuBLAS already; named as such beside the solution
        bench_variants=lambda case: {"cublas": lambda a, b: torch.matmul(a, b)},
        **fields,
    )


# --------------------------------------------------------------------------------------------------
# tiled matmul

register(
    _spec(
        name="tiled_matmul",
        speed=SpeedTiers(
            fast=Tier("eager", 0.5),  # eager is cuBLAS: half its speed is a well-tiled kernel
            case=Case((4096, 4096, 4096), torch.bfloat16, "timed"),
        ),
        title="out = a @ b by output tiles: tl.dot into a float32 accumulator (cases: (M, N, K))",
        entry="tiled_matmul",
        hints=[
            "Each program computes one BLOCK_M x BLOCK_N tile of out. On a 1-D grid of "
            "cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N) programs numbered along the rows of tiles, program pid "
            "owns tile-row pid_m = pid // n_col_tiles and tile-column pid_n = pid % n_col_tiles, with "
            "n_col_tiles = tl.cdiv(N, BLOCK_N); its rows are pid_m * BLOCK_M + tl.arange(0, BLOCK_M), its "
            "columns likewise. The tile is a sum over K: walk K in steps of BLOCK_K.",
            "Address every tensor through its strides, never its shape: element (m, k) of a sits at "
            "a_ptr + m * stride_am + k * stride_ak, and the launcher passes a.stride(0), a.stride(1), "
            "b.stride(0), b.stride(1), out.stride(0), out.stride(1). A transposed view such as b = c.t() "
            "has strides (1, K), and one case hands you exactly that. After each step move the slices "
            "on: a_ptrs += BLOCK_K * stride_ak, b_ptrs += BLOCK_K * stride_bk.",
            "Masks: the last K step may stick out past K, so mask both loads on k < K - k0 with other=0.0 "
            "(zeros add nothing to the sum). Rows past M and columns past N must not be loaded or stored: "
            "mask them too, or wrap them (rows % M) so their loads stay inside a, and mask the store with "
            "(rows[:, None] < M) & (cols[None, :] < N).",
            "Accumulate in float32: acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32), then "
            "acc = tl.dot(a, b, acc) each step, and cast once on the store (acc.to(out_ptr.dtype.element_ty)); "
            "a running sum kept in fp16 rounds at every step and fails the long-K case. For float32 inputs "
            'pass input_precision="ieee": the default on a GPU, TF32, keeps only 10 bits of each input. '
            "tl.dot needs block sizes of at least 16; 128 x 256 x 64 with 8 warps and 3 stages is fast on "
            "an H200.",
        ],
    )
)


# --------------------------------------------------------------------------------------------------
# grouped ordering: the structural check

# The output the ordering check launches on: 10 x 19 tiles of 128 x 128, 10 x 10 of 128 x 256 (the usual
# tile): enough tile-rows and tile-columns that groups of 8 of either are groups (8 + 2), not the whole
# output. Wider than tall, as the tiles are; every program costs the interpreter some 10 ms. K is one short
# step: the order is the point, not the sum.
PROBE_SHAPE = (1280, 2432, 16)  # (M, N, K)
# Where the probe sees column by column, groups of GROUP_M >= its tile-rows look the same: this output, as
# tall as the benchmark's (64 tile-rows of 128, 4 tile-columns of 128), tells apart every group that is one
# there, launched only then. Groups as tall as it are no groups at 8192 either.
TALL_SHAPE = (8192, 512, 16)
# Where the property matters: a wave of programs on the benchmark's output. An H200 has 132 SMs; a
# persistent kernel's wave is its grid.
WAVE_SHAPE, WAVE_PROGRAMS = (8192, 8192), 132
# An order that is neither groups of tile-rows nor of tile-columns passes where a wave of max(tile-rows,
# tile-columns) consecutive tiles reads at most this fraction of the strips (BLOCK_M rows of a, BLOCK_N
# columns of b) that the better of row by row and column by column reads. On the probe, with tiles of 64 x 64
# to 128 x 256: groups of 4 with two tiles swapped read 66-83% of it, a shuffled order 140-183%.
MOST_STRIPS = 0.86


def _program() -> tuple[int | None, list[int] | None, int | None]:
    """The running program's number in the interpreter's order (x slowest, z fastest), the grid, and
    its place in the order a GPU starts the grid's programs (x fastest): the same on a 1-D grid."""
    from ..hooks import gpu_start_order, running_program, running_program_index

    pid, grid = running_program()
    if pid is None:
        return None, None, None
    return pid, grid, gpu_start_order(running_program_index()[0], grid)


class _StoreOrder:
    """An access listener (course_lib.hooks.access_listeners): for every store into ``out``, the row
    and column of its first element and the program that stored it, grouped by launch (an autotuner
    launches once per config)."""

    def __init__(self, out: torch.Tensor):
        self.base = out.data_ptr()
        self.itemsize = out.element_size()
        self.end = self.base + out.numel() * self.itemsize
        self.n_cols = out.shape[1]  # out is contiguous
        self.launches: list[dict] = []
        self.last_pid: int | None = None

    def __call__(self, kind, kernel, addresses, active, itemsize) -> None:
        import numpy as np

        if kind != "store":
            return
        live = np.asarray(addresses, dtype=np.uint64)[np.asarray(active, dtype=bool)]
        live = live[(live >= self.base) & (live < self.end)]
        if live.size == 0:
            return
        offsets = (live - np.uint64(self.base)) // np.uint64(self.itemsize)
        corner = [int((offsets // self.n_cols).min()), int((offsets % self.n_cols).min())]
        pid, grid, started = _program()
        if pid is None:  # no program number to go by: every launch stores tile (0, 0)
            new_launch = not self.launches or corner == [0, 0]
        else:  # the interpreter runs a launch's programs in its own order: a number that falls is a new launch
            new_launch = self.last_pid is None or pid < self.last_pid
        if new_launch:
            self.launches.append({"kernel": str(kernel), "grid": grid, "stores": [], "programs": []})
        self.launches[-1]["stores"].append(corner)
        self.launches[-1]["programs"].append(-1 if started is None else int(started))  # in the GPU's order
        self.last_pid = pid


def probe_order(module, entry) -> dict:
    """In the worker: run the learner's launcher once on PROBE_SHAPE and record which output tile each
    program stores, in the order the interpreter runs the programs (program-id order). Plain data,
    judged by ``judge_order``. On a GPU no store can be seen: the facts say so."""
    if not runtime.is_cpu():
        return {"mode": runtime.GPU}

    M, N, K = PROBE_SHAPE
    listener, a, b, out = _listened(entry, PROBE_SHAPE, seed=0)
    last = listener.launches[-1] if listener.launches else {"kernel": "", "grid": None, "stores": [], "programs": []}
    right = close_enough(out.double(), a.double() @ b.double(), MATMUL_TOLERANCE[F16])  # judged on this run
    facts = {"mode": runtime.CPU, "shape": [M, N], "launches": len(listener.launches), **last, "right": bool(right)}
    if _column_by_column(last):  # or groups taller than the probe's tile-rows: a taller output tells
        tall = _stores_on(entry, TALL_SHAPE)
        if tall is not None:
            facts["tall"] = tall
    return facts


def _listened(entry, shape, seed: int):
    """One call of the launcher on a (M, K) by (K, N) float16 product, every store into out listened to:
    (the listener, a, b, out)."""
    from .. import hooks

    M, N, K = shape
    gen = torch.Generator().manual_seed(seed)
    a, b = torch.randn(M, K, generator=gen).to(F16), torch.randn(K, N, generator=gen).to(F16)
    out = torch.empty(M, N, dtype=F16)
    listener = _StoreOrder(out)
    hooks.access_listeners.append(listener)
    try:
        entry(a=a, b=b, out=out)
    finally:
        hooks.access_listeners.remove(listener)
    return listener, a, b, out


def _stores_on(entry, shape) -> dict | None:
    """The stores of one call of the launcher on ``shape`` (M, N, K), as probe_order records them."""
    M, N, _ = shape
    listener = _listened(entry, shape, seed=1)[0]
    if not listener.launches:
        return None
    last = listener.launches[-1]
    return {"shape": [M, N], "stores": last["stores"], "programs": last["programs"], "grid": last["grid"]}


def _column_by_column(launch: dict) -> bool:
    stores = launch.get("stores") or []
    if not stores:
        return False
    tiles, rows, cols = _tiles(stores)
    if len(rows) < 2 or len(cols) < 2 or len(set(tiles)) != len(tiles):
        return False
    order, _ = _run_order(tiles, list(launch.get("programs") or []))
    return order == grouped_order(len(rows), len(cols), len(rows))


def grouped_order(n_row_tiles: int, n_col_tiles: int, group_m: int) -> list[tuple[int, int]]:
    """(tile-row, tile-column) of programs 0, 1, 2, ... in groups of ``group_m`` tile-rows, the
    tile-row changing fastest within a group; the last group holds the tile-rows that are left.
    group_m = 1 is the plain row-by-row order."""
    order = []
    for first in range(0, n_row_tiles, group_m):
        height = min(group_m, n_row_tiles - first)
        order += [(first + r, c) for c in range(n_col_tiles) for r in range(height)]
    return order


def column_grouped_order(n_row_tiles: int, n_col_tiles: int, group_n: int) -> list[tuple[int, int]]:
    """The same in groups of ``group_n`` tile-columns, the tile-column changing fastest within a group."""
    return [(r, c) for c, r in grouped_order(n_col_tiles, n_row_tiles, group_n)]


def _tiles(stores: list) -> tuple[list[tuple[int, int]], list[int], list[int]]:
    """Each store's (tile-row, tile-column), from the rank of its first row and column among all."""
    row_starts = sorted({int(r) for r, _ in stores})
    col_starts = sorted({int(c) for _, c in stores})
    row_rank = {r: i for i, r in enumerate(row_starts)}
    col_rank = {c: i for i, c in enumerate(col_starts)}
    return [(row_rank[int(r)], col_rank[int(c)]) for r, c in stores], row_starts, col_starts


def _run_order(tiles: list, programs: list) -> tuple[list, int]:
    """The tiles in the order a GPU runs them, and how many programs the launch had. One tile per program:
    program order. A persistent kernel (programs that loop over tiles) runs its programs side by side:
    every program's first tile, then every program's second, ..."""
    if len(programs) != len(tiles) or any(p < 0 for p in programs):
        return list(tiles), len(tiles)
    done: dict[int, int] = {}
    slots = []
    for tile, pid in zip(tiles, programs):
        slots.append(((done.get(pid, 0), pid), tile))
        done[pid] = done.get(pid, 0) + 1
    return [tile for _, tile in sorted(slots)], len(done)


def _strips(order: list, wave: int, block: tuple[int, int]) -> float:
    """The property: rows of a and columns of b that the programs of one wave read (per row of K), on
    average over every run of ``wave`` consecutive tiles of ``order``. Tiles that run together and share
    their strips of a and b read them from L2 once."""
    wave = max(1, min(wave, len(order)))
    total = 0
    for start in range(len(order) - wave + 1):
        window = order[start : start + wave]
        total += len({r for r, _ in window}) * block[0] + len({c for _, c in window}) * block[1]
    return total / (len(order) - wave + 1)


def _wave_text(make, block: tuple[int, int], wave: int) -> tuple[int, int]:
    """Average tile-rows and tile-columns a wave reads, for an order ``make(n_rows, n_cols)`` on WAVE_SHAPE."""
    n_rows, n_cols = (-(-size // b) for size, b in zip(WAVE_SHAPE, block))
    order = make(n_rows, n_cols)
    starts = range(0, len(order) - wave + 1, wave)
    rows = sum(len({r for r, _ in order[s : s + wave]}) for s in starts) / len(starts)
    cols = sum(len({c for _, c in order[s : s + wave]}) for s in starts) / len(starts)
    return round(rows), round(cols)


def _shown(order: list[tuple[int, int]], n: int = 12) -> str:
    return ", ".join(f"({r}, {c})" for r, c in order[:n]) + (", ..." if len(order) > n else "")


PROPERTY = (
    "What the order protects: programs that run at the same time should share their tile-rows of a and "
    "their tile-columns of b, so that L2 serves the strips they share and each is read from memory about "
    "once per wave."
)
_GROUPED = (
    "Number them in groups of GROUP_M tile-rows: program pid belongs to group pid // (GROUP_M * "
    "n_col_tiles), and within a group the tile-row changes fastest: (0, 0), (1, 0), ..., "
    "(GROUP_M - 1, 0), (0, 1), (1, 1), ...; the last group holds the tile-rows that are left. (Groups of "
    "tile-columns serve as well.)"
)


def serpentine_order(n_row_tiles: int, n_col_tiles: int, group_m: int) -> list[tuple[int, int]]:
    """Groups of ``group_m`` tile-rows as in grouped_order, the tile-row walking down the group in even
    tile-columns and back up in odd ones: the same tiles in every wave, give or take one."""
    order = []
    for first in range(0, n_row_tiles, group_m):
        height = min(group_m, n_row_tiles - first)
        for c in range(n_col_tiles):
            rows = range(height) if c % 2 == 0 else range(height - 1, -1, -1)
            order += [(first + r, c) for r in rows]
    return order


def _column_serpentine(n_row_tiles: int, n_col_tiles: int, group_n: int) -> list[tuple[int, int]]:
    return [(r, c) for c, r in serpentine_order(n_col_tiles, n_row_tiles, group_n)]


def _family(order: list, n_rows: int, n_cols: int):
    """(what, make) where the run order is groups of tile-rows or of tile-columns that are real groups,
    walked straight or as a serpentine."""
    forms = [
        ("tile-rows", n_rows, grouped_order),
        ("tile-rows, walked as a serpentine", n_rows, serpentine_order),
        ("tile-columns", n_cols, column_grouped_order),
        ("tile-columns, walked as a serpentine", n_cols, _column_serpentine),
    ]  # fmt: skip
    for what, size, make in forms:
        for group in range(2, size):
            if order == make(n_rows, n_cols, group):
                return f"groups of {group} {what}", lambda r, c, g=group, make=make: make(r, c, g)
    return None


def blocked_order(
    n_row_tiles: int, n_col_tiles: int, rows: int, cols: int, blocks_by_columns: bool = False
) -> list[tuple[int, int]]:
    """Super-tiles: blocks of ``rows`` x ``cols`` tiles (clipped at the edges), each walked row by row,
    the blocks taken row by row (or column by column)."""
    corners = [(top, left) for top in range(0, n_row_tiles, rows) for left in range(0, n_col_tiles, cols)]
    if blocks_by_columns:
        corners.sort(key=lambda corner: (corner[1], corner[0]))
    order = []
    for top, left in corners:
        bottom, right = min(top + rows, n_row_tiles), min(left + cols, n_col_tiles)
        order += [(r, c) for r in range(top, bottom) for c in range(left, right)]
    return order


def _blocked_family(order: list, n_rows: int, n_cols: int):
    """(what, make) where the run order goes block by block through blocks of R x C tiles (R, C >= 2 and
    less than the output's tile-rows and tile-columns, the blocks clipped at the edges): each block's tiles
    run one after the other, in any order within it, and the blocks run row by row or column by column.
    ``make`` is that order at any size, each block walked row by row, for the judge at scale."""
    # blocks as tall or as wide as the probe's output are groups (``_family``), or what the probe cannot tell
    # from column by column or row by row
    for rows in range(2, n_rows):
        for cols in range(2, n_cols):
            blocks = [(r // rows, c // cols) for r, c in order]
            runs = [b for i, b in enumerate(blocks) if i == 0 or b != blocks[i - 1]]
            if len(runs) != len(set(runs)):  # a block whose tiles do not run together
                continue
            n_br, n_bc = -(-n_rows // rows), -(-n_cols // cols)
            by_rows = [(i, j) for i in range(n_br) for j in range(n_bc)]
            by_cols = [(i, j) for j in range(n_bc) for i in range(n_br)]
            if runs in (by_rows, by_cols):
                down = runs != by_rows
                return (
                    f"super-tiles of {rows} x {cols} tiles, taken {'column' if down else 'row'} by "
                    f"{'column' if down else 'row'}",
                    lambda r, c, rows=rows, cols=cols, down=down: blocked_order(r, c, rows, cols, down),
                )
    return None


def _taller_groups(tall: dict | None, block, wave: int, baseline: str):
    """A passing check where the taller output shows groups of tile-rows that the probe was too short to
    show, else None."""
    if not tall or not tall.get("stores"):
        return None
    tiles, rows, cols = _tiles(tall["stores"])
    if len(rows) < 2 or len(cols) < 2 or len(set(tiles)) != len(tiles) or len(tiles) != len(rows) * len(cols):
        return None
    order, _ = _run_order(tiles, list(tall.get("programs") or []))
    for group in range(2, len(rows)):
        if order == grouped_order(len(rows), len(cols), group):
            rows_read, cols_read = _wave_text(lambda r, c, g=group: grouped_order(r, c, g), block, wave)
            M, N = tall["shape"]
            return (
                True,
                f"programs run in groups of {group} tile-rows",
                [
                    f"grouped order: groups of {group} tile-rows, as tall as the probe or taller, so it looked "
                    f"like column by column there; on an output of {M} x {N} ({len(rows)} x {len(cols)} tiles) the "
                    f"groups show: the first programs cover tiles {_shown(order, 8)}",
                    f"on an {WAVE_SHAPE[0]} x {WAVE_SHAPE[1]} output a wave of {wave} programs reads about "
                    f"{rows_read} tile-rows of a and {cols_read} tile-columns of b ({baseline})",
                ],
            )
    return None


def judge_order(facts: dict) -> list[tuple[bool, str, list[str]]]:
    """The verdict on probe_order's facts (``_judge_order``). A grid of 2 or 3 dimensions is judged in the
    order a GPU starts its programs, program_id(0) fastest (the programs' numbers are recorded in that
    order): a kernel that numbers its tiles from the ids itself is as free to group them as on a 1-D
    grid, and the details say which order was judged."""
    verdicts = _judge_order(facts)
    grid = facts.get("grid") or [1, 1, 1]
    if facts.get("mode") == runtime.CPU and (int(grid[1]) > 1 or int(grid[2]) > 1):
        note = (
            f"The grid {tuple(int(g) for g in grid)} has more than one dimension: its programs are judged in the "
            "order a GPU starts them, tl.program_id(0) fastest, then tl.program_id(1)."
        )
        fix = (
            "Taken straight from the ids, (pid_m, pid_n) = (program_id(0), program_id(1)) is that order: column "
            "by column, or row by row the other way round. Number the programs yourself, pid = "
            "tl.program_id(1) * tl.num_programs(0) + tl.program_id(0) (or launch a 1-D grid), and group from pid."
        )
        verdicts = [
            (
                ok,
                summary,
                [*details, note] if ok else [d for d in details if not d.startswith("Groups as tall")] + [note, fix],
            )
            for ok, summary, details in verdicts
        ]
    return verdicts


def _judge_order(facts: dict) -> list[tuple[bool, str, list[str]]]:
    """In the grader's process: do the tiles that run together share their rows of a and columns of b?"""
    if facts.get("mode") == runtime.GPU:
        return [
            (
                True,
                "ordering checked in CPU mode",
                [
                    "The order of the programs is checked in CPU mode, where the interpreter sees every store: "
                    "COURSE_MODE=cpu python -m course_lib check grouped_matmul"
                ],
            )
        ]
    M, N = (int(v) for v in facts.get("shape", PROBE_SHAPE[:2]))
    stores = list(facts.get("stores") or [])
    where = f"a {M} x {N} output (K = {PROBE_SHAPE[2]})"
    if not stores:
        return [(False, f"no program stored into out when the launcher ran on {where}", [])]
    tiles, row_starts, col_starts = _tiles(stores)
    n_rows, n_cols = len(row_starts), len(col_starts)
    block = (row_starts[1] if n_rows > 1 else M, col_starts[1] if n_cols > 1 else N)
    seen = f"on {where}: {n_rows} x {n_cols} tiles of {block[0]} x {block[1]}"
    if len(set(tiles)) != len(tiles) or len(tiles) != n_rows * n_cols:
        return [
            (
                False,
                f"the programs did not store each of the {n_rows} x {n_cols} output tiles once ({seen})",
                [f"tiles in the order they were stored: {_shown(tiles, 24)}"],
            )
        ]
    if n_rows < 2 or n_cols < 2:
        return [
            (
                False,
                f"the order of the programs cannot be seen with {n_rows} x {n_cols} tiles ({seen})",
                ["Use BLOCK_M and BLOCK_N of at most 256, so the output is several tiles in each direction."],
            )
        ]
    order, programs = _run_order(tiles, list(facts.get("programs") or []))
    persistent = programs < len(order)
    if persistent:
        seen += f", {programs} persistent programs running side by side"
    shown = f"Seen {seen}; in the order they run, the programs stored tiles {_shown(order)}."
    wave = WAVE_PROGRAMS  # one program per SM, persistent or not
    probe_wave = max(n_rows, n_cols)  # a wave that row by row fills with a whole row of tiles
    by_rows, by_cols = (_strips(grouped_order(n_rows, n_cols, g), probe_wave, block) for g in (1, n_rows))
    mine = _strips(order, probe_wave, block)
    row_rows, row_cols = _wave_text(lambda r, c: grouped_order(r, c, 1), block, wave)
    baseline = f"row by row: {row_rows} and {row_cols}"
    family = _family(order, n_rows, n_cols)
    blocked = _blocked_family(order, n_rows, n_cols) if family is None else None
    if blocked is not None:
        # super-tiles: the probe's waves are too short to show them (each is part of one block), so the
        # order is judged at scale, with the blocks it was seen to use: a wave must read at most
        # MOST_STRIPS of the strips that the better of row by row and column by column reads there
        what, make = blocked
        rows, cols = _wave_text(make, block, wave)
        n_r, n_c = (-(-size // b) for size, b in zip(WAVE_SHAPE, block))
        theirs = _strips(make(n_r, n_c), wave, block)
        best_plain = min(_strips(grouped_order(n_r, n_c, g), wave, block) for g in (1, n_r))
        if theirs <= MOST_STRIPS * best_plain:
            return [
                (
                    True,
                    f"programs run in {what}",
                    [
                        f"blocked order: {what}, block after block; the first programs cover tiles "
                        f"{_shown(order, 8)} ({seen})",
                        f"on an {WAVE_SHAPE[0]} x {WAVE_SHAPE[1]} output a wave of {wave} programs reads about {rows} "
                        f"tile-rows of a and {cols} tile-columns of b ({baseline}): {theirs / best_plain:.0%} of the "
                        f"strips of the better plain order (at most {MOST_STRIPS:.0%})",
                    ],
                )
            ]
    if family is not None:
        what, make = family
        rows, cols = _wave_text(make, block, wave)
        return [
            (
                True,
                f"programs run in {what}",
                [
                    f"grouped order: {what}; the first programs cover tiles {_shown(order, 8)} ({seen})",
                    f"on an {WAVE_SHAPE[0]} x {WAVE_SHAPE[1]} output a wave of {wave} programs reads about {rows} "
                    f"tile-rows of a and {cols} tile-columns of b ({baseline})",
                ],
            )
        ]
    if order == grouped_order(n_rows, n_cols, 1):
        return [
            (
                False,
                "programs are numbered row by row: consecutive programs sweep a whole row of B's tiles "
                "before moving down (no grouping)",
                [
                    shown,
                    f"On a GPU a wave of {wave} programs then reads one or two tile-rows of a but every tile-column",
                    f"of b ({baseline} on an {WAVE_SHAPE[0]} x {WAVE_SHAPE[1]} output): b streams through L2 again "
                    "for each tile-row.",
                    PROPERTY,
                    _GROUPED,
                ],
            )
        ]
    if order == grouped_order(n_rows, n_cols, n_rows):
        taller = _taller_groups(facts.get("tall"), block, wave, baseline)
        if taller is not None:
            return [taller]
        return [
            (
                False,
                "programs are numbered column by column: consecutive programs go down a whole column of "
                "tiles, reading every tile-row of a for each tile-column of b",
                [
                    shown,
                    f"Groups as tall as the whole output are no groups: make GROUP_M smaller than its {n_rows} "
                    "tile-rows (8 is usual)"
                    + (
                        f"; on an output of {TALL_SHAPE[0]} rows the order was column by column too."
                        if facts.get("tall")
                        else "."
                    ),
                    PROPERTY,
                    _GROUPED,
                ],
            )
        ]
    ratio = mine / min(by_rows, by_cols)
    measured = (
        f"a wave of {probe_wave} consecutive tiles reads {mine / sum(block):.1f} strips of a and b on average, "
        f"{ratio:.0%} of the {min(by_rows, by_cols) / sum(block):.1f} that row by row or column by column reads"
    )
    if ratio <= MOST_STRIPS:
        return [(True, "programs that run together share strips of a and b", [f"{shown}: {measured}"])]
    return [
        (
            False,
            "the tiles that run together do not share their rows of a and columns of b",
            [
                shown,
                f"On the probe, {measured} (at most {MOST_STRIPS:.0%} needed).",
                PROPERTY,
                _GROUPED,
            ],
        )
    ]


register(
    _spec(
        name="grouped_matmul",
        speed=SpeedTiers(
            fast=Tier("eager", 0.5),  # eager is cuBLAS
            case=Case((4096, 4096, 4096), torch.bfloat16, "timed"),
        ),
        title="out = a @ b with programs numbered in L2 groups of tile-rows, autotuned (cases: (M, N, K))",
        entry="grouped_matmul",
        probe=f"{__name__}:probe_order",
        judge=judge_order,
        hints=[
            "The tile itself is tiled_matmul's; what changes is which tile each program number gets. A GPU "
            "starts programs roughly in number order, some hundreds at a time. Row by row, those programs "
            "share one or two tile-rows of a but need every tile-column of b; in groups of GROUP_M "
            "tile-rows, they share GROUP_M tile-rows of a and a few tile-columns of b, which stay in L2.",
            "With programs_per_group = GROUP_M * n_col_tiles, program pid is in group "
            "pid // programs_per_group, whose first tile-row is group * GROUP_M. Its position inside the "
            "group, pid % programs_per_group, gives the tile-row (position modulo the group's height, added "
            "to the first tile-row) and the tile-column (position divided by the group's height): the "
            "tile-row changes fastest.",
            "The last group is shorter when the tile-rows do not divide into groups of GROUP_M: its height "
            "is tl.minimum(n_row_tiles - first_tile_row, GROUP_M). With GROUP_M there instead, some tiles "
            "get no program and some programs point past the output.",
            "Autotune: wrap the kernel in triton.autotune(configs=[triton.Config({'BLOCK_M': 128, "
            "'BLOCK_N': 256, 'BLOCK_K': 64, 'GROUP_M': 8}, num_warps=8, num_stages=3), ...], key=['M', 'N', "
            "'K']) and let the grid follow the chosen config: grid = lambda meta: (triton.cdiv(M, "
            "meta['BLOCK_M']) * triton.cdiv(N, meta['BLOCK_N']),). A 1-D grid is simplest: on a grid of more "
            "dimensions a GPU starts the programs tl.program_id(0) fastest, and that order is what is judged "
            "(in CPU mode the grader records which tile each program stores).",
        ],
    )
)
