"""Chapter 05: fusion II. Row reductions (softmax, layernorm) in one pass, and online softmax."""

from __future__ import annotations

import torch

from ..compare import compare
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

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
WIDTHS = (512, 1024, 2048, 4096, 8192)
BENCH = [Case((4096, n), dt, "bench") for dt in (BF16, F32) for n in WIDTHS]


def _row_cases(mode: str, long_rows: bool = False) -> list[Case]:
    large = (128, 1000) if mode == runtime.CPU else (4096, 3000)
    rows = [
        ((1, 1), F32, "tiny"),
        ((3, 3), BF16, "tiny"),
        ((37, 1000), F32, "tail"),
        ((16, 1537), F16, "tail"),
        ((5, 4096), BF16, "tail"),
        ((64, 130), F32, "tail"),
        ((11, 999), F16, "misaligned"),
        (large, BF16, "large"),
    ]
    if long_rows:  # rows several blocks long
        rows += [((3, 5000), F32, "long rows"), ((2, 20_001), BF16, "long rows"), ((4, 1025), F16, "long rows")]
    cases = [Case(s, d, label, misaligned=label == "misaligned") for s, d, label in rows]
    # x and out as views into wider matrices, each with a row stride of its own
    cases.append(Case((7, 1000), F32, "strided rows", params=(("x_row_pad", 24), ("out_row_pad", 3))))
    # values up to about +-200: exp overflows float32 past 88, so only a max-subtracting kernel survives
    cases.append(Case((6, 300), F32, "large values", params=(("scale", 60.0),)))
    return cases


def _row_bytes(case: Case) -> int:
    return nbytes(case, 2)  # read the matrix once, write it once


# --------------------------------------------------------------------------------------------------
# softmax


def _softmax_inputs(case: Case, gen: torch.Generator) -> dict:
    scale = case.options.get("scale", 3.0)
    return {
        "x": random_tensor(case, gen, scale=scale, row_pad=case.options.get("x_row_pad", 0)),
        "out": output_like(case, gen, row_pad=case.options.get("out_row_pad", 0)),
    }


def _softmax_reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)  # read M*N; write M*N


ZERO_PADDING = (
    "masked-off columns were loaded as 0.0: they count in the max and the sum; load them as -inf (other=-float('inf'))"
)


def _zero_padded_softmax(x: torch.Tensor, block: int) -> torch.Tensor:
    """Softmax as a kernel computes it when the columns past n_cols, up to a multiple of ``block``, load
    as 0.0: each takes part in the max and adds exp(0 - max) to the sum."""
    n_cols = x.shape[-1]
    padding = -(-n_cols // block) * block - n_cols
    m = torch.clamp(x.amax(dim=-1, keepdim=True), min=0.0) if padding else x.amax(dim=-1, keepdim=True)
    e = torch.exp(x - m)
    return e / (e.sum(dim=-1, keepdim=True) + padding * torch.exp(-m))


def _softmax_diagnose(inputs: dict, got: torch.Tensor, case: Case, blocks=None) -> str | None:
    """Name zero padding: the output is softmax with the padded columns of the last block counted as
    zeros (a row in one block of next_power_of_2(n_cols), or in chunks of any of ``blocks``)."""
    x = inputs["x"]
    n_cols = x.shape[-1]
    tol = DEFAULT_TOLERANCE[case.dtype]
    for block in blocks or [1 << (n_cols - 1).bit_length()]:  # BLOCK_N = triton.next_power_of_2(n_cols)
        if n_cols % block and compare(got, _zero_padded_softmax(x, block), tol, poisoned=False).ok:
            return ZERO_PADDING
    return None


def _online_softmax_diagnose(inputs: dict, got: torch.Tensor, case: Case) -> str | None:
    return _softmax_diagnose(inputs, got, case, blocks=[2**k for k in range(4, 17)])  # BLOCK_N 16 ... 65536


_SOFTMAX_HINTS = [
    "Subtract the row's maximum before exp: softmax(x) = exp(x - max) / sum(exp(x - max)) is the same "
    "function, and exp never sees a large positive number (exp(89) already overflows float32).",
    "Load masked-off columns as -inf (other=-float('inf')): they then take no part in the max, and "
    "exp(-inf) = 0 adds nothing to the sum.",
    "One pass over memory: load the row (or rows) into registers once, reduce with tl.max and tl.sum "
    "along axis 1, and store; BLOCK_N = triton.next_power_of_2(n_cols) makes the whole row one block.",
    "Short rows leave most of the GPU idle with one row per program: give each program several rows "
    "(a [ROWS, BLOCK_N] tile) so every program does a useful amount of work.",
]

register(
    TaskSpec(
        name="softmax",
        speed=SpeedTiers(case=Case((65536, 4096), BF16, "timed")),
        chapter="05",
        title="numerically stable row softmax, one pass over memory",
        entry="softmax",
        make_inputs=_softmax_inputs,
        reference=_softmax_reference,
        cases=_row_cases,
        diagnose=_softmax_diagnose,
        bytes_moved=_row_bytes,
        flops=lambda case: 5 * case.shape[0] * case.shape[1],  # max, subtract, exp, sum, divide
        bench_cases=BENCH,
        hints=_SOFTMAX_HINTS,
    )
)


# --------------------------------------------------------------------------------------------------
# layernorm


def _layernorm_inputs(case: Case, gen: torch.Generator) -> dict:
    n_cols = case.shape[-1]
    vec = Case((n_cols,), case.dtype, case.label)
    return {
        "x": random_tensor(case, gen, scale=case.options.get("scale", 2.0), row_pad=case.options.get("x_row_pad", 0)),
        "weight": random_tensor(vec, gen),
        "bias": random_tensor(vec, gen),
        "eps": 1e-5,
        "out": output_like(case, gen, row_pad=case.options.get("out_row_pad", 0)),
    }


def _layernorm_reference(x, weight, bias, eps):
    # read M*N + 2N elements; write M*N
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps)


