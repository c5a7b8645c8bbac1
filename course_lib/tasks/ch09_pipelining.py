"""Chapter 09: producer/consumer pipelining. The ring of a warp-specialized GEMM, with mbarriers,
then the GEMM itself in Gluon on Hopper.

The task ``ring_pipeline`` is no kernel: the learner writes the producer (TMA loads) and the
consumer (wgmma) of a GEMM's main loop as Python generators that yield the operations of
``course_lib.barriers``, an emulator of Hopper's mbarrier, TMA and wgmma semantics.

Sealing: in the worker, ``ring_trace`` (given in the task file) runs the learner's generators under
the emulator and returns a plain JSON trace: every operation each role yielded and every scheduling
decision. Here, in the grader's process, ``barriers.replay`` runs a fresh emulator on that trace,
makes every scheduling decision itself from the case's seed and schedule, rejects a trace that says
otherwise at any step, and judges every rule itself. The worker's own verdict is never asked for.
"""

from __future__ import annotations

import re
from collections import Counter

import torch

from .. import barriers, compilation, runtime
from . import Case, SpeedTiers, TaskSpec, Tier, register
from .ch06_matmul import BENCH_CASES as MATMUL_BENCH
from .ch06_matmul import (
    BF16,
    F16,
    MATMUL_TOLERANCE,
    _matmul_bytes,
    _matmul_flops,
    matmul_inputs,
    matmul_reference,
)

FUNCTION = "ring_trace"
ORDER = {
    "random": "seeded random order",
    "late": "loads and MMAs as late as allowed",
    "eager": "loads and MMAs as early as possible",
}

# (k_steps, num_buffers, schedule): one and two buffers, k_steps below, at and off multiples of the
# ring, and the adversarial order (the roles run as far as they can before anything completes).
CASES = [
    (8, 3, "random"),
    (8, 3, "late"),
    (4, 1, "late"),
    (3, 1, "random"),
    (7, 2, "late"),
    (5, 2, "eager"),
    (9, 2, "random"),
    (10, 4, "random"),
    (3, 4, "late"),
    (11, 3, "late"),
    (6, 3, "eager"),
]


def _case(k_steps: int, num_buffers: int, schedule: str) -> Case:
    label = f"{num_buffers} buffer{'s' * (num_buffers != 1)}, {k_steps} steps, {ORDER[schedule]}"
    params = (("k_steps", k_steps), ("num_buffers", num_buffers), ("schedule", schedule))
    return Case((), torch.float32, label, params=params)


def _cases(mode: str) -> list[Case]:
    return [_case(*c) for c in CASES]


def _question(case: Case, seed: int) -> dict:
    """The keyword arguments of ring_trace for one case. A hidden case (COURSE_HIDDEN_CASES) gives
    [k_steps, num_buffers] as its shape and the schedule as its label:
    {"ring_pipeline": [{"shape": [13, 3], "label": "late"}]}."""
    options = case.options
    if "k_steps" in options:
        k_steps, num_buffers, schedule = options["k_steps"], options["num_buffers"], options["schedule"]
    else:
        if len(case.shape) != 2:
            raise ValueError("a ring_pipeline case needs a shape of two numbers: [k_steps, num_buffers]")
        k_steps, num_buffers = (int(v) for v in case.shape)
        schedule = case.label if case.label in barriers.SCHEDULES else "late"
    return {"k_steps": k_steps, "num_buffers": num_buffers, "seed": int(seed), "schedule": schedule}


def _make_inputs(case: Case, gen: torch.Generator) -> dict:
    seed = int(torch.randint(0, 2**31 - 1, (), generator=gen))
    return _question(case, seed)


def _reference(k_steps, num_buffers, seed, schedule):
    """What the accumulator must hold: the tiles of every k once, in order."""
    return list(range(k_steps))


def _call_case(case: Case, seed: int) -> tuple[str, dict]:
    return FUNCTION, _question(case, seed)


