"""Chapter 08, alignment: 16-byte vector loads where the compiler cannot see the alignment by itself.

Triton marks an integer argument "divisible by 16" when its value is a multiple of 16 *elements*,
and a pointer when its address is a multiple of 16 *bytes*. Rows 1016 fp16 elements apart are 2032
bytes apart, a multiple of 16 bytes, but 1016 is no multiple of 16: the compiler cannot prove that
a row starts on a 16-byte boundary and reads it 2 bytes at a time, unless the launcher, which can
see the strides, says so with ``tl.multiple_of``. A launcher that says so where it is false gets
misaligned 16-byte loads on a GPU; in the interpreter the values still come out right, so both are
checked on the compiled code (``structure``), for sm_90, as the launcher launched it.

* ``scale_rows``: out[i, :] = x[i, :] * scale[i]; a case's shape is (R, C), its params give the
  row strides of x and out (("x_stride", 1016), ("out_stride", 1016)).
* ``padded_bmm``: out[b] = a @ e[b], the capstone's candidate GEMM: a (M, K) weight shared by B
  batches of e (B, K, N); a case's shape is (B, M, N, K), its params the row stride of a
  (("k_stride", 872)): K = 866 stored 866 elements apart (1732 bytes) or padded to 872 (1744 bytes).
"""

from __future__ import annotations

import torch

from .. import runtime
from ..compare import close_enough
from . import DEFAULT_TOLERANCE, Case, SpeedTiers, TaskSpec, Tier, register, structure
from .ch06_matmul import MATMUL_TOLERANCE

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
ALL_ACCESSES = ("load", "store", "cp.async", "tma")


def _strided(rows: int, cols: int, stride: int, dtype, gen: torch.Generator, misaligned=False, fill=None):
    """A (rows, cols) view of a (rows, stride) buffer: rows ``stride`` elements apart; with
    ``misaligned``, the buffer starts one element in (its base is 2 or 4 bytes off 16). The padding
    beyond ``cols`` is zero (a padded layout), or left as made when ``fill`` is None for outputs."""
    pad = 1 if misaligned else 0
    if fill is None:
        flat = torch.empty(rows * stride + pad, dtype=dtype, device=gen.device)
    else:
        flat = torch.zeros(rows * stride + pad, dtype=torch.float32, device=gen.device)
        view = flat[pad:].view(rows, stride)
        view[:, :cols] = torch.randn(rows, cols, generator=gen, dtype=torch.float32, device=gen.device) * fill
        flat = flat.to(dtype)
    return flat[pad:].view(rows, stride)[:, :cols]


def _why_16(stride: int, itemsize: int) -> str:
    """Why a row stride is or is not specialized as aligned, in elements and in bytes."""
    return (
        f"{stride} elements = {stride * itemsize} bytes: "
        f"{'a' if stride * itemsize % 16 == 0 else 'no'} multiple of 16 bytes, "
        f"{'a' if stride % 16 == 0 else 'no'} multiple of 16 elements"
    )


# --------------------------------------------------------------------------------------------------
# scale_rows


def scale_rows_inputs(case: Case, gen: torch.Generator) -> dict:
    R, C = case.shape
    opts = case.options
    x = _strided(R, C, opts.get("x_stride", C), case.dtype, gen, case.misaligned, fill=1.0)
    scale = torch.randn(R, generator=gen, dtype=torch.float32, device=gen.device).to(case.dtype)
    out = _strided(R, C, opts.get("out_stride", C), case.dtype, gen, case.misaligned)
    return {"x": x, "scale": scale, "out": out}