# Mean and variance are sums over thousands of elements: float32 accumulation is right to about 1e-6
# relative, and an output near zero (x close to the mean) carries the error of the mean.
_LAYERNORM_TOLERANCE = dict(DEFAULT_TOLERANCE)
_LAYERNORM_TOLERANCE[F32] = Tolerance(rtol=1e-4, atol=1e-5, norm=1e-5)

register(
    TaskSpec(
        name="layernorm",
        speed=SpeedTiers(case=Case((65536, 4096), BF16, "timed")),
        chapter="05",
        title="layernorm forward: mean, variance, scale and shift in one pass",
        entry="layernorm",
        make_inputs=_layernorm_inputs,
        reference=_layernorm_reference,
        cases=_row_cases,
        tolerance=_LAYERNORM_TOLERANCE,
        bytes_moved=lambda case: (
            nbytes(case, 2) + 2 * case.shape[-1] * torch.empty((), dtype=case.dtype).element_size()
        ),
        flops=lambda case: 8 * case.shape[0] * case.shape[1],
        bench_cases=BENCH,
        hints=[
            "Per row: mean = sum(x) / n_cols; var = sum((x - mean)^2) / n_cols (the biased variance, as "
            "torch's layer_norm uses); y = (x - mean) / sqrt(var + eps) * weight + bias.",
            "Masked-off columns must not count: load them as 0.0, and zero (x - mean) where the mask is "
            "false before squaring, or the padding adds mean^2 to the variance.",
            "Accumulate in float32 whatever the input dtype, and divide by the real n_cols, not BLOCK_N.",
            "Load weight and bias once per program and broadcast them over the program's rows.",
        ],
    )
)


# --------------------------------------------------------------------------------------------------
# online softmax: rows longer than one block


register(
    TaskSpec(
        name="online_softmax",
        chapter="05",
        title="softmax over rows longer than a block: the running max and sum",
        entry="online_softmax",
        make_inputs=_softmax_inputs,
        reference=_softmax_reference,
        cases=lambda mode: _row_cases(mode, long_rows=True),
        diagnose=_online_softmax_diagnose,
        bytes_moved=lambda case: nbytes(case, 3),  # two reads of the row and one write
        flops=lambda case: 7 * case.shape[0] * case.shape[1],
        # rows of 32768: 64 or 128 KB, more than a program holds in registers
        bench_cases=[Case((2048, 32768), dt, "bench") for dt in (BF16, F32)],
        hints=[
            "Walk the row in chunks of BLOCK_N. Keep two running numbers: m, the largest value so far, "
            "and s, the sum of exp(x - m) so far.",
            "When a chunk brings a larger maximum m_new, the old sum was measured against the old m: "
            "rescale it, s = s * exp(m - m_new) + sum(exp(chunk - m_new)), then m = m_new.",
            "A second walk over the row writes exp(x - m) / s. Start m at -inf and s at 0 (as float32 "
            "scalars: m = tl.full((), float('-inf'), tl.float32)), and mask the last chunk with -inf.",
        ],
    )
)