def _judge_call(case: Case, function: str, kwargs: dict, reply: dict) -> tuple[bool, str, list[str]]:
    """Replay the worker's trace in a fresh emulator here; only this replay's verdict counts."""
    if reply.get("missing"):
        return False, f"ring_pipeline.py has no function `{FUNCTION}` (it is given in the exercise: keep it)", []
    if "raised" in reply:
        return False, f"running your roles raised {reply['raised']}", [str(line) for line in reply.get("frames", [])]
    outcome = barriers.replay(reply.get("value"), **kwargs)
    if outcome.ok:
        return True, "", []
    details = list(outcome.details)
    if outcome.rule == "inconsistent":
        details.append(f"{FUNCTION} must return what barriers.record returns for your producer and consumer, unchanged")
    arguments = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    details.append(f"replay it in a notebook: barriers.simulate(producer, consumer, {arguments})")
    return False, outcome.summary, details


register(
    TaskSpec(
        name="ring_pipeline",
        chapter="09",
        title="A producer/consumer ring with mbarriers (warp specialization, emulated)",
        entry=FUNCTION,
        make_inputs=_make_inputs,
        reference=_reference,
        cases=_cases,
        outputs=(),
        bytes_moved=None,  # an emulated protocol, not a kernel: nothing to benchmark
        flops=None,
        call_case=_call_case,
        judge_call=_judge_call,
        timeout_s=60.0,
        hints=[
            "The slot and round of step k: s = k % num_buffers, r = k // num_buffers. Each role loops over k "
            "and yields, in order: the producer Wait(empty[s], ...), ExpectTx(ready[s], STAGE_BYTES), "
            "Load(k, slot=s, bar=ready[s]); the consumer Wait(ready[s], ...), Mma(slot=s), MmaWait(...), "
            "Arrive(empty[s]).",
            "A wait names a parity, not a phase number: Wait(bar, phase=p) passes once the barrier's latest "
            "completed phase has parity p. ready[s] completes once per round, so in round r the consumer "
            "waits with phase r % 2. Waiting with 0 every round passes in round 1 on round 0's completion, "
            "before round 1's tile has landed.",
            "The producer's first wait on each empty[s] must pass before the consumer has released anything. "
            "A fresh barrier behaves as if a phase of parity 1 had just completed, so wait with the opposite "
            "parity: Wait(empty[s], phase=(r % 2) ^ 1) passes at once in round 0 and, in round r, waits for "
            "the consumer's release of round r - 1. (Or the consumer arrives once on every empty[s] before "
            "its loop, and the producer waits with r % 2.)",
            "Mma is asynchronous, like warpgroup_mma(is_async=True): it still reads slot s after it is issued. "
            "Release the slot only after MmaWait(pending=0), which waits until no MMA is running. "
            "MmaWait(pending=1) leaves the newest MMA, the one reading slot s, running: arriving on empty[s] "
            "then lets the producer overwrite the tile under it (a real Hopper bug). Before returning, no MMA "
            "may be left running.",
        ],
    )
)


# --------------------------------------------------------------------------------------------------
# ws_matmul: the warp-specialized GEMM in Gluon, graded on a Hopper GPU and in CPU mode
#
# On a GPU its cases run only where spec.needs allows (compute capability 9.x); in CPU mode they run in
# course_lib.gluon_cpu (spec.simulated), on the small shapes of WS_CPU_CASES, which checks the barrier
# protocol as the kernel runs. After the cases, in both modes, the probe records the launch the
# learner's launcher makes (CPU tensors: the launch is stopped before it runs), compiles it for sm_90
# as it was specialized, and reads the TTGIR and PTX into plain counts; judge_ws_matmul decides here.

