"""Chapter 01: measure first. Bytes and FLOPs of common operations, and where they sit on the roofline.

The task ``op_costs`` is no kernel: the learner writes plain Python functions that count what an
operation must move and compute, and say whether it is memory- or compute-bound. Each case draws
fresh arguments from the case's seed (in the grader's protected process), asks the learner's worker
for one function's answer in plain data, and compares it with the course's reference below (the
conventions are the ones stated in the docstrings of solutions/op_costs.py).
"""

from __future__ import annotations

import inspect
import math
import numbers

import torch

from .. import roofline
from . import Case, TaskSpec, register

# --------------------------------------------------------------------------------------------------
# the reference: one formula per function, with the convention it follows


def _vector_add(n, dtype_bytes):
    return 3 * n * dtype_bytes, n  # read x and y, write out; one add per element


def _matmul(M, N, K, dtype_bytes):
    # read A (M, K) and B (K, N), write C (M, N); each of the M*N outputs takes K multiply-adds
    return (M * K + K * N + M * N) * dtype_bytes, 2 * M * N * K


SOFTMAX_FLOPS_PER_ELEMENT = 5  # max, subtract, exp, sum, divide
GELU_FLOPS_PER_ELEMENT = 10  # bias add 1; 0.5*h*(1+tanh(c*(h+0.044715*h*h*h))): 6 mul, 2 add, 1 tanh


def _row_softmax(rows, cols, dtype_bytes):
    return 2 * rows * cols * dtype_bytes, SOFTMAX_FLOPS_PER_ELEMENT * rows * cols  # read x, write out


def _bias_gelu(rows, cols, dtype_bytes):
    # read x (rows, cols) and bias (cols,) once, write out (rows, cols)
    return (2 * rows * cols + cols) * dtype_bytes, GELU_FLOPS_PER_ELEMENT * rows * cols


def _floor(n_bytes, n_flops, bandwidth_gbs, tflops) -> roofline.Floor:
    peaks = roofline.Peaks("exercise", bandwidth_gbs, {"float32": tflops}, "exercise")
    return roofline.floor(n_bytes, n_flops, peaks, "float32")


def _bound(n_bytes, n_flops, bandwidth_gbs, tflops):
    return _floor(n_bytes, n_flops, bandwidth_gbs, tflops).bound  # "memory" on a tie


def _floor_ms(n_bytes, n_flops, bandwidth_gbs, tflops):
    return _floor(n_bytes, n_flops, bandwidth_gbs, tflops).ms


REFERENCE = {
    "vector_add_cost": _vector_add,
    "matmul_cost": _matmul,
    "row_softmax_cost": _row_softmax,
    "bias_gelu_cost": _bias_gelu,
    "bound": _bound,
    "floor_ms": _floor_ms,
}

# What each function's docstring promises, repeated under a wrong answer.
CONVENTION = {
    "vector_add_cost": "out = x + y on vectors of n elements",
    "matmul_cost": "C = A @ B with A (M, K), B (K, N), C (M, N); a multiply-add counts 2 FLOPs",
    "row_softmax_cost": "one FLOP per element for each of max, subtract, exp, sum and divide",
    "bias_gelu_cost": "bias has cols elements, broadcast over the rows; one FLOP per +, * and tanh "
    "in the docstring's two lines, per element",
}
BYTES_RULE = "bytes: each input read once, each output written once, intermediates never stored"


def _reference(function: str, *args, **kwargs):
    """The course's answer: ``reference("matmul_cost", M=64, N=32, K=16, dtype_bytes=2)``."""
    return REFERENCE[function](*args, **kwargs)


# --------------------------------------------------------------------------------------------------
# drawing arguments


def _log_uniform(gen: torch.Generator, lo: int, hi: int) -> int:
    """An integer between lo and hi, spread evenly over the orders of magnitude."""
    u = float(torch.rand((), generator=gen))
    return max(lo, min(hi, round(math.exp(math.log(lo) + u * (math.log(hi) - math.log(lo))))))


