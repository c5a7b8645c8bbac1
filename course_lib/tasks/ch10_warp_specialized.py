"""Chapter 10, step 4: the capstone's linear compression warp-specialized in Gluon on Hopper.

``ws_compression`` is chapter 09's ws_matmul turned into the capstone's kernel: a persistent,
warp-specialized GEMM over the batch of candidates (ping-pong consumers in the solution) whose tiles
start from each candidate's user tile, found by index lookup, and the user GEMM as a first launch
(the cooperative kernel in the solution). Its cases run on a Hopper GPU (spec.needs), and in CPU mode
in course_lib.gluon_cpu (spec.simulated: small shapes, the barrier protocol checked as it runs); then,
everywhere, the probe records the launcher's launches (none of them run), compiles the candidate
launch for sm_90 and reads its structure, and runs the learner's ``_tile`` as plain Python over a few
grids; all of it is judged here.
"""

from __future__ import annotations

import re

import torch

from .. import compilation, runtime
from . import Case, TaskSpec, output_like, register
from .ch09_pipelining import judge_ws_matmul, ws_facts
from .ch10_capstone import (
    BENCH_CASES,
    COURSE,
    MANY_USERS,
    PUBLISHED,
    TWO_ROUNDINGS_TOLERANCE,
    capstone_bytes,
    capstone_diagnose,
    capstone_flops,
    split_inputs,
)

F16, BF16 = torch.float16, torch.bfloat16