# (M, N, K): K and N multiples of 8 (TMA's 16-byte rows); M anything. 128 x 256 x 64 tiles.
WS_CASES = [
    ((1, 8, 8), BF16, "tiny"),
    ((77, 136, 40), BF16, "K below one step"),
    ((300, 520, 200), BF16, "ragged edges"),  # TMA fills past the edges with zeros, drops them on the store
    ((1000, 1000, 1000), F16, "ragged edges"),
    ((256, 512, 1024), BF16, "fewer tiles than SMs"),
    ((2048, 2048, 136), F16, "K tail"),  # 3 steps: the ring's slots are not all used per tile
    # 512 tiles over 132 programs, 4 steps each on 3 slots: phases carry from one tile into the next
    ((4096, 4096, 200), BF16, "persistent, phases across tiles"),
    ((1536, 2304, 4104), BF16, "long K"),
]
WS_PROBE = (1024, 768, 520)  # the launch compiled for the structural checks (CPU tensors, never run)
WS_BENCH = [c for c in MATMUL_BENCH if c.shape != (4096, 4096, 4096)]


# CPU mode: the cases run in course_lib.gluon_cpu, on shapes it runs in a fraction of a second each that
# still wrap the ring round its 3 slots within a tile, carry the phases from one tile into the next (fewer
# programs than tiles: the "programs" a case passes as ``sms``), and have K tails and edge tiles
WS_CPU_CASES = [
    ((1, 8, 8), BF16, "tiny", 1),
    ((77, 136, 40), BF16, "K below one step", 1),
    ((300, 520, 200), BF16, "ragged edges, several tiles a program", 2),
    ((129, 264, 456), F16, "K tail, the ring wrapped", 3),
    ((384, 512, 136), BF16, "phases across tiles", 4),
]


def _ws_cases(mode: str) -> list[Case]:
    if mode == runtime.CPU:
        return [Case(shape, dtype, label, params=(("programs", n),)) for shape, dtype, label, n in WS_CPU_CASES]
    return [Case(shape, dtype, label, gpu_only=True) for shape, dtype, label in WS_CASES]


def ws_matmul_inputs(case: Case, gen) -> dict:
    """matmul_inputs, and in CPU mode the persistent grid's programs (``sms``): a few, so that each runs
    several tiles."""
    made = matmul_inputs(case, gen)
    if "programs" in case.options:
        made["sms"] = int(case.options["programs"])
    return made


def ws_matmul_reference(a, b, sms=None):
    return matmul_reference(a, b)


def probe_ws_matmul(module, entry) -> dict:
    """In the worker: the learner's launch on CPU tensors, recorded and stopped, compiled for sm_90."""
    M, N, K = WS_PROBE
    a = torch.zeros(M, K, dtype=torch.bfloat16)
    b = torch.zeros(K, N, dtype=torch.bfloat16)
    out = torch.empty(M, N, dtype=torch.bfloat16)
    found = compilation.compile_first_launch(entry, a, b, out, sms=132)
    if found is None:
        return {"launches": 0}
    kernel, compiled = found
    facts = ws_facts(compiled, getattr(kernel, "__name__", "kernel"), type(kernel).__name__)
    return {**facts, "probe": f"a {M} x {K} by {K} x {N} product, bfloat16"}


def ws_facts(compiled, name: str = "kernel", kind: str = "GluonJITFunction") -> dict:
    """Counts of what a warp-specialized Hopper GEMM is made of, from a compiled kernel's TTGIR and PTX."""
    ttgir, ptx = compiled.asm["ttgir"], compiled.asm["ptx"]
    regions = ttgir.count("ttg.warp_specialize(")
    workers = [int(w) for w in re.findall(r"partition\d+\([^\n]*\)\s*num_warps\((\d+)\)", ttgir)]
    requested = re.search(r"requestedRegisters = array<i32: ([\d, ]+)>", ttgir)
    regs = Counter(re.findall(r"setmaxnreg\.(inc|dec)[.\w]*\s+(\d+)", ptx))
    return {
        "launches": 1,
        "kernel": name,
        "gluon": kind == "GluonJITFunction",
        "warp_specialize": regions,
        "worker_warps": workers,
        "worker_regs": [int(r) for r in requested.group(1).split(",")] if requested else [],
        "setmaxnreg": sorted(f"{op} {n}" for op, n in regs),
        "wgmma": len(re.findall(r"wgmma\.mma_async", ptx)),
        "tma_loads": len(re.findall(r"cp\.async\.bulk\.tensor\.\w+\.shared::\w+\.global", ptx)),
        "tma_stores": len(re.findall(r"cp\.async\.bulk\.tensor\.\w+\.global\.shared", ptx)),
        "mbarrier_waits": len(re.findall(r"mbarrier\.try_wait", ptx)),
        "expect_tx": len(re.findall(r"mbarrier\.arrive\.expect_tx", ptx)),
        "mbarrier_arrives": len(re.findall(r"mbarrier\.arrive", ptx)),
        "num_warps": compiled.metadata.num_warps,
        "shared": compiled.metadata.shared,
    }