def _distinct(gen: torch.Generator, count: int, lo: int, hi: int) -> list[int]:
    """``count`` different integers, so that an answer that mixes up M, N and K cannot match."""
    while True:
        values = [_log_uniform(gen, lo, hi) for _ in range(count)]
        if len(set(values)) == count:
            return values


def _dtype_bytes(case: Case) -> int:
    return torch.empty((), dtype=case.dtype).element_size()


def _peaks(gen: torch.Generator) -> tuple[float, float]:
    """A made-up GPU: 500 to 8000 GB/s, 10 to 2000 TFLOP/s (round numbers, so a message reads well)."""
    return float(_log_uniform(gen, 500, 8000)), float(_log_uniform(gen, 10, 2000))


def _bound_args(case: Case, gen: torch.Generator) -> dict:
    """Bytes and FLOPs a factor of 2 to 50 away from the ridge point, on the side the case names."""
    bandwidth_gbs, tflops = _peaks(gen)
    n_bytes = _log_uniform(gen, 2**20, 2**36)  # 1 MiB to 64 GiB
    side = case.options["side"]
    if side == "none":
        n_flops = 0
    else:
        ridge = tflops * 1e12 / (bandwidth_gbs * 1e9)  # FLOP per byte where the two times are equal
        factor = 2 + 48 * float(torch.rand((), generator=gen))
        n_flops = round(n_bytes * ridge * (factor if side == "compute" else 1 / factor))
    return {"n_bytes": n_bytes, "n_flops": n_flops, "bandwidth_gbs": bandwidth_gbs, "tflops": tflops}


def _fixed_inputs(case: Case) -> dict:
    """A hidden case (COURSE_HIDDEN_CASES) names the function as its label and gives the arguments as
    its shape: {"label": "matmul_cost", "shape": [4096, 4096, 4096], "dtype": "float16"}, or
    {"label": "bound", "shape": [n_bytes, n_flops, bandwidth_gbs, tflops]}."""
    function = case.label
    if function not in REFERENCE:
        raise ValueError(
            f"an op_costs case needs a function name as its label ({', '.join(REFERENCE)}), not {function!r}"
        )
    names = [n for n in inspect.signature(REFERENCE[function]).parameters if n != "dtype_bytes"]
    if len(case.shape) != len(names):
        raise ValueError(f"an op_costs case for {function} needs a shape of {len(names)} numbers: {', '.join(names)}")
    args = dict(zip(names, case.shape))
    if function not in ("bound", "floor_ms"):
        args["dtype_bytes"] = _dtype_bytes(case)
    return {"function": function, **args}


def _make_inputs(case: Case, gen: torch.Generator) -> dict:
    """{"function": name, **keyword arguments of that function}, drawn afresh from ``gen``."""
    function = case.options.get("function")
    if function is None:
        return _fixed_inputs(case)
    if function == "vector_add_cost":
        args = {"n": _log_uniform(gen, 1, 2**28)}
    elif function == "matmul_cost":
        if case.options.get("gemv"):
            N, K = _distinct(gen, 2, 2, 2**14)
            args = {"M": 1, "N": N, "K": K}
        else:
            M, N, K = _distinct(gen, 3, 2, 2**14)
            args = {"M": M, "N": N, "K": K}
    elif function in ("row_softmax_cost", "bias_gelu_cost"):
        rows, cols = _distinct(gen, 2, 16, 2**15)
        args = {"rows": rows, "cols": cols}
    else:
        args = _bound_args(case, gen)
    if function not in ("bound", "floor_ms"):
        args["dtype_bytes"] = _dtype_bytes(case)
    return {"function": function, **args}


