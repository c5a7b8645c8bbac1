"""Chapter 04: fusion I. Elementwise chains done in one pass over memory."""

from __future__ import annotations

import numpy as np
import torch

from . import (
    DEFAULT_TOLERANCE,
    Case,
    SpeedTiers,
    TaskSpec,
    Tolerance,
    nbytes,
    output_like,
    random_tensor,
    register,
    runtime,
)
from .philox import rand as philox_rand
from .philox import rand_per_element, rand_per_element_torch

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16


# --------------------------------------------------------------------------------------------------
# bias + GELU


def _gelu_inputs(case: Case, gen: torch.Generator) -> dict:
    n_cols = case.shape[-1]
    bias_case = Case((n_cols,), case.dtype, case.label)
    return {
        "x": random_tensor(case, gen, scale=2.0, row_pad=case.options.get("x_row_pad", 0)),
        "bias": random_tensor(bias_case, gen),
        "out": output_like(case, gen, row_pad=case.options.get("out_row_pad", 0)),
        "approximate": case.options["approximate"],
    }


def _gelu_reference(x: torch.Tensor, bias: torch.Tensor, approximate: str) -> torch.Tensor:
    # read M*N + N elements; write M*N elements
    return torch.nn.functional.gelu(x + bias, approximate=approximate)


def _gelu_cases(mode: str) -> list[Case]:
    large = (256, 1000) if mode == runtime.CPU else (2048, 4099)
    rows = [
        ((1, 1), F32, "tiny", "tanh"),
        ((3, 5), BF16, "tiny", "none"),
        ((7, 1000), F16, "tail", "tanh"),
        ((33, 129), F32, "tail", "none"),
        ((5, 4096), BF16, "tail", "tanh"),
        ((9, 777), F32, "tail", "tanh"),
        ((64, 300), F16, "tail", "none"),
        ((8, 2048), F32, "whole tiles", "tanh"),  # shapes that tiles divide exactly
        ((16, 1024), BF16, "whole tiles", "none"),
        ((17, 1537), F16, "misaligned", "tanh"),
        ((3, 255), BF16, "misaligned", "none"),
        (large, F32, "large", "tanh"),
        (large, BF16, "large", "none"),
    ]
    cases = [
        Case(shape, dtype, label, misaligned=label == "misaligned", params=(("approximate", approx),))
        for shape, dtype, label, approx in rows
    ]
    # x and out as views into wider matrices, each with a row stride of its own: three column tiles
    # per row, and a kernel that takes n_cols for the row stride reads and writes the wrong rows
    strided = (("approximate", "tanh"), ("x_row_pad", 7), ("out_row_pad", 130))
    cases.insert(-2, Case((9, 2500), F32, "strided rows", params=strided))
    return cases


def _gelu_bytes(case: Case) -> int:
    return nbytes(case, 2) + case.shape[-1] * torch.empty((), dtype=case.dtype).element_size()


# float32 erf and exp on a GPU are right to about 1e-7 absolute; for negative u, GELU's 1 + erf(u/sqrt 2)
# cancels and that error becomes ~4e-5 relative (measured on an H200). Lower precisions keep their limits.
_GELU_TOLERANCE = dict(DEFAULT_TOLERANCE)
_GELU_TOLERANCE[F32] = Tolerance(rtol=1e-4, atol=1e-6, norm=1e-4)
_FORM = {"tanh": "tanh", "none": "exact (erf)"}


def _matches(got: torch.Tensor, candidate: torch.Tensor, tol: Tolerance) -> bool:
    from ..compare import compare

    return compare(got, candidate, tol, poisoned=False).ok


def _gelu_diagnose(inputs: dict, got: torch.Tensor, case: Case) -> str | None:
    """Name the mistake a wrong output matches: the other GELU form, or the bias indexed by the row."""
    x, bias, approximate = inputs["x"], inputs["bias"], inputs["approximate"]
    tol = _GELU_TOLERANCE[case.dtype]
    other = "none" if approximate == "tanh" else "tanh"
    if _matches(got, _gelu_reference(x, bias, other), tol):
        return (
            f"the output is GELU's {_FORM[other]} form, but approximate={approximate!r} asks for the "
            f"{_FORM[approximate]} form: are the forms swapped?"
        )
    n_rows, n_cols = x.shape
    if n_cols > 1 and n_rows <= n_cols:
        per_row = torch.nn.functional.gelu(x + bias[:n_rows, None], approximate=approximate)
        if _matches(got, per_row, tol):
            return "the output is gelu(x + bias[row]): the bias belongs to the column, bias[None, :], not the row"
    return None