NO_EXPECT = "no mbarrier.expect in the PTX: the ready barriers are never told how many bytes to wait for"


def judge_ws_matmul(facts: dict) -> list[tuple[bool, str, list[str]]]:
    if not facts.get("launches"):
        return [(False, "the launcher launched no kernel", ["ws_matmul(a, b, out) must launch ws_matmul_kernel"])]
    where = f"`{facts.get('kernel')}` compiled for sm_90 as your launcher launched it on {facts.get('probe')}"
    if not facts.get("gluon"):
        return [(False, "the kernel is no Gluon kernel", [f"{where} is a @triton.jit kernel: this task is the "
                 "Gluon (@gluon.jit) kernel of the exercise, with gl.warp_specialize"])]  # fmt: skip
    checks = []
    workers = facts.get("worker_warps", [])
    if not facts.get("warp_specialize"):
        checks.append((False, "the kernel has no warp-specialized region", [
            f"{where}: its TTGIR has no ttg.warp_specialize, so every warp runs the same code, loads and MMAs in "
            "turn: nothing overlaps the loads but what the hardware queues.",
            "Split the roles with gl.warp_specialize([(consumer, args), (producer, args)], [1], [40]): the default "
            "partition computes, a worker of 1 warp issues the TMA loads.",
        ]))  # fmt: skip
    else:
        regs = ", ".join(facts.get("setmaxnreg", [])) or "none"
        checks.append((True, "warp-specialized", [
            f"{where}: ttg.warp_specialize with {len(workers)} worker partition(s) of {workers} warps, "
            f"{facts.get('worker_regs')} registers requested; {facts.get('num_warps')} warps in all",
            f"PTX: setmaxnreg ({regs}), {facts.get('wgmma')} wgmma.mma_async, {facts.get('tma_loads')} TMA loads "
            f"(cp.async.bulk.tensor), {facts.get('tma_stores')} TMA stores, {facts.get('mbarrier_waits')} mbarrier "
            f"waits; {facts.get('shared', 0) // 1024} KB of shared memory",
        ]))  # fmt: skip
        if not any(s.startswith("inc") for s in facts.get("setmaxnreg", [])):
            checks.append((False, "registers are not moved between the roles (no setmaxnreg in the PTX)", [
                "give the worker partition few registers (worker_num_regs, e.g. [40]): the consumers' wgmma "
                "accumulators need the rest"]))  # fmt: skip
    for key, what, fix in (
        ("wgmma", "no wgmma in the PTX", "the MMAs must be warpgroup MMAs, and their result kept: acc = "
         "warpgroup_mma(a_smem, b_smem, acc, is_async=True) (an MMA whose result is dropped is deleted)"),
        ("expect_tx", NO_EXPECT,
         "before the copies of a step: mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + "
         "b_desc.block_type.nbytes); without it a ready barrier completes before its tiles land (or never)"),
        ("tma_loads", "no TMA loads in the PTX (cp.async.bulk.tensor into shared memory)",
         "the producer copies tiles with TMA: tma_load(desc, [row, col], ready.index(s), bufs.index(s))"),
        ("mbarrier_waits", "no mbarrier waits in the PTX", "each role waits on the other's barriers: mbarrier.wait"),
    ):  # fmt: skip
        if not facts.get(key):
            checks.append((False, what, [f"{where}: {fix}"]))
    if facts.get("warp_specialize") and facts.get("mbarrier_waits") == 1:
        checks.append((False, "only one role waits on a barrier (one mbarrier wait in the PTX, not two)", [
            f"{where}: the producer waits on empty[s] before it overwrites a slot, the consumers on ready[s] before "
            "they read it; without the producer's wait a slot is refilled under a running wgmma"]))  # fmt: skip
    return checks