def _cases(mode: str) -> list[Case]:
    def cost(function, dtype, label, **extra):
        return Case((), dtype, label, params=(("function", function), *extra.items()))

    def peaks_case(function, side, label):  # no dtype here: the arguments are bytes, FLOPs and peaks
        return Case((), torch.float32, label, params=(("function", function), ("side", side)))

    return [
        cost("vector_add_cost", torch.float32, "vector add"),
        cost("vector_add_cost", torch.bfloat16, "vector add"),
        cost("matmul_cost", torch.float16, "matmul"),
        cost("matmul_cost", torch.float32, "matmul"),
        cost("matmul_cost", torch.bfloat16, "matmul with one row (M=1)", gemv=True),
        cost("row_softmax_cost", torch.float32, "row softmax"),
        cost("row_softmax_cost", torch.bfloat16, "row softmax"),
        cost("bias_gelu_cost", torch.float16, "bias + GELU"),
        cost("bias_gelu_cost", torch.float32, "bias + GELU"),
        peaks_case("bound", "memory", "bound, memory side"),
        peaks_case("bound", "compute", "bound, compute side"),
        peaks_case("bound", "none", "bound, no FLOPs (a copy)"),
        peaks_case("floor_ms", "memory", "floor_ms, memory side"),
        peaks_case("floor_ms", "compute", "floor_ms, compute side"),
    ]


# --------------------------------------------------------------------------------------------------
# running one case and explaining a wrong answer


def _fmt(v) -> str:
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        return repr(v)
    if isinstance(v, numbers.Integral) or float(v).is_integer() and abs(v) < 1e15:
        return f"{int(v):,}"
    return f"{float(v):.6g}"


def _call_text(function: str, args: dict) -> str:
    return f"{function}(" + ", ".join(f"{k}={_fmt(v)}" for k, v in args.items()) + ")"


