"""Chapter 10, the capstone: recommendation inference's "linear compression" with duplicated user features.

    out[b] = W @ concat(E_user[user_of[b]], E_cand[b])        # (M, N) for each candidate b

W is (M, Ku + Kc), E_user (U, Ku, N), E_cand (B, Kc, N), user_of (B,) sorted (many candidates per
user, every user has at least one), out (B, M, N). Written this way each candidate copies its user's
Ku rows and multiplies them again. The three graded steps remove that work one at a time:

* ``split_user_gemm`` (step 1, decompose, torch): W @ concat(e_u, e_c) = W_u @ e_u + W_c @ e_c with
  W_u = W[:, :Ku] and W_c = W[:, Ku:], so user_out[u] = W_u @ E_user[u] runs once per user and
  out[b] = W_c @ E_cand[b] + user_out[user_of[b]]. Graded on the values and on the FLOPs torch counts.
* ``pad_k`` (step 2, align, torch): W_c is a view whose rows are Ku + Kc elements apart and start Ku
  elements in: 4088 and 2356 bytes at the published shape, no multiple of 16. A copy whose rows are
  a multiple of 16 bytes apart, zero between, is what 16-byte loads and TMA need (chapter 08).
* ``fused_broadcast`` (step 3, Triton): the user GEMM in one launch, then one candidate GEMM whose
  epilogue loads user_of[b] and adds that user's tile of user_out before the one store of out. No
  (B, M, N) copy of the user part, out never read back; checked in the interpreter.

A case's shape is (B, U, M, Ku, Kc, N) for steps 1 and 3, (M, Ku, Kc) for step 2. Its params say how
the candidates are spread over the users: ("per_user", 70) as in the published benchmark (70 each,
the last user takes the remainder), ("counts", (1, 4, 2)) exactly, or nothing: a random spread drawn
from the seed.

Steps 1 and 2 are torch, not kernels (TaskSpec.torch_task): no launch is required and the launcher
torch guard is off; the grader's process makes the inputs and judges the returned tensor, its values
and (pad_k) its layout as the worker read it: strides, alignment, whether it is a view of W, and the
bytes of its rows' span, padding included. What torch counts (FLOPs) and what fresh allocations hold
are probed in the worker, where torch modes may run, and judged here.
"""

from __future__ import annotations

import time
from dataclasses import replace

import torch

from .. import runtime
from ..compare import Tolerance, close_enough
from . import DEFAULT_TOLERANCE, Case, TaskSpec, output_like, random_tensor, register
from .ch06_matmul import MATMUL_TOLERANCE

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
COPY_BANDWIDTH = 4.27e12  # bytes/s: an H200's device-to-device copy, read + written (shared/GPU_FACTS.md)

# The published benchmark's shape (B = 1024 candidates, 70 per user: 15 users), the course's own, and
# the course's with 4 candidates per user (512 users): (B, U, M, Ku, Kc, N).
PUBLISHED = (1024, 15, 433, 1178, 866, 256)
COURSE = (2048, 16, 256, 512, 256, 128)
MANY_USERS = (2048, 512, 256, 512, 256, 128)
SHAPES = {"published": PUBLISHED, "course": COURSE, "many users": MANY_USERS}  # label -> (B, U, M, Ku, Kc, N)


# --------------------------------------------------------------------------------------------------
# inputs, reference, baselines


def _counts(case: Case, gen: torch.Generator) -> list[int]:
    """Candidates per user, in order: from the case's params, or a random spread drawn from ``gen``."""
    B, U = case.shape[:2]
    opts = case.options
    if "counts" in opts:
        counts = [int(c) for c in opts["counts"]]
    elif "per_user" in opts:
        per = int(opts["per_user"])
        counts = [per] * (U - 1) + [B - per * (U - 1)]  # the last user takes the remainder
    elif U == 1:
        counts = [B]
    else:  # U - 1 distinct cuts in 1 .. B - 1: every user gets at least one candidate
        cuts = sorted((torch.randperm(B - 1, generator=gen, device=gen.device)[: U - 1] + 1).tolist())
        counts = [b - a for a, b in zip([0, *cuts], [*cuts, B])]
    if len(counts) != U or sum(counts) != B or min(counts) < 1:
        raise ValueError(f"{case.describe()}: {counts} candidates per user do not make B = {B} over U = {U} users")
    return counts


def user_of_tensor(case: Case, gen: torch.Generator) -> torch.Tensor:
    """user_of, (B,) int64, sorted: candidate b belongs to user user_of[b]."""
    counts = torch.tensor(_counts(case, gen))
    return torch.repeat_interleave(torch.arange(len(counts)), counts).to(gen.device)


def split_inputs(case: Case, gen: torch.Generator) -> dict:
    B, U, M, Ku, Kc, N = case.shape
    # entries of variance (Ku + Kc)^-1/2: every element of out is a sum of Ku + Kc products of variance
    # 1 / (Ku + Kc), so out ~ N(0, 1) at any depth (chapter 06); the user part has variance Ku / (Ku + Kc)
    scale = (Ku + Kc) ** -0.25
    return {
        "w": random_tensor(case, gen, shape=(M, Ku + Kc), scale=scale),  # (M, Ku + Kc)
        "e_user": random_tensor(case, gen, shape=(U, Ku, N), scale=scale),  # (U, Ku, N)
        "e_cand": random_tensor(case, gen, shape=(B, Kc, N), scale=scale),  # (B, Kc, N)
        "user_of": user_of_tensor(case, gen),  # (B,) int64
        "ku": Ku,
    }


def broadcast_inputs(case: Case, gen: torch.Generator) -> dict:
    B, _, M, _, _, N = case.shape
    return {**split_inputs(case, gen), "out": output_like(case, gen, shape=(B, M, N))}


def capstone_reference(w, e_user, e_cand, user_of, ku):
    """The decomposed sum, equal to the definition W @ concat(E_user[user_of[b]], E_cand[b]); the
    grader runs it in float64, where the order of the additions does not matter at these limits."""
    # read M*(Ku+Kc) + U*Ku*N + B*Kc*N elements and B indices; write B*M*N; 2*M*N*(U*Ku + B*Kc) FLOPs
    user_out = torch.matmul(w[:, :ku], e_user)  # (U, M, N): once per user
    return torch.matmul(w[:, ku:], e_cand) + user_out[user_of]  # (B, M, N)


def naive_eager(w, e_user, e_cand, user_of, ku):
    """What the model says, in PyTorch: each candidate's user rows copied beside its own, then one
    batched GEMM over K = Ku + Kc. The benchmarks' torch eager baseline."""
    features = torch.cat([e_user[user_of], e_cand], dim=1)  # (B, Ku + Kc, N): E_user copied B / U times
    return torch.matmul(w, features)  # (B, M, N): 2*M*N*B*(Ku + Kc) FLOPs


def decomposed_eager(w, e_user, e_cand, user_of, ku):
    """Step 1 in PyTorch: the user GEMM once per user, the candidate GEMM, and a gather-add (the
    gather makes a (B, M, N) copy of the user part, which step 3 removes)."""
    user_out = torch.matmul(w[:, :ku], e_user)  # (U, M, N)
    return torch.matmul(w[:, ku:], e_cand) + user_out[user_of]  # (B, M, N)