def _ws_variants(case: Case) -> dict:
    return {"cublas": lambda a, b: torch.matmul(a, b)}


register(
    TaskSpec(
        name="ws_matmul",
        speed=SpeedTiers(
            # eager is cuBLAS: a pipelined Hopper kernel reaches it; one that waits for every wgmma does not.
            # On the H200, one process alone (results/grader_h200/speed_2026-12-03_concurrency): solution
            # 176.6 us, cuBLAS 176.4, waiting for every wgmma 197.5 (12% slower; 13% at 8192^3). Graded
            # on 2026-12-04 (results/grader_h200/speed_2026-12-04_dedupe): the waiting kernel 219.1 us
            # against cuBLAS 199.7 and the solution 200.4, which bars at 95% (plus each time's 3% noise)
            # let through as expert; passing solutions in a room of 12 jobs timed 202.6-208.3. So both
            # bars are parity, within the noise: 211.7 us there.
            fast=Tier("eager", 1.0),
            expert=Tier("solution", 1.0),
            case=Case((4096, 4096, 4096), torch.bfloat16, "timed"),
        ),
        chapter="09",
        title="A warp-specialized GEMM in Gluon: a TMA producer warp, wgmma consumers (Hopper)",
        entry="ws_matmul",
        make_inputs=ws_matmul_inputs,
        reference=ws_matmul_reference,
        cases=_ws_cases,
        tolerance=MATMUL_TOLERANCE,
        bytes_moved=_matmul_bytes,
        flops=_matmul_flops,
        tensor_cores=True,
        bench_cases=list(WS_BENCH),
        bench_variants=_ws_variants,
        needs="hopper",
        simulated=True,
        probe="course_lib.tasks.ch09_pipelining:probe_ws_matmul",
        judge=judge_ws_matmul,
        timeout_s=120.0,
        hints=[
            "The producer's step is the ring exercise's (ring_pipeline), in Gluon: mbarrier.wait(empty.index(s), "
            "phase ^ 1); mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes); then "
            "tma_load(a_desc, [pid_m * BLOCK_M, kk * BLOCK_K], ready.index(s), a_bufs.index(s)) and the same for b "
            "at [kk * BLOCK_K, pid_n * BLOCK_N].",
            "The consumer: mbarrier.wait(ready.index(s), (count // NUM_BUFFERS) & 1); acc = warpgroup_mma("
            "a_bufs.index(s), b_bufs.index(s), acc, is_async=True); acc = warpgroup_mma_wait(num_outstanding=1, "
            "deps=(acc,)); the wgmma of the previous step has now completed: mbarrier.arrive(empty.index((count - 1) "
            "% NUM_BUFFERS), count=1) when kk > 0.",
            "After a tile's K loop one wgmma is still running: warpgroup_mma_wait(num_outstanding=0, deps=(acc,)), "
            "then free its slot. Releasing a slot while its wgmma runs lets the producer overwrite the tile under it.",
            "gl.warp_specialize takes a list of (function, argument tuple) pairs, the default partition first, then "
            "the warps of each worker ([1]) and their registers per thread ([40]). CPU mode runs your cases in the "
            "course's Gluon simulator (a protocol mistake is named there, with the partition, barrier and slot), "
            "then compiles your kernel for sm_90 and checks its structure; its speed needs a Hopper GPU.",
        ],
    )
)