def scale_rows_reference(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    # read R*C + R elements; write R*C elements; one multiply each
    return x * scale[:, None]


def _scale_rows_cases(mode: str) -> list[Case]:
    def rows(x_stride, out_stride=None):
        return (("x_stride", x_stride), ("out_stride", out_stride or x_stride))

    table = [
        ((1, 1), F32, "tiny", rows(1)),
        ((3, 5), F16, "tiny", rows(5)),
        ((7, 1001), F16, "ragged", rows(1008)),  # 16-byte rows, but the row length is odd
        ((64, 1000), F16, "padded", rows(1016)),  # 2032-byte rows: 16-byte aligned, 1016 % 16 = 8
        ((33, 248), F32, "padded", rows(252)),  # 1008-byte rows, 252 % 16 = 12
        ((40, 600), BF16, "padded", rows(616, 632)),  # no arithmetic beyond one multiply in bf16
        ((5, 3000), F32, "wide rows", rows(3004)),  # several column blocks per row
        ((16, 1000), F16, "unaligned rows", rows(1004)),  # 2008-byte rows: 8-byte aligned only
        ((6, 250), F32, "unaligned rows", rows(253, 251)),  # 1012 and 1004 bytes
        ((9, 1000), F16, "misaligned", rows(1016)),  # aligned rows, but the base 2 bytes off
    ]
    if mode == runtime.CPU:
        table.append(((256, 1000), F16, "large", rows(1016)))
    else:
        table += [((8192, 4000), F16, "large", rows(4008)), ((4096, 3000), F32, "large", rows(3004))]
    return [Case(s, dt, label, misaligned=label == "misaligned", params=p) for s, dt, label, p in table]


# The two layouts the structural check compiles the learner's launch for.
PADDED_PROBES = (((64, 1000), F16, 1016), ((33, 248), F32, 252))
UNALIGNED_PROBE = ((16, 1000), F16, 1004)


class _Stop(Exception):
    """Raised by a launch listener to record a launch without running it."""


def _first_launch(entry, inputs: dict):
    """The first launch the launcher makes on ``inputs``, recorded and not run: a false alignment
    promise on a GPU would fault, and the compiled code is what is judged."""

    def stop(fn_obj, args, kwargs):
        raise _Stop((fn_obj, tuple(args), dict(kwargs)))

    from .. import hooks

    hooks.launch_listeners.append(stop)
    try:
        entry(**inputs)
    except _Stop as stopped:
        return stopped.args[0]
    finally:
        hooks.launch_listeners.remove(stop)
    return None


def _layout(shape, stride) -> dict:
    return {"shape": list(shape), "stride": stride}


def probe_scale_rows(module, entry) -> dict:
    """In the worker: compile the learner's launch for sm_90 on padded rows (16-byte aligned, no
    multiple of 16 elements) and on unaligned rows, and list every global access's width and tensor."""
    gen = torch.Generator(device=runtime.device()).manual_seed(0)
    facts = {"padded": [], "unaligned": None}
    for shape, dtype, stride in PADDED_PROBES:
        case = Case(shape, dtype, "probe", params=(("x_stride", stride), ("out_stride", stride)))
        inputs = scale_rows_inputs(case, gen)
        launch = structure.probe_launch(entry, inputs, ("x", "scale", "out"))
        facts["padded"].append({**launch, **_layout(shape, stride), "dtype": str(dtype).replace("torch.", "")})
        # the widths are read off this run, so this run must compute the answer too
        expected = scale_rows_reference(inputs["x"].double(), inputs["scale"].double())
        right = close_enough(inputs["out"].double(), expected, DEFAULT_TOLERANCE[dtype])
        facts["right"] = bool(right) and facts.get("right", True)
    shape, dtype, stride = UNALIGNED_PROBE
    case = Case(shape, dtype, "probe", params=(("x_stride", stride), ("out_stride", stride)))
    inputs = scale_rows_inputs(case, gen)
    launch = _first_launch(entry, inputs)
    if launch is not None:
        found = structure.launch_facts(*launch, roles={r: inputs[r] for r in ("x", "scale", "out")})
        facts["unaligned"] = {**found, **_layout(shape, stride), "dtype": str(dtype).replace("torch.", "")}
    return facts


def _itemsize(item: dict) -> int:
    """Bytes an element of a probed launch's tensor (its dtype as the facts name it: float16, float32...)."""
    return 2 if item["dtype"] in ("float16", "bfloat16") else 4


def _where(item: dict, tensors: str) -> str:
    return (
        f"{tensors} of shape {tuple(item['shape'])}, {item['dtype']}, rows {_why_16(item['stride'], _itemsize(item))}"
    )


def _ptx_lines(item: dict, roles: tuple[str, ...], tensors: str) -> list[str]:
    lines = [f"PTX for sm_90 of `{item.get('kernel')}` as your launcher launched it on {_where(item, tensors)}:"]
    for role in roles:
        lines += [f"{role}: {structure.shown(structure.widths(item, role, ALL_ACCESSES))}"]
        lines += structure.lines_for(item, role)
    return lines


def _why_narrow(stride: int, hints: list | None = None) -> list[str]:
    """Why the accesses stay narrow: no hint, a hint on a bare argument, or (hinted) a mask in partial vectors."""
    hints = hints or []
    on_values = [h["on"] for h in hints if not h.get("argument")]
    on_arguments = [h["on"] for h in hints if h.get("argument")]
    if on_values:
        return [
            f"Why: the row starts are hinted (tl.multiple_of({on_values[0]}, ...)), so the addresses are not "
            "what stops 16-byte accesses: the mask is. A vector of VEC elements is loaded whole or not at all, "
            "so the compiler needs the mask to be the same across each vector, and cols < n_cols with n_cols "
            "an argument it cannot see as a multiple of VEC may cut a vector in two (n_cols is specialized "
            "'divisible by 16' only when it is a multiple of 16 elements).",
            "Fix: keep the mask in whole vectors: n_whole = n_cols // VEC * VEC (n_cols itself whenever the "
            "launcher passes VEC > 1, and visibly a multiple of VEC), then mask = cols < n_whole.",
        ]
    if on_arguments:
        return [
            f"Why: tl.multiple_of({on_arguments[0]}, ...) hints a bare argument of the kernel, and Triton keeps "
            "a hint only on a value computed in the kernel: on an argument it is dropped, so the compiler still "
            f"sees a row stride of {stride}, no multiple of 16 elements, and cannot prove that row * stride "
            "lands on a 16-byte boundary.",
            "Fix: hint the product, the row's start: row_start = tl.multiple_of(row * stride_x, VEC), and keep "
            "the mask in whole vectors (n_cols // VEC * VEC is n_cols, and visibly a multiple of VEC).",
        ]
    return [
        f"Why: Triton marks an integer argument 'divisible by 16' only when its value is a multiple of 16 "
        f"elements. {stride} is not ({stride} = 16 * {stride // 16} + {stride % 16}), though the rows are a "
        "multiple of 16 bytes apart: the compiler cannot prove that row * stride lands on a 16-byte boundary,",
        "so it reads and writes one element (or a few) at a time.",
        "Fix: the launcher can see the strides. When x.data_ptr() and out.data_ptr() are multiples of 16 and "
        "both strides and the row length are multiples of 16 bytes' worth of elements (8 fp16, 4 fp32), pass "
        "a constexpr such as VEC = 16 // x.element_size() (else 1) and hint the product, not the argument:",
        "  row_start = tl.multiple_of(row * stride_x, VEC)   # a hint on the argument itself is dropped",
        "and keep the mask in whole vectors (n_cols // VEC * VEC is n_cols, and visibly a multiple of VEC).",
    ]


def _why_few_per_thread(width: int, itemsize: int) -> list[str]:
    """Why accesses wider than one element, but narrower than 16 bytes: the compiler vectorized, so it
    proved some alignment; a thread holds too few elements, or the alignment proven is less than 16."""
    per_thread = 16 // itemsize
    return [
        f"Why: the accesses are {width} bytes wide ({width // itemsize} elements), so the compiler proved the "
        f"addresses {width}-byte aligned and vectorized. Either a thread holds no more than {width // itemsize} "
        "elements of a block (a block of BLOCK elements over num_warps * 32 threads gives each BLOCK / (32 * "
        f"num_warps)), or the alignment it can prove is {width} bytes, not 16 (a hint of {width // itemsize} "
        f"elements where {per_thread} is true).",
        f"Fix: BLOCK / (32 * num_warps) >= {per_thread} (e.g. BLOCK = {per_thread * 128} with 4 warps), and "
        f"hints of {per_thread} elements (16 bytes) where the launcher has checked them.",
    ]


def judge_scale_rows(facts: dict) -> list[tuple[bool, str, list[str]]]:
    checks = []
    narrow, notes = [], []
    for item in facts.get("padded", []):
        if not item.get("launches"):
            checks.append((False, "the launcher launched no kernel on the padded rows", []))
            continue
        # a TMA block copy (cp.async.bulk.tensor) moves whole 16-byte-aligned rows: as wide as access gets
        loads = structure.widths(item, "x", ("load", "tma"))
        stores = structure.widths(item, "out", ("store", "tma"))
        if (16 in loads or "TMA" in loads) and (16 in stores or "TMA" in stores):
            notes.append(f"padded rows, {item['dtype']}: x {structure.shown(loads)} loads, out "
                         f"{structure.shown(stores)} stores (PTX for sm_90; bytes per thread)")  # fmt: skip
            continue
        what, table = ("x is read", loads) if not (16 in loads or "TMA" in loads) else ("out is written", stores)
        at_a_time = "/".join(str(w) for w in sorted(k for k in table if k != "TMA")) or "no"
        narrow.append((f"{what} {at_a_time} bytes at a time, not 16, on padded rows ({tuple(item['shape'])} "
                       f"{item['dtype']}, rows {item['stride']} elements apart)", item))  # fmt: skip
    if narrow:
        details = [line for _, item in narrow for line in _ptx_lines(item, ("x", "out"), "x")]
        first = narrow[0][1]
        widths = [w for role in ("x", "out") for w in structure.widths(first, role, ("load", "store")) if w != "TMA"]
        if widths and max(widths) > _itemsize(first):  # vectorized: some alignment proven
            why = _why_few_per_thread(max(widths), _itemsize(first))
        else:
            why = _why_narrow(first["stride"], first.get("hints"))
        checks.append((False, narrow[0][0], details + why))
    elif notes:
        checks.append((True, "16-byte loads and stores", notes))
    item = facts.get("unaligned")
    if item is None:
        checks.append((False, "the launcher launched no kernel on unaligned rows", []))
        return checks
    wide = {role: sum(n for w, n in structure.widths(item, role, ALL_ACCESSES).items() if w in (16, "TMA"))
            for role in ("x", "out")}  # fmt: skip
    if any(wide.values()):
        lines = _ptx_lines(item, ("x", "out"), "x and out") + [
            "The 16-byte accesses promise that every row starts on a 16-byte boundary; these rows start "
            f"{item['stride'] * 2} bytes apart, so every other row does not. On a GPU such a load faults "
            "(misaligned address); in the interpreter the values still come out right, so only the compiled "
            "code shows it.",
            "Decide the hint in the launcher from the real tensors (data_ptr() % 16, the strides and the row "
            "length in elements), e.g. VEC = 8 if all of them allow it, else 1, and hint tl.multiple_of(..., VEC).",
        ]
        checks.append(
            (
                False,
                f"the kernel promises 16-byte alignment where there is none: rows {item['stride']} elements "
                f"({item['stride'] * 2} bytes) apart are compiled with 16-byte "
                f"{' and '.join(r for r, n in wide.items() if n)} accesses",
                lines,
            )
        )
    else:
        checks.append((True, "no false promise", ["unaligned rows: no 16-byte access (PTX for sm_90)"]))
    return checks


def _scale_rows_bytes(case: Case) -> int:
    R, C = case.shape
    itemsize = torch.empty((), dtype=case.dtype).element_size()
    return (2 * R * C + R) * itemsize


register(
    TaskSpec(
        name="scale_rows",
        chapter="08",
        title="out[i, :] = x[i, :] * scale[i] with 16-byte loads on padded rows (cases: (R, C))",
        entry="scale_rows",
        make_inputs=scale_rows_inputs,
        reference=scale_rows_reference,
        cases=_scale_rows_cases,
        bytes_moved=_scale_rows_bytes,
        flops=lambda case: case.shape[0] * case.shape[1],
        probe=f"{__name__}:probe_scale_rows",
        judge=judge_scale_rows,
        bench_cases=[
            Case((16384, 8000), F16, "bench", params=(("x_stride", 8008), ("out_stride", 8008))),
            Case((16384, 8000), F16, "bench", params=(("x_stride", 8004), ("out_stride", 8004))),
        ],
        hints=[
            "One program per row and block of columns: a 2-D grid (n_rows, cdiv(n_cols, BLOCK_SIZE)); the row "
            "starts at x_ptr + row * stride_x, its columns are col_block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE), "
            "masked on cols < n_cols. That is right, and 16 times slower to issue than it could be.",
            "Look at the PTX (course_lib.compilation.compile_for_args, then load_widths): ld.global.b16 means 2 "
            "bytes a thread. Triton specializes an integer argument only when it is a multiple of 16 elements; "
            "a row stride of 1016 fp16 is 2032 bytes, aligned, but 1016 % 16 = 8: the compiler cannot see it.",
            "Say it: VEC = 16 // x.element_size() when both data_ptr()s are multiples of 16 and both strides and "
            "n_cols are multiples of VEC, else 1; pass VEC as a constexpr; in the kernel "
            "row_start = tl.multiple_of(row * stride_x, VEC) (a hint on the bare argument is dropped) and "
            "mask on cols < n_cols // VEC * VEC.",
            "A hint that is not true is worse than none: the grader compiles your launch on rows 1004 fp16 "
            "apart (2008 bytes) and fails any 16-byte access there.",
        ],
    )
)


# --------------------------------------------------------------------------------------------------
# padded_bmm: the capstone's candidate GEMM, K stored 866 or 872 elements apart


def padded_bmm_inputs(case: Case, gen: torch.Generator) -> dict:
    B, M, N, K = case.shape
    k_stride = case.options.get("k_stride", K)
    scale = K**-0.25  # out ~ N(0, 1) at any K, as in chapter 06
    a = _strided(M, K, k_stride, case.dtype, gen, case.misaligned, fill=scale)  # (M, K), rows k_stride apart
    # e's K dimension is stored k_stride deep too, zero beyond K, as a padded capstone keeps it
    pad = 1 if case.misaligned else 0
    e_full = torch.zeros(B * k_stride * N + pad, dtype=torch.float32, device=gen.device)
    e_view = e_full[pad:].view(B, k_stride, N)
    e_view[:, :K] = torch.randn(B, K, N, generator=gen, dtype=torch.float32, device=gen.device) * scale
    e = e_full.to(case.dtype)[pad:].view(B, k_stride, N)[:, :K]  # (B, K, N)
    flat = torch.empty(B * M * N + pad, dtype=case.dtype, device=gen.device)
    return {"a": a, "e": e, "out": flat[pad:].view(B, M, N)}  # out: (B, M, N)


def padded_bmm_reference(a: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    # read M*K + B*K*N elements; write B*M*N; 2*B*M*N*K FLOPs
    return torch.matmul(a, e)  # (B, M, N)


def _bmm_cases(mode: str) -> list[Case]:
    def k(stride):
        return (("k_stride", stride),)

    table = [
        ((1, 1, 1, 1), F32, "tiny", k(1)),
        ((2, 3, 5, 2), F16, "tiny", k(8)),
        ((3, 33, 40, 66), F16, "unpadded", k(66)),  # 132-byte rows of a
        ((3, 33, 40, 66), F16, "padded", k(72)),  # 144-byte rows: 16-byte aligned, 72 % 16 = 8
        ((3, 33, 40, 66), F32, "unpadded", k(66)),
        ((3, 33, 40, 66), F32, "padded", k(68)),  # 272 bytes
        ((2, 70, 24, 130), F16, "K tail", k(136)),  # two whole K steps of 64 and a short one
        ((2, 17, 9, 19), F32, "tail", k(19)),  # nothing a multiple of anything
        ((2, 37, 29, 41), F16, "misaligned", k(48)),  # padded rows, but every base 2 bytes off
    ]
    if mode != runtime.CPU:
        table += [
            ((64, 433, 256, 866), F16, "capstone shape", k(866)),
            ((64, 433, 256, 866), F16, "capstone shape", k(872)),
            ((16, 433, 256, 866), BF16, "capstone shape", k(866)),
            ((16, 433, 256, 866), BF16, "capstone shape", k(872)),
        ]
    return [
        Case(sh, dt, label, misaligned=label == "misaligned", gpu_only=dt == BF16, params=p)
        for sh, dt, label, p in table
    ]


BMM_PADDED_PROBE = ((2, 64, 64, 66), F16, 72)  # (B, M, N, K), dtype, row stride of a
BMM_UNPADDED_PROBE = ((2, 64, 64, 66), F16, 66)


def probe_padded_bmm(module, entry) -> dict:
    """In the worker: compile the learner's launch for sm_90 on the padded and the unpadded layout
    and list each global access of a, e and out with its width (TMA copies included)."""
    gen = torch.Generator(device=runtime.device()).manual_seed(0)
    facts = {}
    for name, (shape, dtype, k_stride) in (("padded", BMM_PADDED_PROBE), ("unpadded", BMM_UNPADDED_PROBE)):
        inputs = padded_bmm_inputs(Case(shape, dtype, "probe", params=(("k_stride", k_stride),)), gen)
        roles = {r: inputs[r] for r in ("a", "e", "out")}
        if name == "padded":
            found = structure.probe_launch(entry, inputs, tuple(roles))
            # the widths are read off this run, so this run must compute the answer too
            expected = padded_bmm_reference(inputs["a"].double(), inputs["e"].double())
            facts["right"] = bool(close_enough(inputs["out"].double(), expected, MATMUL_TOLERANCE[dtype]))
        else:
            launch = _first_launch(entry, inputs)
            found = structure.launch_facts(*launch, roles=roles) if launch else {"launches": 0}
            found.setdefault("launches", 1)
        facts[name] = {**found, "shape": list(shape), "stride": k_stride, "dtype": "float16"}
    return facts


def _a_widths(item: dict) -> dict:
    return structure.widths(item, "a", ALL_ACCESSES)


def judge_padded_bmm(facts: dict) -> list[tuple[bool, str, list[str]]]:
    checks = []
    padded, unpadded = facts.get("padded") or {}, facts.get("unpadded") or {}
    for item, name in ((padded, "padded"), (unpadded, "unpadded")):
        if not item.get("launches"):
            return [(False, f"the launcher launched no kernel on the {name} layout", [])]
    B, M, N, K = padded["shape"]
    wide = _a_widths(padded)
    if 16 in wide or "TMA" in wide:
        checks.append((True, "a is read 16 bytes at a time when padded",
                       [f"padded K ({K} stored {padded['stride']} apart): a read by {structure.shown(wide)} "
                        "accesses (PTX for sm_90)"]))  # fmt: skip
    else:
        lines = [
            f"PTX for sm_90 of `{padded.get('kernel')}` as your launcher launched it on a of shape ({M}, {K}), "
            f"float16, rows {_why_16(padded['stride'], 2)}:",
            f"a: {structure.shown(wide)}",
            *structure.lines_for(padded, "a"),
            f"e: {structure.shown(structure.widths(padded, 'e', ALL_ACCESSES))} (its rows, {N} elements, are "
            "a multiple of 16 elements: Triton sees that by itself)",
            *_why_narrow(padded["stride"])[:2],
            "Fix: when a.data_ptr() % 16 == 0 and a.stride(0) is a multiple of 8 (fp16/bf16), pass VEC = 8 (else "
            "1) and hint a's row starts: tl.multiple_of(rows * stride_am, VEC). The K loop's mask also splits the",
            "vectors: run the whole BLOCK_K steps unmasked and mask only the last, partial step. Or read a through "
            "a tensor descriptor (TMA), which 1744-byte rows allow and 1732-byte rows do not.",
        ]
        checks.append((False, f"a is read {'/'.join(str(w) for w in sorted(k for k in wide if k != 'TMA')) or 'no'} "
                       f"bytes at a time, not 16, on the padded layout (K = {K} stored {padded['stride']} apart)",
                       lines))  # fmt: skip
    wide = _a_widths(unpadded)
    if wide.get(16) or wide.get("TMA"):
        lines = [
            f"PTX for sm_90 of `{unpadded.get('kernel')}` as your launcher launched it on a of shape ({M}, {K}), "
            f"float16, rows {_why_16(unpadded['stride'], 2)}:",
            *structure.lines_for(unpadded, "a"),
            f"Rows {unpadded['stride'] * 2} bytes apart do not all start on a 16-byte boundary: on a GPU these "
            "loads fault (misaligned address). The interpreter computes the right values, so only the compiled "
            "code shows it. Decide VEC in the launcher from a.data_ptr() and a.stride(0).",
        ]
        checks.append((False, f"the kernel promises 16-byte rows of a where there are none (K = {K} stored "
                       f"{unpadded['stride']} apart, {unpadded['stride'] * 2} bytes)", lines))  # fmt: skip
    else:
        checks.append((True, "no false promise", [f"unpadded K: a read by {structure.shown(wide)} accesses"]))
    return checks


def _bmm_flops(case: Case) -> int:
    B, M, N, K = case.shape
    return 2 * B * M * N * K


def _bmm_bytes(case: Case) -> int:
    B, M, N, K = case.shape
    return (M * K + B * K * N + B * M * N) * torch.empty((), dtype=case.dtype).element_size()


# The capstone's published shape: B = 1024 candidates, M = 433, N = 256, K = 866 (GPU_FACTS.md: cuBLAS
# 0.963 ms unpadded, 0.336 ms with K stored 872 apart, bf16, H200).
BMM_BENCH = [
    Case((1024, 433, 256, 866), BF16, "bench", params=(("k_stride", 866),)),
    Case((1024, 433, 256, 866), BF16, "bench", params=(("k_stride", 872),)),
]

register(
    TaskSpec(
        name="padded_bmm",
        speed=SpeedTiers(fast=Tier("eager", 0.7)),  # eager is cuBLAS on the unaligned rows
        chapter="08",
        title="out[b] = a @ e[b], K = 866 stored unpadded or padded to 872: 16-byte loads when padded "
        "(cases: (B, M, N, K))",
        entry="padded_bmm",
        make_inputs=padded_bmm_inputs,
        reference=padded_bmm_reference,
        cases=_bmm_cases,
        tolerance=MATMUL_TOLERANCE,
        bytes_moved=_bmm_bytes,
        flops=_bmm_flops,
        tensor_cores=True,
        bench_cases=list(BMM_BENCH),
        bench_variants=lambda case: {"cublas": lambda a, e: torch.matmul(a, e)},
        probe=f"{__name__}:probe_padded_bmm",
        judge=judge_padded_bmm,
        hints=[
            "This is chapter 06's tiled matmul with a batch: a 2-D grid (output tiles, B), program (pid, batch) "
            "computes one BLOCK_M x BLOCK_N tile of out[batch] = a @ e[batch]; e[batch] starts at "
            "e_ptr + batch * e.stride(0). Use every tensor's strides.",
            "a's rows are a.stride(0) elements apart: 866 (1732 bytes) or 872 (1744 bytes, a multiple of 16). "
            "Triton specializes 872 no better than 866: neither is a multiple of 16 elements. The launcher must "
            "say it: VEC = 8 if a.data_ptr() % 16 == 0 and a.stride(0) % 8 == 0 else 1 (for 2-byte types).",
            "In the kernel: a_rows = tl.multiple_of((rows % M) * stride_am, VEC). A mask along K (k < K - k0) "
            "splits the vectors again: loop over K // BLOCK_K whole steps without a mask, then one masked step "
            "for the rest.",
            "Or use TMA for a: TensorDescriptor(a, shape=[M, K], strides=[a.stride(0), 1], block_shape=[BLOCK_M, "
            "BLOCK_K]) when the layout allows it (the course says plainly when it does not), with pointer loads "
            "for the unpadded layout.",
        ],
    )
)