register(
    TaskSpec(
        name="fused_bias_gelu",
        speed=SpeedTiers(case=Case((16384, 8192), BF16, "timed", params=(("approximate", "tanh"),))),
        chapter="04",
        title="bias + GELU (tanh and erf forms) in one pass",
        entry="fused_bias_gelu",
        make_inputs=_gelu_inputs,
        reference=_gelu_reference,
        cases=_gelu_cases,
        tolerance=_GELU_TOLERANCE,
        diagnose=_gelu_diagnose,
        bytes_moved=_gelu_bytes,
        # about 10 FLOPs an element for the bias and either GELU form (exp/erf counted as one):
        # far below the ridge point, so memory sets the speed either way.
        flops=lambda case: 10 * case.shape[0] * case.shape[1],
        bench_cases=[
            Case((8192, 8192), F32, "bench", params=(("approximate", "tanh"),)),
            Case((8192, 8192), BF16, "bench", params=(("approximate", "tanh"),)),
            Case((8192, 8192), BF16, "bench", params=(("approximate", "none"),)),
            Case((8192, 8192), F32, "bench", params=(("approximate", "none"),)),
        ],
        hints=[
            "Unfused, x + bias writes a whole tensor and GELU reads it back: four full-tensor transfers "
            "where two do. In one kernel, load a tile of x, add the bias in registers, apply GELU, store once.",
            "The launcher starts one program per tile, numbered along the rows: with "
            "col_tiles = tl.cdiv(n_cols, BLOCK_N), program pid owns tile row pid_m = pid // col_tiles and "
            "tile column pid_n = pid % col_tiles, i.e. rows pid_m*BLOCK_M ... and columns pid_n*BLOCK_N ...; "
            "load the bias for those columns once and broadcast it with b[None, :].",
            "Compute in float32 (x.to(tl.float32)) and cast on the store. tanh form: "
            "0.5*u*(1 + tanh(v)) with v = 0.7978845608*(u + 0.044715*u^3), which equals u * sigmoid(2v) "
            "= u / (1 + exp(-2v)); erf form: 0.5*u*(1 + erf(u/sqrt(2))) with tl.math.erf (correct; "
            "notebook 04 shows a cheaper erf that the solution uses).",
            "Pick the form with a tl.constexpr flag so each form compiles to its own kernel with no "
            "branch inside; mask both dimensions: (rows[:, None] < n_rows) & (cols[None, :] < n_cols).",
        ],
    )
)


# --------------------------------------------------------------------------------------------------
# residual + dropout


def _dropout_inputs(case: Case, gen: torch.Generator) -> dict:
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen, device=gen.device).item())
    return {
        "x": random_tensor(case, gen),
        "residual": random_tensor(case, gen),
        "out": output_like(case, gen),
        "p": case.options["p"],
        "seed": seed,
    }


def _uniform_per_element(seed: int, n: int, device: torch.device) -> torch.Tensor:
    """The dropout's numbers for elements 0 ... n - 1 on ``device``: drawn there on a GPU (the timed
    case's 128 Mi elements take about 20 s in numpy), in numpy on the CPU (faster there than torch's
    64-bit integer operators); the same bits either way."""
    if device.type == "cuda":
        return rand_per_element_torch(seed, n, device)
    return torch.from_numpy(rand_per_element(seed, np.arange(n))).to(device)


def _dropout_reference(x: torch.Tensor, residual: torch.Tensor, p: float, seed: int) -> torch.Tensor:
    # read 2N elements; write N elements. Element i = 4k + j is kept when the j-th number of
    # tl.rand4x(seed, k) is >= p: one Philox call serves four elements.
    keep = _uniform_per_element(seed, x.numel(), x.device).reshape(x.shape) >= np.float32(p)
    scale = 1.0 / (1.0 - p)  # one division per call, then a multiply per element
    return residual + torch.where(keep, x * scale, torch.zeros_like(x))


def _dropout_torch(x: torch.Tensor, residual: torch.Tensor, p: float, seed: int) -> torch.Tensor:
    """What PyTorch users write (its own random stream): the eager and torch.compile baselines."""
    return residual + torch.nn.functional.dropout(x, p=p, training=True)


_EVIDENCE = 16  # a mask is named only when it differs from the right one on this many elements