# --------------------------------------------------------------------------------------------------
# tolerances

# The Triton step computes both parts in one float32 accumulator and rounds once, on the store:
# chapter 06's matmul limits. Measured on the solution in CPU mode: relative-norm error 2.1e-4 in fp16
# (limit 5e-4), 9e-8 in fp32.
BROADCAST_TOLERANCE = dict(MATMUL_TOLERANCE)

# Step 1 in torch rounds three times where the reference implies once: each GEMM's output to the
# input dtype, then their sum. Where the two parts cancel, those roundings are a large part of what
# is left, and the relative elementwise limit alone fails them (chapter 07's case). So the elementwise
# limit gets an absolute part of about two roundings of a typical |value| (out ~ N(0, 1)). Measured on
# torch's decomposition over the cases' shapes, seeds 0-4: the absolute error above rtol * |expected|
# was at most 1.7e-3 in fp16 and 1.3e-2 in bf16; relative-norm error at most 3.7e-4 and 3.1e-3.
# A wrong user's part is off by O(1).
SPLIT_TOLERANCE = {
    F32: MATMUL_TOLERANCE[F32],
    F16: Tolerance(rtol=2e-3, atol=4e-3, norm=1e-3),
    BF16: Tolerance(rtol=1.6e-2, atol=3e-2, norm=8e-3),
}

# Step 4 (ch10_warp_specialized) keeps user_out in the output's dtype, so that a TMA copy can bring its
# tiles into the output's staging tile: the user's part is rounded to 16 bits, then the sum on its
# store, two roundings where step 3 has one. The same limits as step 1's, whose absolute part is
# about two roundings of a typical |value|. Measured on that rounding, done in torch, over step 4's
# nine cases, seeds 0-4: the absolute error above rtol * |expected| was at most 7.7e-3 in bf16 (limit
# 3e-2) and 9.7e-4 in fp16 (limit 4e-3), the relative-norm error at most 2.6e-3 and 2.7e-4 (limits
# 8e-3 and 1e-3); tests/test_ch10_ws.py repeats it on the small cases. A wrong user's part is still
# off by O(1).
TWO_ROUNDINGS_TOLERANCE = SPLIT_TOLERANCE


# --------------------------------------------------------------------------------------------------
# known mistakes, named when the output matches one


def _parts(inputs: dict):
    w, ku = inputs["w"], inputs["ku"]
    user_out = torch.matmul(w[:, :ku], inputs["e_user"])  # (U, M, N)
    cand = torch.matmul(w[:, ku:], inputs["e_cand"])  # (B, M, N)
    return user_out, cand