def _is_number(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _same(got, expected, rel: float = 1e-9) -> bool:
    return _is_number(got) and math.isfinite(got) and math.isclose(got, expected, rel_tol=rel, abs_tol=0)


def _ratio(got, expected) -> str:
    if not expected or not _is_number(got):
        return ""
    r = got / expected
    return f" (yours is {r:.3g}x the expected)"


def _check_pair(function: str, call: str, got, expected) -> tuple[bool, str, list[str]]:
    rules = [BYTES_RULE, f"{function}: {CONVENTION[function]}"]
    if not isinstance(got, tuple | list) or len(got) != 2 or not all(_is_number(v) for v in got):
        return False, f"{call} returned {got!r}; it must return two numbers: (bytes, flops)", rules
    names = ("bytes", "flops")
    wrong = [i for i in range(2) if not _same(got[i], expected[i])]
    if not wrong:
        return True, "", []
    yours = ", ".join(f"{names[i]}={_fmt(got[i])}" for i in wrong)
    wanted = ", ".join(f"{names[i]}={_fmt(expected[i])}" for i in wrong)
    ratio = _ratio(got[wrong[0]], expected[wrong[0]]) if len(wrong) == 1 else ""
    return False, f"{call} returned {yours}; expected {wanted}{ratio}", rules


def _times(args: dict) -> tuple[float, float]:
    f = _floor(**args)
    return f.memory_ms, f.compute_ms


def _check_bound(call: str, args: dict, got, expected) -> tuple[bool, str, list[str]]:
    if got == expected:
        return True, "", []
    memory_ms, compute_ms = _times(args)
    why = [
        f"moving the bytes takes {memory_ms:.4g} ms at {_fmt(args['bandwidth_gbs'])} GB/s, doing the FLOPs "
        f"{compute_ms:.4g} ms at {_fmt(args['tflops'])} TFLOP/s: the longer of the two bounds the time"
    ]
    if got not in ("memory", "compute"):
        return False, f"{call} returned {got!r}; bound() must return exactly 'memory' or 'compute'", why
    return False, f"{call} returned {got!r}, expected {expected!r}", why


def _check_floor(call: str, args: dict, got, expected) -> tuple[bool, str, list[str]]:
    if _same(got, expected, rel=1e-6):
        return True, "", []
    if not _is_number(got):
        return False, f"{call} returned {got!r}; floor_ms() must return a number of milliseconds", []
    memory_ms, compute_ms = _times(args)
    summary = f"{call} returned {_fmt(got)}; expected {_fmt(expected)} ms{_ratio(got, expected)}"
    why = [f"at these peaks the bytes take {memory_ms:.4g} ms and the FLOPs {compute_ms:.4g} ms"]
    if _same(got, memory_ms + compute_ms, rel=1e-6):
        why.append("you added the two times: the floor is the larger of them (memory and maths overlap)")
    elif _same(got, min(memory_ms, compute_ms), rel=1e-6):
        why.append("you took the smaller time: the floor is the larger of the two")
    elif any(_same(got * f, expected, rel=1e-3) for f in (1e3, 1e-3, 1e6, 1e-6)):
        why.append("off by a power of 1000: milliseconds are 1e-3 s, GB/s is 1e9 bytes/s, TFLOP/s 1e12 FLOP/s")
    elif any(_same(got * f, expected, rel=1e-3) for f in (2**30 / 1e9, 1e9 / 2**30, 2**40 / 1e12, 1e12 / 2**40)):
        why.append("GB/s means 10^9 bytes per second and TFLOP/s 10^12 FLOP per second, not 2^30 or 2^40")
    return False, summary, why


def _call_case(case: Case, seed: int) -> tuple[str, dict]:
    """The question for one case: which function, with which arguments (plain numbers)."""
    inputs = _make_inputs(case, torch.Generator().manual_seed(seed))
    return inputs.pop("function"), inputs


def _judge_call(case: Case, function: str, args: dict, reply: dict) -> tuple[bool, str, list[str]]:
    """Judge the worker's plain reply to ``function(**args)`` against the course's answer."""
    call = _call_text(function, args)
    if reply.get("missing"):
        return False, f"op_costs.py has no function `{function}`", []
    if "raised" in reply:
        return False, f"{call} raised {reply['raised']}", [str(line) for line in reply.get("frames", [])]
    got = reply.get("value")
    if isinstance(got, dict) and "not_plain" in got:
        return False, f"{call} returned a {got['not_plain']}; it must return plain numbers (or a string for bound)", []
    expected = _reference(function, **args)
    if function == "bound":
        return _check_bound(call, args, got, expected)
    if function == "floor_ms":
        return _check_floor(call, args, got, expected)
    return _check_pair(function, call, got, expected)


register(
    TaskSpec(
        name="op_costs",
        chapter="01",
        title="Bytes and FLOPs of common operations; memory- or compute-bound",
        entry="matmul_cost",
        make_inputs=_make_inputs,
        reference=_reference,
        cases=_cases,
        outputs=(),
        bytes_moved=None,  # a cost model, not a kernel: nothing to benchmark
        flops=None,
        call_case=_call_case,
        judge_call=_judge_call,
        timeout_s=60.0,
        hints=[
            "Bytes: list every tensor the operation reads or writes, with its shape, and count each once. "
            "A vector add reads x and y and writes out: 3 * n * dtype_bytes. Intermediates (a row's max, "
            "h = x + bias) stay on the chip and cost no bytes.",
            "matmul: A is (M, K), B is (K, N), C is (M, N). Each of the M * N outputs is a dot product of K "
            "pairs: K multiplies and K adds. The bias of bias_gelu_cost has cols elements and is read once, "
            "not once per row.",
            "FLOPs of softmax and bias + GELU: count the operators per element as the docstrings list them, "
            "then multiply by rows * cols.",
            "bound and floor_ms: moving the bytes takes n_bytes / (bandwidth_gbs * 1e9) seconds, the FLOPs "
            "n_flops / (tflops * 1e12) seconds. The longer time bounds the operation ('memory' on a tie); "
            "floor_ms is that longer time in milliseconds.",
        ],
    )
)