def _dropout_diagnose(inputs: dict, got: torch.Tensor, case: Case) -> str | None:
    """Name the mistake a wrong output matches: no 1/(1-p), an inverted comparison, a counter that
    repeats with the block, or another mask altogether (a seed of its own). A few elements fit many
    masks, so a mask is only named where it differs from the right one on enough of them."""
    x, residual, p, seed = (inputs[k] for k in ("x", "residual", "p", "seed"))
    tol = DEFAULT_TOLERANCE[case.dtype]
    n = x.numel()
    r = torch.from_numpy(rand_per_element(seed, np.arange(n))).reshape(x.shape)
    keep = r >= np.float32(p)
    inverse = 1 / (1 - p)

    def dropout(kept: torch.Tensor, scale: float) -> torch.Tensor:
        return residual + torch.where(kept, x * scale, torch.zeros_like(x))

    if p > 0 and _matches(got, dropout(keep, 1.0), tol):
        return "the kept values are not scaled by 1 / (1 - p), so dropout shrinks the expected value"
    if n >= _EVIDENCE and _matches(got, dropout(~keep, inverse), tol):
        return "the mask is inverted: elements were kept where their number is < p, a fraction p of them; keep >= p"
    one_per_call = torch.from_numpy(philox_rand(seed, np.arange(n))).reshape(x.shape) >= np.float32(p)
    if int((one_per_call != keep).sum()) >= _EVIDENCE and _matches(got, dropout(one_per_call, inverse), tol):
        return (
            "the mask is tl.rand(seed, i) >= p, one Philox call per element; this task takes four numbers from "
            "each call: element 4k + j uses the j-th number of tl.rand4x(seed, k)"
        )
    block = 16
    while block < n and block <= 2**16:
        lanes = torch.from_numpy(rand_per_element(seed, np.arange(n) % block)).reshape(x.shape) >= np.float32(p)
        if int((lanes != keep).sum()) >= _EVIDENCE and _matches(got, dropout(lanes, inverse), tol):
            return (
                f"the random numbers repeat every {block} elements: the Philox counters restart in every block "
                "(tl.arange alone); the counter of elements 4k ... 4k + 3 is their global k = offset // 4"
            )
        block *= 2
    if p > 0 and n >= 4 * _EVIDENCE:
        dropped = (got - residual).abs() <= tol.atol + tol.rtol * residual.abs()
        kept = (got - dropout(torch.ones_like(keep), inverse)).abs() <= tol.atol + tol.rtol * got.abs()
        if bool((dropped | kept).all()):
            return (
                "the output is residual + dropout with another mask than the task's: is `seed` passed to "
                "tl.rand4x, is the counter the global k = offset // 4, and does element 4k + j take number j?"
            )
    return None


def _dropout_cases(mode: str) -> list[Case]:
    large = 100_003 if mode == runtime.CPU else 4_000_037
    rows = [
        ((1,), F32, "tiny", 0.5),
        ((3,), BF16, "tiny", 0.1),
        ((1000,), F32, "tail", 0.0),
        ((1000,), F16, "tail", 0.1),
        ((4097,), BF16, "tail", 0.5),
        ((2049,), F32, "tail", 0.9),
        ((1537,), F16, "misaligned", 0.25),
        ((large,), F32, "large", 0.1),
    ]
    return [Case(s, d, label, misaligned=label == "misaligned", params=(("p", p),)) for s, d, label, p in rows]


register(
    TaskSpec(
        name="residual_dropout",
        speed=SpeedTiers(case=Case((128 * 2**20,), BF16, "timed", params=(("p", 0.1),))),
        chapter="04",
        title="residual + dropout(x) with a seed: the same mask on every run",
        entry="residual_dropout",
        make_inputs=_dropout_inputs,
        reference=_dropout_reference,
        baseline=_dropout_torch,
        diagnose=_dropout_diagnose,
        cases=_dropout_cases,
        bytes_moved=lambda case: nbytes(case, 3),
        flops=lambda case: 3 * case.shape[0],
        bench_cases=[Case((64 * 2**20,), dt, "bench", params=(("p", 0.1),)) for dt in (BF16, F32)],
        partly_read=frozenset({"x"}),  # a kernel may load x only where it keeps the element: bytes saved
        hints=[
            "The mask is not stored anywhere: each element's random number is recomputed from the seed "
            "and a counter. tl.rand4x(seed, k) runs Philox once on counter k and returns four numbers; "
            "element 4k + j uses the j-th. So a block of BLOCK_SIZE elements needs BLOCK_SIZE // 4 counters: "
            "k = pid * (BLOCK_SIZE // 4) + tl.arange(0, BLOCK_SIZE // 4), global, not restarting per block.",
            "Work on the block as a (BLOCK_SIZE // 4, 4) tile: offsets = k[:, None] * 4 + tl.arange(0, 4)[None, :] "
            "(still contiguous in memory). r0, r1, r2, r3 = tl.rand4x(seed, k) gives four (BLOCK_SIZE // 4,) "
            "vectors; pick number j for column j with tl.where(j == 0, r0[:, None], tl.where(j == 1, "
            "r1[:, None], ...)), where j = tl.arange(0, 4)[None, :].",
            "Keep an element when its number is >= p, and scale the kept values by 1 / (1 - p) so the "
            "expected value is unchanged: out = residual + where(keep, x * scale, 0), with scale = 1 / (1 - p) "
            "divided once on the host and passed in (a division per element costs more than the multiply).",
            "Because the numbers are counter-based, the same seed gives the same mask whatever BLOCK_SIZE you "
            "pick; if the mask changes between runs or block sizes, the counters are not global.",
        ],
    )
)