def capstone_diagnose(inputs: dict, got: torch.Tensor, case: Case, tolerance: dict | None = None) -> str | None:
    """A sentence naming the mistake a wrong output matches (float64 inputs), or None."""
    tol = (tolerance or BROADCAST_TOLERANCE)[case.dtype]
    user_of = inputs["user_of"]
    user_out, cand = _parts(inputs)
    B, U = cand.shape[0], user_out.shape[0]
    mine = user_out[user_of]  # (B, M, N): each candidate's own user part
    if close_enough(got, cand, tol):
        return (
            "the output is the candidate GEMM alone, W_c @ E_cand[b]: the user part user_out[user_of[b]] "
            "is missing (add it to the accumulator before the store)"
        )
    if close_enough(got, cand + 2 * mine, tol):
        return (
            "the output is W_c @ E_cand[b] + 2 * user_out[user_of[b]]: the user part is added twice "
            "(once in the epilogue is all it takes)"
        )
    if close_enough(got, mine, tol):
        return "the output is user_out[user_of[b]] alone: the candidate GEMM's part is missing"
    if case.dtype != F32:  # in float32 one more rounding is within the limits
        rounded = cand.to(case.dtype).double() + mine
        right = cand + mine
        if close_enough(got, rounded, tol) and (got - rounded).norm() < (got - right).norm():
            name = _dtype_name(case.dtype)
            return (
                f"the output is round(W_c @ E_cand[b]) + user_out[user_of[b]], the candidate part rounded to "
                f"{name} before the user part was added: it went through memory in out's dtype (a second "
                "kernel adding the user part into out, or a store and a load of out) and was rounded twice. "
                "Where the two parts cancel, that first rounding is a large part of what is left; fused, the "
                "epilogue adds the user tile to the float32 accumulator and out is rounded once, on its store"
            )
    if U < 2:
        return None
    # each candidate's user part as the output has it: the nearest row of user_out to out[b] - cand[b]
    rest = (got.double() - cand).reshape(B, -1)
    rows = user_out.reshape(U, -1)
    distance = (rest * rest).sum(1, keepdim=True) - 2 * rest @ rows.T + (rows * rows).sum(1)[None, :]  # (B, U)
    nearest = distance.argmin(dim=1)
    wrong = (nearest != user_of).nonzero().reshape(-1)
    if wrong.numel() == 0 or not close_enough(got, cand + user_out[nearest], tol):
        return None
    b = int(wrong[0])
    sentence = (
        f"{wrong.numel()} of the {B} candidates get another user's part: candidate {b} holds "
        f"user_out[{int(nearest[b])}], but its user is user_of[{b}] = {int(user_of[b])}"
    )
    equal_groups = torch.clamp(torch.arange(B) // max(1, B // U), max=U - 1)
    if torch.equal(nearest.cpu(), equal_groups):
        sentence += (
            f" (the output indexes user_out by b // (B // U) = b // {B // U}, as if every user had the same "
            "number of candidates: here they do not; look each candidate's user up in user_of)"
        )
    else:
        sentence += " (index user_out by user_of[b], the candidate's own user)"
    return sentence


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


# --------------------------------------------------------------------------------------------------
# step 1: split_user_gemm


def _split_cases(mode: str) -> list[Case]:
    def counts(*c):
        return (("counts", c),)

    table = [
        ((1, 1, 1, 1, 1, 1), F32, "tiny", ()),
        ((3, 2, 2, 3, 2, 5), F16, "tiny", counts(1, 2)),
        ((20, 4, 33, 40, 18, 17), F32, "tail", ()),  # random candidates per user
        ((9, 5, 17, 24, 13, 10), BF16, "users with one candidate", counts(1, 1, 4, 1, 2)),
        ((37, 3, 43, 29, 21, 16), F16, "published spread", (("per_user", 14),)),  # 14, 14, 9
        ((24, 12, 16, 32, 16, 8), F32, "many users", (("per_user", 2),)),
        ((64, 4, 48, 96, 40, 32), BF16, "large", ()),
    ]
    # the same cases in both modes: plain torch, on the mode's device
    return [Case(shape, dt, label, params=p) for shape, dt, label, p in table]


def _split_diagnose(inputs: dict, got: torch.Tensor, case: Case) -> str | None:
    return capstone_diagnose(inputs, got.double(), case, SPLIT_TOLERANCE) if not torch.isnan(got).any() else None


# The decomposition check counts the work of every torch operation the learner's function runs, at
# the dispatcher (a TorchDispatchMode, below every Python-level rewrite): a matrix product its FLOPs
# (torch.utils.flop_counter's formulas), any other operation the elements it produces or reads, a view
# nothing. Multiplying W by each candidate's copy of its user's features is counted whichever way it
# is written (a matmul, an einsum, a broadcast multiply and a sum, a loop of small products), and a
# dummy product adds to the count instead of replacing it. Values read into Python (tolist, item,
# float, numpy) are counted apart: computing with them is computing outside torch's sight.
# The shape makes the two ways far apart: 64 candidates, 1 and 63 per user, Ku = 256, Kc = 8.
# Decomposed: 2*M*N*(U*Ku + B*Kc) = 32,768 FLOPs; the user GEMM once per candidate: 2*M*N*B*(Ku + Kc)
# = 540,672.
WORK_PROBE = Case((64, 2, 4, 256, 8, 4), F32, "work count", params=(("counts", (1, 63)),))
WORK_FACTOR = 4.0  # the most work, as a multiple of the decomposed FLOPs (the solution counts about 1.1x)
PYTHON_READS = 256  # values a function may read into Python (a size, a count), not the tensors' data


def split_flops(case: Case) -> tuple[int, int]:
    """(decomposed, naive) FLOPs of the two GEMMs: 2*M*N*(U*Ku + B*Kc) and 2*M*N*B*(Ku + Kc)."""
    B, U, M, Ku, Kc, N = case.shape
    return 2 * M * N * (U * Ku + B * Kc), 2 * M * N * B * (Ku + Kc)


_FREE = frozenset({"_unsafe_view", "lift_fresh", "alias", "detach", "empty", "empty_like", "empty_strided"})
_PYTHON_READS = frozenset(
    {"tolist", "item", "numpy", "__array__", "__float__", "__int__", "__index__", "__bool__", "untyped_storage",
     "storage", "__dlpack__", "__repr__", "__str__", "__format__"}
)  # fmt: skip


def _numel(values) -> int:
    total = 0
    for v in values if isinstance(values, (list, tuple)) else [values]:
        if isinstance(v, torch.Tensor):
            total += v.numel()
        elif isinstance(v, (list, tuple)):
            total += _numel(v)
    return total


def count_work(fn, *args, **kwargs):
    """Run ``fn`` and count its work: (its result, {operator: work}, values read into Python)."""
    from collections import Counter

    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    by_op: Counter = Counter()
    reads = [0]

    class Work(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            packet = func.overloadpacket
            name = packet.__name__
            if packet in flop_registry:
                by_op[str(packet)] += int(flop_registry[packet](*args, **kwargs, out_val=out))
            elif name == "_local_scalar_dense":
                reads[0] += 1
            elif not func.is_view and name not in _FREE:
                by_op[str(packet)] += max(_numel(out), _numel(list(args) + list(kwargs.values())))
            return out

    class Reads(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            if getattr(func, "__name__", "") in _PYTHON_READS and args and isinstance(args[0], torch.Tensor):
                reads[0] += args[0].numel()
            return func(*args, **(kwargs or {}))

    with Reads(), Work():
        result = fn(*args, **kwargs)
    return result, dict(by_op), reads[0]


def probe_split_work(module, entry) -> dict:
    """In the worker: the work counted (``count_work``) while the learner's split_user_gemm runs on
    WORK_PROBE, by operator. Plain data, judged by ``judge_split_work``."""
    inputs = split_inputs(WORK_PROBE, torch.Generator().manual_seed(0))
    got, by_op, reads = count_work(entry, **inputs)
    # the count judges this run, so it must be right too (the grader fails it otherwise: _judged)
    expected = capstone_reference(**_in_float64(inputs))
    right = (
        type(got) is torch.Tensor
        and got.shape == expected.shape
        and close_enough(got.double(), expected, SPLIT_TOLERANCE[WORK_PROBE.dtype])
    )
    return {"shape": list(WORK_PROBE.shape), "work": sum(by_op.values()), "by_op": by_op, "python_reads": reads,
            "right": bool(right)}  # fmt: skip


def _in_float64(inputs: dict) -> dict:
    """The reference's arguments from a case's inputs: the float tensors in float64, no output."""
    return {k: v.double() if k in ("w", "e_user", "e_cand") else v for k, v in inputs.items() if k != "out"}


def _gflop(n: float) -> str:
    return f"{n / 1e9:.0f} GFLOP"


def judge_split_work(facts: dict) -> list[tuple[bool, str, list[str]]]:
    """In the grader's process: the work counted must stay near the decomposed FLOPs, and the
    tensors' values must stay in torch."""
    decomposed, naive = split_flops(WORK_PROBE)
    got = int(facts["work"])
    reads = int(facts["python_reads"])
    B, U, M, Ku, Kc, N = WORK_PROBE.shape
    where = f"on B={B} candidates of U={U} users (1 and 63 each), M={M}, Ku={Ku}, Kc={Kc}, N={N}"
    top = sorted(((int(n), str(op)) for op, n in dict(facts["by_op"]).items()), reverse=True)[:4]
    ops = ", ".join(f"{op} {n:,}" for n, op in top) or "none"
    published = split_flops(Case(PUBLISHED, BF16, "published"))
    counts = [
        f"the grader counted {got:,} units of work {where} (largest: {ops});",
        f"decomposed, the two GEMMs take 2*M*N*(U*Ku + B*Kc) = {decomposed:,} FLOPs; with the user GEMM once per "
        f"candidate, 2*M*N*B*(Ku + Kc) = {naive:,}.",
        f"At the published shape that is {_gflop(published[0])} against {_gflop(published[1])}.",
    ]
    if reads > PYTHON_READS:
        return [
            (
                False,
                f"split_user_gemm read {reads:,} tensor values into Python (tolist, item, float, numpy)",
                counts[1:2]
                + [
                    "The grader counts torch's work; values computed with in Python are out of its sight. "
                    "Compute both parts with torch: torch.matmul for the GEMMs, indexing for the gather."
                ],
            )
        ]
    if got <= WORK_FACTOR * decomposed:
        return [(True, "decomposed", [f"decomposed: {got:,} units of work counted, {decomposed:,} FLOPs decomposed"])]
    if got >= naive / 2:
        return [
            (
                False,
                f"split_user_gemm does {got / decomposed:.1f}x the decomposed work: the user GEMM runs once "
                "per candidate, not once per user",
                counts
                + [
                    "Multiplying W by each candidate's copy of its user's features (torch.cat, W_u @ "
                    "E_user[user_of], or a broadcast multiply and a sum) repeats the user GEMM B / U times. "
                    "Compute user_out = W_u @ E_user once, (U, M, N), and gather user_out[user_of] afterwards.",
                ],
            )
        ]
    return [
        (
            False,
            f"the grader counted {got:,} units of work, more than {WORK_FACTOR:g}x the decomposed {decomposed:,} FLOPs",
            counts,
        )
    ]


SPLIT_HINTS = [
    "Split W by its columns: w_u = w[:, :ku] (M, Ku) meets the user's features, w_c = w[:, ku:] (M, Kc) the "
    "candidate's. A product over a concatenated K is the sum of the products over its parts: "
    "W @ concat(e_u, e_c) = w_u @ e_u + w_c @ e_c.",
    "The user part depends on the user only: user_out = torch.matmul(w_u, e_user) is (U, M, N), one GEMM per "
    "user. The candidate part: cand = torch.matmul(w_c, e_cand), (B, M, N).",
    "Then out = cand + user_out[user_of]: indexing with the (B,) tensor user_of gathers each candidate's own "
    "user. Do not derive the user from b's position (b // 70): the users here have different numbers of "
    "candidates, some only one.",
    "The grader counts the work of every torch operation your function runs (FLOPs of the matrix products, "
    "elements of the rest): 2*M*N*(U*Ku + B*Kc) decomposed against 2*M*N*B*(Ku + Kc) with the concat, 201 "
    "against 464 GFLOP at the published shape. torch.cat, w_u @ e_user[user_of], or a broadcast multiply and "
    "a sum multiply each user's features once per candidate.",
]

register(
    TaskSpec(
        name="split_user_gemm",
        chapter="10",
        title="Step 1, decompose: the user GEMM once per user, the candidate GEMM, a gather-add (torch; "
        "cases: (B, U, M, Ku, Kc, N))",
        entry="split_user_gemm",
        make_inputs=split_inputs,
        reference=capstone_reference,
        cases=_split_cases,
        outputs=(),
        tolerance=SPLIT_TOLERANCE,
        bytes_moved=None,  # torch: the course times step 3 (fused_broadcast), whose baselines include this
        flops=None,
        torch_task=True,
        diagnose=_split_diagnose,
        probe=f"{__name__}:probe_split_work",
        judge=judge_split_work,
        timeout_s=60.0,
        hints=SPLIT_HINTS,
    )
)


# --------------------------------------------------------------------------------------------------
# step 2: pad_k


def pad_inputs(case: Case, gen: torch.Generator) -> dict:
    M, Ku, Kc = case.shape
    return {"w_c": random_tensor(case, gen, shape=(M, Ku + Kc))[:, Ku:]}  # (M, Kc): a view of W


def pad_reference(w_c):
    return w_c  # (M, Kc): the values; the layout is judged apart (check_layout)


def _pad_cases(mode: str) -> list[Case]:
    table = [
        ((33, 5, 866), BF16, "published K"),  # 1732 bytes -> 1744 (872 elements)
        ((1, 1, 1), F32, "tiny"),  # 4-byte rows: padded to 16 bytes
        ((3, 2, 1), F16, "tiny"),  # 2-byte rows: 8 elements
        ((5, 3, 13), F32, "tail"),  # 52 bytes -> 64
        ((17, 7, 866), F16, "published K"),
        ((64, 1178, 866), BF16, "published W"),  # W_c starts 2356 bytes into rows 4088 bytes apart
        ((9, 4, 24), F16, "aligned K"),  # 48-byte rows already; w_c still starts 8 bytes in
        ((6, 3, 64), F32, "aligned K"),
        ((7, 5, 30), F16, "misaligned"),  # w itself one element into its buffer
    ]
    return [Case(shape, dt, label, misaligned=label == "misaligned") for shape, dt, label in table]


def padded_width(kc: int, itemsize: int) -> int:
    """The fewest elements, at least kc, that make a multiple of 16 bytes."""
    per_16 = 16 // itemsize
    return -(-kc // per_16) * per_16


MAX_PAD_BYTES = 128  # padding beyond this per row is waste: step 2 asks for the padded width, not more

_PAD_ZERO = (
    "The padding must be zero: a kernel whose K loop runs over the padded width, unmasked, multiplies it, "
    "and zeros add nothing. torch.empty leaves whatever the memory held; allocate with torch.zeros, or use "
    "torch.nn.functional.pad(w_c, (0, Kp - Kc)), which writes the zeros and the copy in one go."
)


def _pad_layout_problem(shape, strides, ptr_mod_16: int, kc: int, itemsize: int, shares: bool):
    """Why a result's layout is not step 2's, as (summary, details), or None."""
    M = shape[0]
    need = padded_width(kc, itemsize)
    why_16 = (
        f"Rows of {kc} elements of {itemsize} bytes are {kc * itemsize} bytes: the row stride must be a multiple "
        f"of 16 bytes, {need} elements here ({need * itemsize} bytes), or any larger multiple of "
        f"{16 // itemsize} elements."
    )
    if shares:
        return (
            "it returned a view of the input W: a copy is what makes the rows aligned (W_c's rows are W's)",
            [why_16, "Allocate an (M, Kp) buffer, copy w_c into its first Kc columns and return that view."],
        )
    if len(strides) != 2 or strides[1] != 1:
        return f"its strides are {tuple(strides)}: the columns must be next to each other (stride 1)", [why_16]
    row_stride = strides[0]
    if M > 1 and row_stride < kc:
        return f"its rows are {row_stride} elements apart, fewer than the {kc} in a row", [why_16]
    if M > 1 and (row_stride * itemsize) % 16:
        return (
            f"its rows are {row_stride} elements ({row_stride * itemsize} bytes) apart, no multiple of 16 bytes",
            [why_16, "w_c.contiguous() copies without padding: its rows are Kc elements apart."],
        )
    if ptr_mod_16:
        return (
            f"its first row starts {ptr_mod_16} bytes past a 16-byte boundary (data_ptr() % 16 = {ptr_mod_16})",
            ["A fresh allocation starts on a 16-byte boundary; a view into it that skips a few elements does not."],
        )
    if M > 1 and (row_stride - kc) * itemsize >= MAX_PAD_BYTES:
        return (
            f"its rows are padded by {row_stride - kc} elements ({(row_stride - kc) * itemsize} bytes), more "
            f"than {MAX_PAD_BYTES} bytes: the next multiple of 16 bytes is {need} elements",
            [why_16],
        )
    return None


def check_pad_layout(case: Case, meta: dict, span: torch.Tensor | None) -> tuple[bool, str, list[str]]:
    """In the grader's process, after the values passed: the returned tensor's layout as the worker
    read it (strides, alignment, whether it is a view of W) and its rows' span, padding included."""
    shape, strides = [int(s) for s in meta.get("size", [])], [int(s) for s in meta.get("stride", [])]
    M, kc = shape
    itemsize = torch.empty((), dtype=case.dtype).element_size()
    problem = _pad_layout_problem(shape, strides, int(meta.get("ptr_mod_16", 0)), kc, itemsize,
                                  bool(meta.get("shares_input")))  # fmt: skip
    if problem:
        return False, problem[0], problem[1]
    row_stride = strides[0] if M > 1 else max(strides[0], kc)
    flat = span.view(case.dtype) if span is not None and span.numel() % itemsize == 0 else torch.empty(0)
    whole = min(flat.numel() // row_stride, M)  # rows whose padding lies inside the allocation
    pad = flat[: whole * row_stride].view(whole, row_stride)[:, kc:].contiguous()
    if pad.numel() and bool((pad.view(torch.uint8) != 0).any()):
        return False, f"the padding is not zero: {int((pad != 0).sum())} of its {pad.numel()} elements", [_PAD_ZERO]
    return True, f"aligned: rows {row_stride} elements ({row_stride * itemsize} bytes) apart, zero padding", []


# The zero check with fresh allocations poisoned: in the worker, pad_k runs under a torch function mode
# that fills every torch.empty-like result with the grader's NaN, so padding left as allocated cannot
# pass as zero by luck (fresh pages from the system are zero).
PAD_PROBE = Case((6, 5, 30), F16, "fresh allocations poisoned")


def probe_pad_zero(module, entry) -> dict:
    """In the worker: pad_k on PAD_PROBE with fresh allocations poisoned; how much of the padding is not zero."""
    from torch.overrides import TorchFunctionMode

    from ..compare import poison

    fresh = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}

    class PoisonFresh(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if getattr(func, "__name__", "") in fresh and isinstance(out, torch.Tensor) and out.is_floating_point():
                poison(out)
            return out

    made = pad_inputs(PAD_PROBE, torch.Generator().manual_seed(0))
    with PoisonFresh():
        padded = entry(made["w_c"])
    w_c = made["w_c"]
    if (
        type(padded) is not torch.Tensor
        or padded.shape != w_c.shape
        or padded.stride(1) != 1
        or padded.dtype != w_c.dtype
        or not torch.equal(padded, w_c)
    ):
        # the padding is read off this run, so it must be right too (the grader fails it otherwise: _judged)
        return {"checked": False, "right": False}
    M, kc = padded.shape
    row_stride = padded.stride(0)
    room = padded.untyped_storage().nbytes() // padded.element_size() - padded.storage_offset()
    whole = min(room // row_stride, M) if row_stride >= kc else 0
    if not whole or row_stride == kc:
        return {"checked": True, "pad_elements": 0, "nonzero": 0}
    pad = padded.as_strided((whole, row_stride - kc), (row_stride, 1), padded.storage_offset() + kc)
    return {
        "checked": True,
        "pad_elements": int(pad.numel()),
        "nonzero": int((pad != 0).sum()),  # NaN != 0 too
        "nan": int(torch.isnan(pad).sum()),
    }


def judge_pad_zero(facts: dict) -> list[tuple[bool, str, list[str]]]:
    if not facts.get("checked"):
        return [(True, "zero padding", [])]  # no padded W_c came back: the grader fails the probe's run
    nonzero, total = int(facts.get("nonzero", 0)), int(facts.get("pad_elements", 0))
    if nonzero:
        left = " (NaN: never written after the allocation)" if int(facts.get("nan", 0)) else ""
        return [
            (
                False,
                f"the padding is not zero when fresh allocations hold garbage: {nonzero} of its {total} elements{left}",
                [
                    "The grader ran pad_k with every torch.empty-like allocation filled with NaN, as memory "
                    "reused from an earlier tensor can be. " + _PAD_ZERO
                ],
            )
        ]
    return [(True, "zero padding", ["zero padding, also with fresh allocations filled with NaN"])]


PAD_HINTS = [
    "For w_c's rows to start on 16-byte boundaries the row stride, in bytes, must be a multiple of 16: "
    "Kp = ceil(Kc * itemsize / 16) * 16 / itemsize elements (w_c.element_size() is the itemsize). 866 bf16 "
    "elements are 1732 bytes: Kp = 872 (1744 bytes).",
    "One allocation of the padded width, zeros: buf = torch.zeros(M, Kp, dtype=w_c.dtype, device=w_c.device) "
    "(a fresh allocation starts on a 16-byte boundary: torch aligns to 64 bytes on the CPU, more on a GPU). "
    "Copy w_c into buf[:, :Kc] and return that view: shape (M, Kc), strides (Kp, 1).",
    "torch.nn.functional.pad(w_c, (0, Kp - Kc))[:, :Kc] does the allocation, the zeros and the copy in one "
    "call. w_c.contiguous() does not pad: its rows stay Kc elements apart. torch.empty leaves the padding "
    "as garbage: the grader fills fresh allocations with NaN to show it.",
    "When Kc * itemsize is already a multiple of 16, Kp = Kc and the copy is still needed: w_c's own rows "
    "start Ku elements into W's, and W's rows are Ku + Kc apart.",
]

register(
    TaskSpec(
        name="pad_k",
        chapter="10",
        title="Step 2, align: W_c copied into rows a multiple of 16 bytes apart, zero padding (torch; "
        "cases: (M, Ku, Kc))",
        entry="pad_k",
        make_inputs=pad_inputs,
        reference=pad_reference,
        cases=_pad_cases,
        outputs=(),
        tolerance=dict(DEFAULT_TOLERANCE),
        bytes_moved=None,
        flops=None,
        torch_task=True,
        check_layout=check_pad_layout,
        probe=f"{__name__}:probe_pad_zero",
        judge=judge_pad_zero,
        timeout_s=60.0,
        hints=PAD_HINTS,
    )
)


# --------------------------------------------------------------------------------------------------
# step 3: fused_broadcast


def _broadcast_cases(mode: str) -> list[Case]:
    def counts(*c):
        return (("counts", c),)

    def per_user(n):
        return (("per_user", n),)

    table = [
        # first, and again at the end: more candidates than users, so b is no user's number
        ((3, 2, 2, 3, 2, 5), F16, "tiny", counts(1, 2)),
        ((1, 1, 1, 1, 1, 1), F32, "tiny", ()),
        ((12, 4, 33, 40, 18, 17), F32, "tail", ()),  # no multiple of any block; random spread
        ((9, 5, 17, 24, 13, 10), F16, "users with one candidate", counts(1, 1, 4, 1, 2)),
        # W's rows 107 elements apart, W_c 37 in: the launcher pads W
        ((14, 3, 45, 37, 70, 24), F16, "padded W", per_user(5)),
        ((8, 2, 40, 64, 32, 32), F16, "aligned W", ()),  # rows 192 bytes apart, W_c 128 bytes in
        ((10, 2, 21, 19, 27, 18), F16, "misaligned", ()),  # every base 2 bytes off 16
        ((4, 2, 24, 200, 136, 16), F16, "long K", counts(1, 3)),  # several K steps and a short one
        ((12, 6, 16, 32, 16, 8), F32, "many users", per_user(2)),
        ((8, 2, 130, 40, 66, 40), F32, "large", ()),  # M = 130: three tile-rows, the last nearly empty
    ]
    if mode != runtime.CPU:
        table += [
            ((9, 5, 17, 24, 13, 10), BF16, "users with one candidate", counts(1, 1, 4, 1, 2)),
            ((14, 3, 45, 37, 70, 24), BF16, "padded W", per_user(5)),
            ((64, 4, 130, 72, 66, 40), F32, "large", ()),
            # the published shape with 2 users (140 candidates): the descriptor path, W padded
            ((140, 2, 433, 1178, 866, 256), BF16, "published shape", per_user(70)),
            ((140, 2, 433, 1178, 866, 256), F16, "published shape", per_user(70)),
            # the course's shape with fewer candidates: aligned, no padding, the descriptor path
            ((256, 2, 256, 512, 256, 128), BF16, "course shape", per_user(128)),
            ((64, 16, 256, 512, 256, 128), BF16, "many users", per_user(4)),
        ]
    # bf16 on a GPU only: tl.dot on bf16 is wrong in the interpreter; CPU mode grades fp16 and fp32
    return [
        Case(shape, dt, label, misaligned=label == "misaligned", gpu_only=dt == BF16, params=p)
        for shape, dt, label, p in table
    ]


def _itemsize(case: Case) -> int:
    return torch.empty((), dtype=case.dtype).element_size()


def capstone_bytes(case: Case) -> int:
    """The fewest bytes: every input read once, out written once. W (M, Ku + Kc), E_user (U, Ku, N),
    E_cand (B, Kc, N), user_of (B,) int64, out (B, M, N); user_out (U, M, N) and W's padded copy live
    in L2. At the published shape in bf16: 692 MB, 0.162 ms at 4.27 TB/s. GPU_FACTS.md's 0.159 ms
    counts E_cand and out only (681 MB); W and E_user add 2%. With 4 candidates per user E_user is 67 MB,
    a fifth of the total: 336 MB, 0.079 ms (E_cand and out alone: 0.063 ms)."""
    B, U, M, Ku, Kc, N = case.shape
    return (M * (Ku + Kc) + U * Ku * N + B * Kc * N + B * M * N) * _itemsize(case) + B * 8


def capstone_flops(case: Case) -> int:
    """The decomposed problem: the user GEMM once per user, the candidate GEMM, one add per element
    of out: 2*M*N*(U*Ku + B*Kc) + B*M*N. At the published shape: 200.6 GFLOP, 0.296 ms at cuBLAS's
    677 TFLOP/s (GPU_FACTS.md: fp16 8192^3 in the same run), 0.260 ms at the 771 of the bench record's
    peaks. GPU_FACTS.md's 0.290 ms is the candidate GEMM alone at 677 (196.6 GFLOP); the user GEMM adds
    2% there, and half as much again as the candidate GEMM with 4 candidates per user (51.5 against
    34.4 GFLOP: 0.076 ms, not 0.051)."""
    B, U, M, Ku, Kc, N = case.shape
    return 2 * M * N * (U * Ku + B * Kc) + B * M * N


BENCH_CASES = [
    Case(PUBLISHED, BF16, "published", params=(("per_user", 70),)),
    Case(PUBLISHED, F16, "published", params=(("per_user", 70),)),
    Case(COURSE, BF16, "course", params=(("per_user", 128),)),
    Case(MANY_USERS, BF16, "many users", params=(("per_user", 4),), gpu_only=True),
]


def _compiled(fn, mode: str):
    """torch.compile of ``fn`` in ``mode`` at its best (``timing.compiled_at_best``: max-autotune
    without its CUDA graphs' input copy), compiled on the first (warm-up) call; ``run.compile_config()``
    says which way it took."""
    from .. import timing

    state: dict = {}

    def run(**inputs):
        if "fn" not in state:
            state["fn"], state["how"], _ = timing.compiled_at_best(fn, mode, inputs)
        return state["fn"](**inputs)

    run.compile_config = lambda: state.get("how")  # type: ignore[attr-defined]
    return run


def _cublas_candidate_padded():
    """cuBLAS's batched GEMM on the candidate part alone, W_c (M, Kp) @ E_cand (B, Kp, N), with BOTH
    operands copied into K padded to 16-byte rows (zeros beyond Kc) on the first (warm-up) call and the
    copies left out of the time. W_c's copy is a weight's, made once at load; E_cand's is request data:
    at the published shape in bf16 that copy reads 454 MB and writes 457, about 0.21 ms at 4.27 TB/s,
    which a real request would pay every time and this baseline does not. The course's kernels
    read E_cand through 3-D TMA descriptors (its K tail filled with zeros by TMA) and pad only W's rows.
    No user part either: this is a bar for the candidate GEMM, not the layer (GPU_FACTS.md: 0.963 ms at
    K = 866, 0.336 ms padded to 872, bf16 H200)."""
    state: dict = {}

    def run(w, e_user, e_cand, user_of, ku):
        if "a" not in state:
            M, K = w.shape
            B, Kc, N = e_cand.shape
            kp = padded_width(Kc, w.element_size())
            state["a"] = w.new_zeros(M, kp)
            state["a"][:, :Kc] = w[:, ku:]
            state["e"] = e_cand.new_zeros(B, kp, N)
            state["e"][:, :Kc] = e_cand
        return torch.matmul(state["a"], state["e"])  # (B, M, N), no user part

    return run


def eager_forms(w, e_user, e_cand, user_of, ku, w_padded):
    """The plain-PyTorch ways to compute the layer that a user who knows cuBLAS would try, each the user
    GEMM once per user and the candidate GEMM in one ``torch.baddbmm`` with the gathered user part as
    its input (C = C + A @ B, cuBLAS's own epilogue). ``w_padded``: W's candidate part copied once
    into rows of ``padded_width`` elements, zeros beyond Kc (a weight, padded at load). They differ in
    how they meet cuBLAS's fast kernels, which want K a multiple of 8 (16 bytes): at Kc = 866 cuBLAS
    took 0.93-0.96 ms for the candidate GEMM, 0.30 with K padded in both operands (the H200,
    results/experiment_capstone_h200.json)."""
    B, Kc, N = e_cand.shape
    M, kp = w_padded.shape
    w_c = w_padded[:, :Kc]  # rows 16-byte aligned, Kc wide

    def gathered():
        return torch.matmul(w[:, :ku], e_user)[user_of]  # (B, M, N): the user GEMM once per user

    def k_as_is():
        return torch.baddbmm(gathered(), w_c.expand(B, M, Kc), e_cand)

    def e_padded_per_call():  # E_cand is request data: its padded copy is paid on every call
        e_p = torch.nn.functional.pad(e_cand, (0, 0, 0, kp - Kc))
        return torch.baddbmm(gathered(), w_padded.expand(B, M, kp), e_p)

    def k_split():  # K cut at a 16-byte multiple, the few columns left added by a second, thin baddbmm
        k_cut = Kc - Kc % max(1, 16 // e_cand.element_size())
        out = torch.baddbmm(gathered(), w_c[:, :k_cut].expand(B, M, k_cut), e_cand[:, :k_cut])
        if k_cut < Kc:
            out.baddbmm_(w_c[:, k_cut:].expand(B, M, Kc - k_cut), e_cand[:, k_cut:])
        return out

    return {"one baddbmm, K as it is": k_as_is, "E_cand padded per call, one baddbmm": e_padded_per_call,
            "K split at 16 bytes, two baddbmm": k_split}  # fmt: skip


def _seconds_per_call(fn, device, calls: int = 3) -> float:
    """Seconds per call of ``fn``, measured as the bench measures (``timing.bench``: L2 flushed before
    each call, CUDA events) on a GPU, so the form picked is the one that is fastest in the record; on the
    CPU a few calls by the clock (only the pick's plumbing is exercised there)."""
    if device.type == "cuda":
        from .. import timing

        return timing.bench(fn, warmup_ms=5, rep_ms=20).median_ms / 1e3
    fn()  # warm-up
    began = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - began) / calls


def best_torch_eager():
    """What a user who knows PyTorch writes for the layer, at its best: on the first (warm-up) call W's
    candidate part is padded once (a weight), each of ``eager_forms`` is timed on these inputs, and the
    fastest is kept; ``run.config()`` names it. The honest yardstick for step 4: what a reader would pick
    instead. (The record of 2026-12-03 has the first form only, which was no better than step 1.)"""
    state: dict = {}

    def run(w, e_user, e_cand, user_of, ku):
        if "w_padded" not in state:
            M, Kc = w.shape[0], w.shape[1] - ku
            padded = w.new_zeros(M, padded_width(Kc, w.element_size()))
            padded[:, :Kc] = w[:, ku:]
            state["w_padded"] = padded
            forms = eager_forms(w, e_user, e_cand, user_of, ku, padded)
            state["config"] = min(forms, key=lambda name: _seconds_per_call(forms[name], w.device))
        return eager_forms(w, e_user, e_cand, user_of, ku, state["w_padded"])[state["config"]]()

    run.config = lambda: state.get("config")  # type: ignore[attr-defined]
    return run


def _bench_variants(case: Case) -> dict:
    # torch_eager (the task's baseline) is naive_eager, and compile_modes compile it: the concat
    # materialized and one batched GEMM over Ku + Kc. These are step 1 and cuBLAS beside it.
    return {
        "decomposed_eager": decomposed_eager,
        "best_torch_eager": best_torch_eager(),
        "decomposed_torch_compile": _compiled(decomposed_eager, "default"),
        "decomposed_torch_compile_max-autotune": _compiled(decomposed_eager, "max-autotune"),
        "cublas_candidate_padded": _cublas_candidate_padded(),
    }


# --------------------------------------------------------------------------------------------------
# the fusion check: the user GEMM, then one candidate kernel that stores out once, never reads it
# back, reads no E_user, and no (B, M, N) intermediate anywhere


class _Traffic:
    """An access listener (course_lib.hooks.access_listeners): for each kernel run (each entry of the
    interpreter's launch stack), how many times each element of ``out`` was stored, how many of its
    elements were loaded and how many elements of E_user; and every byte any kernel touched that lies
    in no input and not in out (intermediates: user_out, a padded W, a broadcast copy)."""

    def __init__(self, out: torch.Tensor, inputs: dict):
        import numpy as np

        from ..hooks import element_addresses

        self.addresses = element_addresses(out)  # (B * M * N,) byte addresses, row-major
        self.order = np.argsort(self.addresses)
        self.sorted = self.addresses[self.order]
        self.e_user = self._span(inputs["e_user"])
        self.known = [self._span(t) for t in (*inputs.values(), out)]
        self.runs: list[dict] = []
        self.temp: list = []
        self.last_run = None

    @staticmethod
    def _span(t: torch.Tensor) -> tuple[int, int]:
        start = t.data_ptr()
        return start, start + (1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride()))) * t.element_size()

    def __call__(self, kind, kernel, addresses, active, itemsize) -> None:
        import numpy as np

        from .. import hooks

        run = hooks._launch_stack[-1] if hooks._launch_stack else None
        if run is not self.last_run or not self.runs:
            self.runs.append(
                {"kernel": str(kernel), "stores": np.zeros(self.addresses.size, dtype=np.int64), "loaded": 0, "user": 0}
            )
            self.last_run = run
        live = np.asarray(addresses, dtype=np.uint64)[np.asarray(active, dtype=bool)].reshape(-1)
        if live.size == 0:
            return
        lo, hi = self.e_user
        if kind == "load":
            self.runs[-1]["user"] += int(((live >= lo) & (live < hi)).sum())
        outside = np.ones(live.shape, dtype=bool)
        for lo, hi in self.known:
            outside &= (live < lo) | (live >= hi)
        if outside.any():
            self.temp.append((live[outside][:, None] + np.arange(itemsize, dtype=np.uint64)[None, :]).reshape(-1))
        at = np.minimum(np.searchsorted(self.sorted, live), self.sorted.size - 1)
        hit = self.sorted[at] == live
        if not hit.any():
            return
        if kind == "load":
            self.runs[-1]["loaded"] += int(hit.sum())
        else:  # a store or an atomic
            np.add.at(self.runs[-1]["stores"], self.order[at[hit]], 1)

    def facts(self) -> tuple[list[dict], int]:
        import numpy as np

        runs = []
        for run in self.runs:
            stores = run["stores"]
            runs.append(
                {
                    "kernel": run["kernel"],
                    "never": int((stores == 0).sum()),
                    "once": int((stores == 1).sum()),
                    "more": int((stores > 1).sum()),
                    "most": int(stores.max()) if stores.size else 0,
                    "loaded": run["loaded"],
                    "user_loads": run["user"],
                }
            )
        temp = int(np.unique(np.concatenate(self.temp)).size) if self.temp else 0
        return runs, temp


# (B, U, M, Ku, Kc, N): W misaligned (rows 23 fp16 elements apart: the launcher pads it) and aligned
# (rows 48 bytes apart, W_c 32 bytes in: no padding), 32 candidates over 2 users (5 and 27). A (B, M, N)
# intermediate is 32 / 2 = 16 times user_out's size in elements.
FUSION_PROBES = (
    Case((32, 2, 20, 13, 10, 16), F16, "padded W", params=(("counts", (5, 27)),)),
    Case((32, 2, 20, 16, 8, 16), F16, "aligned W", params=(("counts", (5, 27)),)),
)


def intermediate_allowance(shape) -> int:
    """Bytes of intermediates a fused launcher may touch: user_out in float32 and a padded copy of W
    (even in float32, with 16 elements of padding per part)."""
    B, U, M, Ku, Kc, N = shape
    return 4 * U * M * N + 4 * M * (Ku + Kc + 32)


def probe_fusion(module, entry) -> dict:
    """In the worker: run the learner's launcher on FUSION_PROBES and record its Triton launches, what
    each kernel run did to out and E_user, and the bytes of intermediates. On a GPU no access can be
    seen: the facts say so."""
    if not runtime.is_cpu():
        return {"mode": runtime.GPU}
    from .. import hooks

    shapes, right = [], True
    for case in FUSION_PROBES:
        inputs = broadcast_inputs(case, torch.Generator().manual_seed(0))
        out = inputs["out"].fill_(float("nan"))
        listener = _Traffic(out, {k: v for k, v in inputs.items() if isinstance(v, torch.Tensor) and k != "out"})
        hooks.access_listeners.append(listener)
        try:
            with hooks.watch_launches() as watch:
                entry(**inputs)
        finally:
            hooks.access_listeners.remove(listener)
        runs, temp = listener.facts()
        # the record judges this run, so it must be right too (the grader fails it otherwise: _judged)
        right = right and close_enough(
            out.double(), capstone_reference(**_in_float64(inputs)), BROADCAST_TOLERANCE[case.dtype]
        )
        shapes.append(
            {
                "shape": list(case.shape),
                "label": case.label,
                "launches": list(watch.launches),
                "runs": runs,
                "temp": temp,
            }
        )
    return {"mode": runtime.CPU, "shapes": shapes, "right": bool(right)}


def _published_cost(factor: float, what: str) -> str:
    """What moving ``factor`` x (B, M, N) bf16 elements costs at the published shape."""
    B, U, M, Ku, Kc, N = PUBLISHED
    moved = factor * B * M * N * 2
    return (
        f"at the published shape ({B} candidates, M = {M}, N = {N}, bf16) {what} is {moved / 1e6:.0f} MB, "
        f"{moved / COPY_BANDWIDTH * 1e3:.3f} ms at 4.27 TB/s, beside a memory floor of "
        f"{capstone_bytes(Case(PUBLISHED, BF16, 'published')) / COPY_BANDWIDTH * 1e3:.3f} ms for the whole layer"
    )


_FUSED = (
    "Fused, the candidate GEMM's epilogue loads user_of[b], then the user's tile of user_out (U x M x N, "
    "small enough to stay in L2), adds it to the float32 accumulator and stores out once."
)


def judge_fusion(facts: dict) -> list[tuple[bool, str, list[str]]]:
    """In the grader's process: one kernel stores out, each element once, and reads none of it back;
    that kernel reads no E_user (the user GEMM ran once per user, before it); no kernel touches a
    (B, M, N) intermediate."""
    if facts.get("mode") == runtime.GPU:
        return [
            (
                True,
                "fusion checked in CPU mode",
                [
                    "Whether out is written once and never read back is checked in CPU mode, where the "
                    "interpreter sees every access: COURSE_MODE=cpu python -m course_lib check fused_broadcast"
                ],
            )
        ]
    notes = []
    for seen in facts.get("shapes") or []:
        B, U, M, Ku, Kc, N = (int(v) for v in seen.get("shape", (0,) * 6))
        where = f"on B, U, M, Ku, Kc, N = {B}, {U}, {M}, {Ku}, {Kc}, {N} ({seen.get('label')})"
        runs = list(seen.get("runs") or [])
        launches = [str(k) for k in seen.get("launches", [])]
        touching = [r for r in runs if int(r.get("once", 0)) + int(r.get("more", 0)) or int(r.get("loaded", 0))]
        kernels = list(dict.fromkeys(str(r.get("kernel")) for r in touching))
        if not touching:
            return [(False, f"no kernel stored out {where}", [])]
        if len(kernels) > 1:
            names = ", ".join(f"`{k}`" for k in kernels)
            return [
                (
                    False,
                    f"{len(kernels)} kernels wrote or read out ({names}) {where}: the broadcast is not fused",
                    [
                        "A second kernel over out sends the whole (B, M, N) result through memory and back: "
                        + _published_cost(2, "one more read and write of out")
                        + ".",
                        _FUSED,
                    ],
                )
            ]
        last = touching[-1]  # an autotuner runs each config first; the last run is the one it kept
        kernel = last.get("kernel")
        if int(last.get("more", 0)):
            return [
                (
                    False,
                    f"`{kernel}` stored {last['more']} of the {B * M * N} elements of out more than once (up to "
                    f"{last.get('most')} times) {where}",
                    [_published_cost(1, "one more write of out") + ".", _FUSED],
                )
            ]
        if int(last.get("loaded", 0)):
            return [
                (
                    False,
                    f"`{kernel}` loaded {last['loaded']} elements of out {where}: out read back is an "
                    "intermediate in memory",
                    [_published_cost(1, "one more read of out") + ".", _FUSED],
                )
            ]
        if int(last.get("never", 0)):
            return [(False, f"{last['never']} of the {B * M * N} elements of out were never stored {where}", [])]
        if int(last.get("user_loads", 0)):
            return [
                (
                    False,
                    f"`{kernel}`, the kernel that stores out, loaded {last['user_loads']} elements of E_user {where}: "
                    "the user GEMM runs per candidate",
                    [
                        "Multiplying W_u by each candidate's user features repeats the user GEMM B / U times "
                        "(at the published shape 464 GFLOP in all instead of 201). Compute user_out once, in "
                        "its own launch, and let the candidate kernel's epilogue read it.",
                    ],
                )
            ]
        temp, allowed = int(seen.get("temp", 0)), intermediate_allowance((B, U, M, Ku, Kc, N))
        if temp > allowed:
            return [
                (
                    False,
                    f"the kernels touched {temp} bytes of intermediates {where}, more than user_out and a padded "
                    f"W take ({allowed}): a (B, M, N) intermediate ({B * M * N} elements; the user part "
                    "broadcast to every candidate?)",
                    [
                        "Writing user_out[user_of] out as a (B, M, N) tensor and reading it back in the epilogue "
                        "moves it through memory twice: "
                        + _published_cost(4, "a float32 copy, written and read")
                        + ".",
                        _FUSED,
                    ],
                )
            ]
        notes.append(
            f"{seen.get('label')}: {len(launches)} launch{'es' * (len(launches) != 1)} "
            f"({', '.join(launches)}); `{kernel}` stored out once, read none of it back; {temp} bytes of "
            "intermediates"
        )
    return [(True, "the broadcast is fused", ["fused: " + "; ".join(notes)])]


BROADCAST_HINTS = [
    "The GEMM's main loop is given: after it, acc holds the tile of W_c @ E_cand[b] (or W_u @ E_user[u]) in "
    "float32. In add_user_tile, user = tl.load(user_of_ptr + batch) is one number, the candidate's user; then "
    "load that user's (BLOCK_M, BLOCK_N) tile of user_out at user * stride_uu + rows[:, None] * stride_um + "
    "cols[None, :] * stride_un and return acc + tile.",
    "Mask both the tile's load and the store with (rows[:, None] < M) & (cols[None, :] < N): M = 433 is no "
    "multiple of 128, so the last tile-row overhangs by 79 rows, and the last user's tile would be read past "
    "the end of user_out (the grader reports such loads). Store once: "
    "tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=mask).",
    "The launcher: user_out = torch.empty(U, M, N, dtype=torch.float32, device=out.device); the user GEMM on a "
    "(tiles, U) grid with ADD_USER=False writing user_out; then the candidate GEMM on (tiles, B) with "
    "ADD_USER=True writing out and reading user_out and user_of. float32 keeps out rounded once.",
    "No (B, M, N) copy of the user part (user_out[user_of] is one: 454 MB in float32 at the published shape) "
    "and no second pass over out: in CPU mode the grader sees every access, and only one kernel may store "
    "out, each element once, never reading it back.",
]

register(
    TaskSpec(
        name="fused_broadcast",
        chapter="10",
        title="Step 3, fuse: the user part added in the candidate GEMM's epilogue by index lookup "
        "(cases: (B, U, M, Ku, Kc, N))",
        entry="fused_broadcast",
        make_inputs=broadcast_inputs,
        reference=capstone_reference,
        baseline=naive_eager,
        cases=_broadcast_cases,
        tolerance=BROADCAST_TOLERANCE,
        diagnose=capstone_diagnose,
        bytes_moved=capstone_bytes,
        flops=capstone_flops,
        tensor_cores=True,
        bench_cases=list(BENCH_CASES),
        bench_variants=_bench_variants,
        partial_variants=("cublas_candidate_padded",),
        compile_modes=("default", "max-autotune"),
        probe=f"{__name__}:probe_fusion",
        judge=judge_fusion,
        hints=BROADCAST_HINTS,
    )
)


def bench_case(label: str, dtype: torch.dtype = BF16) -> Case:
    """One of the benchmark cases by label ("published", "course", "many users") and dtype."""
    for case in BENCH_CASES:
        if case.label == label and case.dtype == dtype:
            return case
    found = next(c for c in BENCH_CASES if c.label == label)
    return replace(found, dtype=dtype)