def padded(w: torch.Tensor) -> torch.Tensor:
    """w (M, K) copied into a buffer whose rows are a multiple of 16 bytes long (zeros past K), viewed
    back as (M, K): step 2's layout, made once as a model's weights are when they are loaded."""
    per = 16 // w.element_size()
    K = w.shape[1]
    buf = torch.zeros(w.shape[0], -(-K // per) * per, dtype=w.dtype, device=w.device)
    buf[:, :K] = w
    return buf[:, :K]


def ws_inputs(case: Case, gen: torch.Generator) -> dict:
    B, _, M, Ku, _, N = case.shape
    base = split_inputs(case, gen)
    w, ku = base["w"], base["ku"]
    made = {
        "w_u": padded(w[:, :ku]),  # (M, Ku), rows 16-byte aligned
        "w_c": padded(w[:, ku:]),  # (M, Kc)
        "e_user": base["e_user"],  # (U, Ku, N)
        "e_cand": base["e_cand"],  # (B, Kc, N)
        "user_of": base["user_of"],  # (B,) int64, sorted
        "out": output_like(case, gen, shape=(B, M, N)),  # (B, M, N)
    }
    if "programs" in case.options:  # CPU mode: a few persistent programs, each running several tiles
        made["sms"] = int(case.options["programs"])
    return made


def ws_diagnose(inputs: dict, got: torch.Tensor, case: Case) -> str | None:
    """capstone_diagnose on this task's inputs (W split in W_u and W_c): a missing or doubled user part,
    another candidate's user, the candidate part rounded before the user part was added."""
    w = torch.cat([inputs["w_u"], inputs["w_c"]], dim=1)
    split = {**inputs, "w": w, "ku": inputs["w_u"].shape[1]}
    return capstone_diagnose(split, got, case, TWO_ROUNDINGS_TOLERANCE)


def ws_reference(w_u, w_c, e_user, e_cand, user_of, sms=None):
    # read M*(Ku+Kc) + U*Ku*N + B*Kc*N elements and B indices; write B*M*N; 2*M*N*(U*Ku + B*Kc) FLOPs
    user_out = torch.matmul(w_u, e_user)  # (U, M, N): once per user
    return torch.matmul(w_c, e_cand) + user_out[user_of]  # (B, M, N)


# (B, U, M, Ku, Kc, N), params: N a multiple of 8 (TMA's 16-byte rows of E and out); M, Ku and Kc anything
# (W's rows arrive padded to 16 bytes; a batch's K tail is zero-filled by its 3-D descriptor)
WS_CASES = [
    ((1, 1, 1, 8, 8, 8), BF16, "tiny", ()),
    ((7, 3, 77, 40, 24, 136), BF16, "ragged", ()),  # users of random sizes; K below one 64-deep step
    ((9, 2, 130, 200, 72, 264), F16, "K and M tails", ()),  # 2 M tiles, the second 2 rows deep
    ((16, 1, 256, 512, 256, 128), BF16, "one user", ()),
    ((40, 40, 64, 64, 64, 64), BF16, "a user per candidate", ()),
    ((300, 5, 433, 1178, 866, 256), BF16, "published, 300 candidates", (("counts", (70, 70, 70, 70, 20)),)),
    (PUBLISHED, F16, "published", (("per_user", 70),)),
    (COURSE, BF16, "course", (("per_user", 128),)),
    (MANY_USERS, BF16, "many users", (("per_user", 4),)),
]
WS_PROBE = Case((24, 3, 200, 72, 40, 128), BF16, "probe", params=(("counts", (5, 9, 10)),))


# CPU mode: the cases run in course_lib.gluon_cpu on small shapes, on 3 programs (``sms``), so that each
# program runs several tiles of both kernels: edge tiles in M, K tails, users of one and of many candidates
WS_CPU_CASES = [
    ((1, 1, 1, 8, 8, 8), BF16, "tiny", ()),
    ((7, 3, 77, 40, 24, 136), BF16, "ragged", ()),
    ((9, 2, 130, 200, 72, 264), F16, "K and M tails", ()),
    ((12, 3, 130, 72, 136, 96), BF16, "several tiles a program", (("counts", (5, 4, 3)),)),
    ((6, 6, 64, 64, 64, 64), BF16, "a user per candidate", ()),
]


def _ws_cases(mode: str) -> list[Case]:
    if mode == runtime.CPU:
        return [
            Case(shape, dtype, label, params=(*params, ("programs", 3))) for shape, dtype, label, params in WS_CPU_CASES
        ]
    return [Case(shape, dtype, label, gpu_only=True, params=params) for shape, dtype, label, params in WS_CASES]


# (batches, num_pid_m, num_pid_n) grids on which the learner's _tile runs as plain Python. The small ones
# check that every tile is numbered once. The order matters only where it changes what the programs running
# side by side share: the published shape (1024 candidates, 433 rows in 4 M tiles of 128, one N tile of 256),
# where a batch's 4 tiles fit in one wave whatever their order but batches interleaved would not, and a wide
# output (40 M tiles by 8 N tiles per batch, more than a wave), where pid_n fastest spreads one E tile's
# readers over 312 tiles.
TILE_GRIDS = ((5, 3, 2), (4, 1, 1), (3, 7, 1), (2, 2, 3), (1024, 4, 1), (3, 40, 8))
WAVE = 132  # one persistent program per SM of an H200: the tiles that run side by side
TILE_PROPERTY = (
    "What the order protects: the programs that read the same tile of E (one batch, one N tile: num_pid_m of "
    f"them) should run side by side, within one wave of {WAVE} programs, so that E comes from memory once and "
    "from L2 after. W_c is shared by every batch and stays in L2 in any order."
)


def tile_order(tile_fn) -> list | str | None:
    """What the learner's ``_tile`` (its Python function) returns over TILE_GRIDS: one list of
    (batch, pid_m, pid_n) per grid; None where it cannot run as plain Python (it then is judged by its
    values on a GPU only); a short text where it raised."""
    if tile_fn is None:
        return None
    orders = []
    for batches, num_pid_m, num_pid_n in TILE_GRIDS:
        try:
            got = [tile_fn(t, num_pid_m, num_pid_n) for t in range(batches * num_pid_m * num_pid_n)]
            orders.append([[int(v) for v in triple] for triple in got])
        except Exception as e:  # gl.* calls outside a kernel, a stub: nothing to say in CPU mode
            return None if "gl." in repr(e) or "triton" in type(e).__module__ else f"{type(e).__name__}: {e}"[:200]
    return orders


def judge_tile_order(orders) -> tuple[bool, str, list[str]] | None:
    """None when _tile's order is right (or could not be run); else a failed check: each grid's tiles
    must map one to one onto (batch, pid_m, pid_n), and the M tiles of one (batch, N tile), which read the
    same tile of E, must lie within one wave of each other."""
    if orders is None:
        return None
    if isinstance(orders, str):
        return (False, "_tile raised when run as plain Python", [orders])
    if not isinstance(orders, list) or len(orders) != len(TILE_GRIDS):
        return (False, "_tile's order came back unreadable", [])
    for (batches, num_pid_m, num_pid_n), got in zip(TILE_GRIDS, orders, strict=True):
        grid = f"batches={batches}, num_pid_m={num_pid_m}, num_pid_n={num_pid_n}"
        if any(len(t) != 3 for t in got):
            return (False, "_tile must return (batch, pid_m, pid_n)", [f"on {grid} it returned {got[:3]}"])
        every = {(b, m, n) for b in range(batches) for m in range(num_pid_m) for n in range(num_pid_n)}
        if set(map(tuple, got)) != every or len(got) != len(every):
            return (False, f"_tile does not number every (batch, pid_m, pid_n) once on {grid}", [
                f"tiles 0.. {len(got) - 1} gave {got[:8]}{' ...' if len(got) > 8 else ''}"])  # fmt: skip
        readers: dict[tuple[int, int], list[int]] = {}
        for t, (b, _m, n) in enumerate(got):
            readers.setdefault((b, n), []).append(t)
        (b, n), tiles = max(readers.items(), key=lambda item: max(item[1]) - min(item[1]))
        if max(tiles) - min(tiles) >= WAVE:
            return (False, f"_tile does not put the M tiles of one (batch, N tile) next to each other on {grid}", [
                f"the {len(tiles)} M tiles of batch {b}, N tile {n} are tiles {tiles[:6]}"
                f"{' ...' if len(tiles) > 6 else ''}: {max(tiles) - min(tiles)} apart, more than a wave of {WAVE}",
                TILE_PROPERTY,
                "Number the M tiles of one (batch, N tile) next to each other, pid_m running fastest: "
                "batch = tile // (num_pid_m * num_pid_n), then pid_m = rest % num_pid_m, pid_n = rest // num_pid_m",
            ])  # fmt: skip
    return None


def probe_ws_compression(module, entry) -> dict:
    """In the worker: every launch the launcher makes on CPU tensors (none runs); the last one, the
    candidate GEMM, compiled for sm_90 and read."""
    inputs = ws_inputs(WS_PROBE, torch.Generator().manual_seed(0))
    launches = compilation.recorded_launches(entry, **inputs, sms=132)
    if not launches:
        return {"launches": 0}
    gluon = [launch for launch in launches if type(launch[0]).__name__ == "GluonJITFunction"]
    last = (gluon or launches)[-1]  # the candidate GEMM: the last Gluon launch
    kernel = last[0]
    compiled = compilation.compile_launch(last)
    facts = ws_facts(compiled, getattr(kernel, "__name__", "kernel"), type(kernel).__name__)
    facts["launches"] = len(launches)
    facts["kernels"] = [getattr(launch[0], "__name__", "kernel") for launch in launches]
    facts["global_loads"] = len(re.findall(r"\bld\.global", compiled.asm["ptx"]))
    B, U, M, Ku, Kc, N = WS_PROBE.shape
    facts["probe"] = f"B={B} candidates of U={U} users, M={M}, Ku={Ku}, Kc={Kc}, N={N}, bfloat16 (its last launch)"
    facts["tile_order"] = tile_order(getattr(getattr(module, "_tile", None), "fn", None))
    return facts


# TMA load sites of the ping-pong candidate kernel's producer (W's and E's tiles) in its PTX, one
# mbarrier.expect for them: 3 with Triton 3.6 and 3.9 (the solution: 5 sites, 3 expects, one site and one
# expect in each consumer warpgroup's user-tile copy; with that expect left out, 5 and 1). A diagnosis
# in CPU mode for that kernel only (the one-launch variant's producer, scripts/capstone_variants.py, has
# more); on a GPU the wait itself shows.
PRODUCER_LOAD_SITES = 3


def judge_ws_compression(facts: dict) -> list[tuple[bool, str, list[str]]]:
    if facts.get("launches", 0) > 2:
        return [(False, f"the launcher makes {facts['launches']} launches, not 2", [
            f"launches, in order: {', '.join(facts.get('kernels', []))}",
            "one for the user GEMM (user_out, once per unique user) and one for the candidates, whose epilogue "
            "adds user_out[user_of[b]]: a kernel more is a broadcast or a sum through memory"])]  # fmt: skip
    checks = judge_ws_matmul(facts)
    if not facts.get("launches"):
        return checks
    if not facts.get("global_loads"):
        checks.append((False, "the candidate kernel reads nothing outside TMA: it never looks up user_of[b]", [
            f"`{facts.get('kernel')}` (the last launch) compiled for sm_90 has no ld.global: the user's part must "
            "be found by index lookup, user_out[user_of[b]] (user = gl.load(user_of_ptr + b), then that user's "
            "tile copied and added before the store); a lookup whose result nothing uses is dropped by the "
            "compiler too"]))  # fmt: skip
    copies = facts.get("tma_loads", 0) - PRODUCER_LOAD_SITES  # the consumers' own copies: the user tiles
    if facts.get("kernel") == "capstone_pingpong_kernel" and copies > 0 and facts.get("expect_tx", 0) < 1 + copies:
        checks.append((False, "a TMA copy in the candidate kernel is never expected on its barrier", [
            f"`{facts.get('kernel')}` compiled for sm_90 has {facts.get('tma_loads')} TMA load sites but "
            f"{facts.get('expect_tx')} mbarrier.expect: the producer's loads take one, and each consumer's copy of "
            "the user tile needs its own. In _copy_user_tile, mbarrier.expect(bar, u_desc.block_type.nbytes) "
            "before the tma_load: without it the epilogue's wait on bar never ends (on a GPU, a HANG)"]))  # fmt: skip
    order = judge_tile_order(facts.get("tile_order"))
    if order:
        checks.append(order)
    return checks


def _cublas_candidate(w_u, w_c, e_user, e_cand, user_of):
    # (B, M, N): cuBLAS's candidate GEMM alone, no user part, on the request's E_cand: W_c's rows are
    # padded to 16 bytes but K stays Kc (866 at the published shape, no multiple of 8), which is what
    # keeps cuBLAS slow there; scripts/experiments_capstone.py times it with E_cand padded too
    return torch.matmul(w_c, e_cand)


register(
    TaskSpec(
        name="ws_compression",
        chapter="10",
        title="Step 4: the whole step warp-specialized in Gluon, the user tile added by index lookup (Hopper)",
        entry="ws_compression",
        make_inputs=ws_inputs,
        reference=ws_reference,
        cases=_ws_cases,
        tolerance=TWO_ROUNDINGS_TOLERANCE,
        bytes_moved=capstone_bytes,
        flops=capstone_flops,
        tensor_cores=True,
        bench_cases=list(BENCH_CASES),
        bench_variants=lambda case: {"cublas_candidate_k_unpadded": _cublas_candidate},
        partial_variants=("cublas_candidate_k_unpadded",),
        needs="hopper",
        simulated=True,
        probe="course_lib.tasks.ch10_warp_specialized:probe_ws_compression",
        judge=judge_ws_compression,
        diagnose=ws_diagnose,
        timeout_s=180.0,
        hints=[
            "The tile number: per_batch = num_pid_m * num_pid_n; b = tile // per_batch; with rest = tile % "
            "per_batch, pid_m = rest % num_pid_m and pid_n = rest // num_pid_m, so consecutive tiles (programs "
            "running side by side) are the M tiles of one (b, N tile) and read the same tile of E.",
            "The lookup: user = gl.load(user_of_ptr + b).to(gl.int32), one number: the user of candidate b "
            "(user_of is sorted, many candidates a user).",
            "The copy: u_desc is a TMA descriptor over user_out (U, M, N) in out's dtype, its block (1, BLOCK_M, "
            "BLOCK_N). mbarrier.expect(bar, u_desc.block_type.nbytes), then tma_load(u_desc, [user, pid_m * "
            "BLOCK_M, pid_n * BLOCK_N], bar, dest): the consumer waits on bar after its main loop and adds dest "
            "to its accumulator. A copy never started, or bytes never expected, leaves that wait hanging.",
            "CPU mode runs your cases in the course's Gluon simulator: a wrong user shows in the values, a wrong "
            "byte count as a deadlock on bar (who waits on what). Then the structure: at its probe shape the "
            "solution's candidate kernel has 5 TMA load sites, 3 mbarrier.expect and 7 mbarrier waits in its PTX "
            "(the check's PTX line prints your loads and waits); a wait on bar inside _copy_user_tile shows as 9.",
        ],
    )
)
