"""What notebook 09 reads and shows from the records and the compiled code: section 2's stage sweep
beside the pipeline model, what a warp-specialized kernel's compiled code holds, section 4's Gluon
GEMM records against cuBLAS, and section 5's automatic warp specialization, recorded and compiled
here. Each function returns the text the notebook prints; the models and the kernels stay in the
notebook, where the prose walks through them.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile

import triton

from .. import compilation, pipeline_sim, results
from ..tasks.ch09_pipelining import ws_facts

STAGES_RECORD = "experiment_stages_h200.json"  # scripts/experiments_gemm.py stages: mm_ptr at num_stages 1 to 4
PEAKS_RECORD = "bench_ws_matmul_h200.json"  # its meta.peaks hold the H200's measured copy bandwidth
GLUON_RECORD = "experiment_gluon_ws_h200.json"  # scripts/gluon_ws_matmul.py --run: 3 and 2 slots beside cuBLAS
AUTO_WS_RECORD = "experiment_auto_ws_h200.json"  # scripts/experiments_gemm.py auto_ws: warp_specialize=True or not
SMEM_PER_SM = 228 * 1024  # Hopper: one SM's shared memory, shared by the programs on it (chapter 06)

# --------------------------------------------------------------------------------------------------
# section 2: the recorded stage sweep beside pipeline_sim's model


def stages_against_model(sweep, l2_model, dram_model, costs, bench_rows, tile, warps, element_size=2) -> str:
    """The stage sweep (STAGES_RECORD, or None where it is not recorded) beside the model: the model's
    inputs (``costs``) against cuBLAS in the same run and the copy bandwidth of PEAKS_RECORD; the
    measured TFLOP/s at 8192^3 for ``tile`` and ``warps`` against ``l2_model`` row by row (which row
    is fitted, which tests it); each step's direction, measured and modelled, with a change within
    the spread of the grouped solution's two timings (``bench_rows``) counted as flat; how far
    ``dram_model`` falls short; and every curve of the record, with the programs of 3 and 4 stages one
    SM's shared memory holds and the buffers that hide the model's latency (section 1's rule)."""
    if sweep is None:
        return "\nnum_stages 1 to 4: not recorded yet (scripts/experiments_gemm.py stages writes it on a GPU)"
    big = [8192, 8192, 8192]
    measured = {
        r["config"]["num_stages"]: r["tflops"]
        for r in sweep["rows"]
        if r["variant"] != "cublas"
        and r["shape"] == big
        and all(r["config"][k] == v for k, v in tile.items() if k != "GROUP_M")
        and r["config"]["num_warps"] == warps
    }
    cublas = {tuple(r["shape"]): r["tflops"] for r in sweep["rows"] if r["variant"] == "cublas"}
    peaks = (results.read_record(PEAKS_RECORD) or {"meta": {}})["meta"].get("peaks", {})
    lines = [
        f"\nrecorded on {results.provenance(sweep['meta'])} ({STAGES_RECORD}): scripts/experiments_gemm.py's "
        f"mm_ptr, bf16, {warps} warps",
        "the model's inputs, and what they stand for:",
        f"  {costs['tflops']:.0f} TFLOP/s for the tensor cores; cuBLAS in the same run: "
        + ", ".join(f"{t:.0f} at {shape}" for shape, t in cublas.items()),
    ]
    if "copy_gbs" in peaks:
        lines.append(
            f"  {costs['bandwidth_tbs']:g} TB/s for device memory; a 2 GiB copy on the H200: "
            f"{peaks['copy_gbs']:.0f} GB/s ({PEAKS_RECORD}, meta.peaks.copy_gbs)"
        )
    lines.append(f"  a load latency of {costs['load_latency_us']:g} us: fitted to the one-stage row below")

    # a change smaller than the spread of two timings of one call counts as flat: the grouped solution's two repeats
    repeats = [r["tflops"] for r in bench_rows if r["variant"] == "solution" and r["shape"] == big]
    flat = abs(repeats[0] - repeats[1]) / max(repeats) if len(repeats) == 2 else 0.02
    lines += [
        "\n8192^3, 128 x 256 x 64, against the model at 12 TB/s:",
        f"{'num_stages':>10}{'measured':>10}{'model':>8}{'measured / model':>18}   what the row is",
    ]
    predicted = {p.stages: p for p in l2_model}
    for s in sorted(measured):
        p = predicted[s]
        what = (
            "fitted: it sets the latency"
            if s == 1
            else "the tensor cores' rate the model was given"
            if p.utilization > 0.95
            else "a prediction: the test"
        )
        lines.append(f"{s:>10}{measured[s]:>10.0f}{p.tflops:>8.0f}{measured[s] / p.tflops:>18.0%}   {what}")

    def direction(change):
        return "flat" if abs(change) <= flat else ("up" if change > 0 else "down")

    lines.append(
        f"\nstep by step (a change within {flat:.1%}, the spread of the grouped solution's two timings in "
        f"{bench_rows[0]['file'] if bench_rows else 'its bench'}, counts as flat):"
    )
    agree = []
    for s in sorted(measured)[1:]:
        m, p = measured[s] / measured[s - 1] - 1, predicted[s].tflops / predicted[s - 1].tflops - 1
        agree.append(direction(m) == direction(p))
        lines.append(
            f"  {s - 1} -> {s} stages: measured {m:+6.1%} ({direction(m)}), model {p:+6.1%} ({direction(p)})"
            f"  {'same direction' if agree[-1] else 'different directions'}"
        )
    lines.append(f"the model and the measurement agree in direction at {sum(agree)} of {len(agree)} steps")
    gains = {
        s: (measured[s] / measured[s - 1], predicted[s].tflops / predicted[s - 1].tflops) for s in sorted(measured)[1:]
    }
    step_m = max(gains, key=lambda s: gains[s][0])
    step_p = max(gains, key=lambda s: gains[s][1])
    lines.append(
        f"the step that buys the most: measured {step_m - 1} -> {step_m} stages, model {step_p - 1} -> {step_p}"
        + ("" if step_m == step_p else ": the shape of the curve differs")
    )
    best_dram = max(p.tflops for p in dram_model)
    lines.append(
        f"at {costs['bandwidth_tbs']:g} TB/s the model tops out at {best_dram:.0f} TFLOP/s, "
        f"{max(measured.values()) / best_dram:.1f}x below the best measured: the loads cannot all have come from "
        "device memory"
    )

    curves = {}  # (BLOCK_N, shape) -> {num_stages: TFLOP/s}
    for r in sweep["rows"]:
        if r["variant"] != "cublas":
            curves.setdefault((r["config"]["BLOCK_N"], tuple(r["shape"])), {})[r["config"]["num_stages"]] = r["tflops"]
    lines += [
        f"\nevery curve of the record (TFLOP/s); 'per SM': programs of 3 / 4 stages the SM's "
        f"{SMEM_PER_SM // 1024} KB hold; 'hide': buffers that hide {costs['load_latency_us']:g} us (section 1)",
        f"  {'tile':<12}{'shape':<20}{'K steps':>8}{'1':>6}{'2':>6}{'3':>6}{'4':>6}{'3 -> 4':>16}{'per SM':>8}"
        f"{'hide':>6}",
    ]
    for (block_n, shape), rate in curves.items():
        stage_bytes = (tile["BLOCK_M"] + block_n) * tile["BLOCK_K"] * element_size  # one stage's slices
        step_us = pipeline_sim.matmul_costs(block_n=block_n)["compute_us"]  # one K step on the tensor cores
        change = rate[4] / rate[3] - 1
        lines.append(
            f"  {tile['BLOCK_M']} x {block_n:<6}{str(shape):<20}{shape[2] // tile['BLOCK_K']:>8}"
            + "".join(f"{rate[s]:>6.0f}" for s in (1, 2, 3, 4))
            + f"{change:>+9.1%} ({direction(change)})".rjust(16)
            + f"{SMEM_PER_SM // (3 * stage_bytes)} / {SMEM_PER_SM // (4 * stage_bytes)}".rjust(8)
            + f"{pipeline_sim.buffers_to_hide_latency(costs['load_latency_us'], step_us):>6}"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# sections 4 and 5: what a compiled kernel holds

WS_COUNTS = {  # ws_facts key -> what it counts; ws_facts is the grader's reading of the compiled code
    "warp_specialize": "ttg.warp_specialize regions in the TTGIR",
    "wgmma": "wgmma.mma_async: asynchronous warpgroup MMAs",
    "tma_loads": "cp.async.bulk.tensor, global -> shared: TMA loads",
    "tma_stores": "cp.async.bulk.tensor, shared -> global: the epilogue's TMA store",
    "mbarrier_waits": "mbarrier.try_wait: waits on ready and empty",
    "mbarrier_arrives": "mbarrier.arrive: arrivals (expect_tx among them)",
}


def ws_table(kernel, compiled) -> str:
    """What the grader reads in a compiled warp-specialized kernel (``ws_facts``), one count a line
    (WS_COUNTS), then the wgmma.wait_group arguments of its PTX, its warps, the workers' warps and
    registers, setmaxnreg and its shared memory."""
    facts = ws_facts(compiled, kernel.__name__, type(kernel).__name__)
    lines = [f"  {facts[key]:>3}  {meaning}" for key, meaning in WS_COUNTS.items()]
    waits = re.findall(r"wgmma\.wait_group\.sync\.aligned\s+(\d+)", compilation.asm(compiled, "ptx"))
    lines += [
        f"  wgmma.wait_group leaves {' or '.join(sorted(set(waits))) or '-'} MMA(s) running",
        f"  {facts['num_warps']} warps in all; workers of {facts['worker_warps']} warp(s) asking "
        f"{facts['worker_regs']} registers per thread; setmaxnreg {', '.join(facts['setmaxnreg']) or 'none'}; "
        f"{facts['shared'] // 1024} KB of shared memory",
    ]
    return "\n".join(lines)


# a TMA load in the PTX: (shared-memory destination, descriptor, innermost coordinate)
TMA_LOAD = r"cp\.async\.bulk\.tensor\.\w+\.shared::\w+\.global\S*\s+\[(%r\d+)\], \[(%rd\d+), \{(%r\d+),"


def tma_copies(ptx: str) -> str:
    """The TMA loads of a PTX text, grouped by descriptor: how many copies each descriptor issues and,
    where more than one, how far apart they land in shared memory and in columns, read from the
    constants added to the first copy's registers."""
    copies = re.findall(TMA_LOAD, ptx)
    plus = {  # a register written as another one plus a constant -> that constant
        dst: int(c) for dst, src, c in re.findall(r"(?:add|or)\.[bs]32\s+(%r\d+), (%r\d+), (\d+);", ptx) if dst != src
    }
    by_descriptor = {}  # descriptor register -> [(shared-memory offset, innermost coordinate's offset)], one per copy
    for dst, desc, inner in copies:
        by_descriptor.setdefault(desc, []).append((plus.get(dst, 0), plus.get(inner, 0)))
    lines = [f"TMA loads in the PTX: {len(copies)}, through {len(by_descriptor)} descriptors"]
    for desc, offsets in by_descriptor.items():
        (smem0, col0), many = offsets[0], len(offsets) > 1
        apart = (
            (
                "; from the first, shared memory +"
                + ", +".join(f"{s - smem0:,}" for s, _ in offsets)
                + " bytes, columns +"
                + ", +".join(str(c - col0) for _, c in offsets)
            )
            if many
            else ""
        )
        lines.append(f"  descriptor {desc}: {len(offsets)} cop{'ies' if many else 'y'}{apart}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# section 4: the Gluon GEMM's records against cuBLAS


def gluon_records_table(record: dict | None, ws_bench: list[dict], bench_rows: list[dict]) -> str:
    """The Gluon GEMM's two records and chapter 06's solution, each against the cuBLAS of its own run:
    the script's experiment (GLUON_RECORD, or None: its checks, 3 and 2 slots), the task's bench
    (``results.records("ws_matmul")``), chapter 06's grouped solution (``bench_rows``), then each
    timing's share of its run's cuBLAS, lowest to highest, and how far cuBLAS moved between runs."""
    shares = {}  # (shape, source) -> [share of the cuBLAS of the same run, one per timing]
    cublas_runs = {}  # shape -> cuBLAS's TFLOP/s in each run
    lines = []
    if record is None:
        lines.append("not recorded yet: on a Hopper GPU, PYTHONPATH=. python scripts/gluon_ws_matmul.py --run results")
    else:
        lines.append(f"the script's experiment, recorded on {results.provenance(record['meta'])} ({GLUON_RECORD}):")
        for r in record["rows"]:
            if "check" in r:
                lines.append(f"  check {tuple(r['check'])}: relative error {r['rel_err']:.1e}")
        slots = {}  # (shape, slots) -> TFLOP/s
        for r in record["rows"]:
            if "shape" in r:
                shape, share = tuple(r["shape"]), r["tflops"] / r["cublas_tflops"]
                slots[shape, r["num_buffers"]] = r["tflops"]
                if r["num_buffers"] == 3:
                    shares.setdefault((shape, "Gluon GEMM"), []).append(share)
                    cublas_runs.setdefault(shape, []).append(r["cublas_tflops"])
                lines.append(
                    f"  {str(shape):<20} {r['num_buffers']} slots: {r['tflops']:4.0f} TFLOP/s, cuBLAS "
                    f"{r['cublas_tflops']:4.0f}: {share:5.0%} of cuBLAS"
                )
        for shape in dict.fromkeys(s for s, _ in slots):
            if (shape, 2) in slots and (shape, 3) in slots:
                lines.append(f"  {str(shape):<20} 2 slots: {slots[shape, 2] / slots[shape, 3]:.0%} of 3 slots' TFLOP/s")

    if not ws_bench:
        lines.append(
            "\nthe task's bench: not recorded yet (on a Hopper GPU: python -m course_lib bench ws_matmul "
            "--record results/bench_ws_matmul_h200.json)"
        )
    else:
        lines.append(f"\nthe task's bench, recorded on {ws_bench[0]['provenance']} ({ws_bench[0]['file']}):")
        for shape in dict.fromkeys(tuple(r["shape"]) for r in ws_bench):
            rows = [r for r in ws_bench if tuple(r["shape"]) == shape]
            ref = next((r for r in rows if r["variant"] == "cublas"), None)
            lines.append(f"  {shape} {rows[0]['dtype']}:")
            for r in rows:
                run = f" (run {r['repeat']})" if "repeat" in r else ""
                share = f"{r['tflops'] / ref['tflops']:5.0%} of cuBLAS" if ref else ""
                lines.append(
                    f"    {r['variant'] + run:<20}{r['median_ms'] * 1e3:8.1f} us {r['tflops']:6.0f} TFLOP/s  {share}"
                )
                if ref and r["variant"] == "solution":
                    shares.setdefault((shape, "Gluon GEMM"), []).append(r["tflops"] / ref["tflops"])
            if ref:
                cublas_runs.setdefault(shape, []).append(ref["tflops"])

    if bench_rows:  # chapter 06's grouped solution (3 stages), read in section 2
        lines.append(
            f"\nchapter 06's grouped solution, recorded on {bench_rows[0]['provenance']} ({bench_rows[0]['file']}):"
        )
        for r in bench_rows:
            if r["variant"] == "solution":
                cublas = next(c["tflops"] for c in bench_rows if c["variant"] == "cublas" and c["shape"] == r["shape"])
                shares.setdefault((tuple(r["shape"]), "chapter 06"), []).append(r["tflops"] / cublas)
                lines.append(
                    f"  {str(tuple(r['shape'])):<20} {r['tflops']:4.0f} TFLOP/s: {r['tflops'] / cublas:5.0%} of cuBLAS"
                )

    if shares:
        lines.append("\neach timing's share of the cuBLAS of its own run, lowest to highest:")
        for shape in dict.fromkeys(s for s, _ in shares):
            for who in ("Gluon GEMM", "chapter 06"):
                if (shape, who) in shares:
                    mine = shares[shape, who]
                    lines.append(
                        f"  {str(shape):<20} {who:<12}{min(mine):.1%} to {max(mine):.1%} ({len(mine)} timings)"
                    )
            if len(cublas_runs.get(shape, [])) > 1:
                runs = cublas_runs[shape]
                lines.append(
                    f"  {'':<20} {'cuBLAS':<12}{min(runs):.0f} to {max(runs):.0f} TFLOP/s across the Gluon GEMM's "
                    f"{len(runs)} runs ({max(runs) / min(runs) - 1:.1%} apart)"
                )
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# section 5: automatic warp specialization, recorded and compiled here


def _auto_ws_rows_by_shape(record: dict):
    """The record's rows other than cublas, shape by shape (in the order the shapes first appear)."""
    rows = record["rows"]
    for shape in dict.fromkeys(tuple(r["shape"]) for r in rows):
        for r in rows:
            if r["variant"] != "cublas" and tuple(r["shape"]) == shape:
                yield shape, r


def auto_ws_verdicts(record: dict | None) -> dict:
    """(the record's form of the loop, warps) -> the set of what warp_specialize=True did there, over
    the shapes of AUTO_WS_RECORD: "fails" (no build), "ignored" (no ttg.warp_specialize region) or
    "specialized"; {} where the record is None."""
    verdicts = {}
    if record is None:
        return verdicts
    for _, r in _auto_ws_rows_by_shape(record):
        if r["warp_specialize"]:
            verdict = "fails" if not r["compiles"] else "specialized" if r["region"] else "ignored"
            verdicts.setdefault((r["form"], r["num_warps"]), set()).add(verdict)
    return verdicts


def auto_ws_table(record: dict | None) -> str:
    """AUTO_WS_RECORD (or None where it is not recorded): each loop, warps and flag per shape beside
    cuBLAS (compiles, region, time, share of cuBLAS); what the flag did (auto_ws_verdicts); the time
    with the flag over the time without, where both compiled; and the 4-warp loop's rate beside its
    accumulator's values per thread."""
    if record is None:
        return "not recorded yet (scripts/experiments_gemm.py auto_ws writes it on a GPU)"
    rows = record["rows"]
    lines = [
        f"recorded on {results.provenance(record['meta'])} ({AUTO_WS_RECORD}); bf16, 128 x 256 x 64, 3 stages",
        f"  {'loads':<12}{'warps':>5}{'warp_specialize':>17}{'compiles':>10}{'region':>8}{'ms':>8}{'TFLOP/s':>9}"
        f"{'of cuBLAS':>11}",
    ]
    for shape in dict.fromkeys(tuple(r["shape"]) for r in rows):
        ref = next(r for r in rows if r["variant"] == "cublas" and tuple(r["shape"]) == shape)
        lines.append(f"{shape}: cuBLAS {ref['median_ms']:.3f} ms, {ref['tflops']:.0f} TFLOP/s")
        for r in rows:
            if r["variant"] == "cublas" or tuple(r["shape"]) != shape:
                continue
            head = f"  {r['form']:<12}{r['num_warps']:>5}{str(r['warp_specialize']):>17}{str(r['compiles']):>10}"
            if r["compiles"]:
                lines.append(
                    f"{head}{str(r['region']):>8}{r['median_ms']:>8.3f}{r['tflops']:>9.0f}"
                    f"{r['tflops'] / ref['tflops']:>11.0%}"
                )
            else:
                lines.append(f"{head}{'-':>8}{'-':>8}{'-':>9}{'-':>11}")

    lines.append(f"\nwhat warp_specialize=True did (Triton {record['meta']['versions']['triton']}, both shapes):")
    for (form, warps), verdicts in auto_ws_verdicts(record).items():
        lines.append(f"  {form}, {warps} warps: {' / '.join(sorted(verdicts))}")
    same_loop = {}  # (shape, form, warps) -> {warp_specialize: ms}
    for r in rows:
        if r["variant"] != "cublas" and r["compiles"]:
            key = (tuple(r["shape"]), r["form"], r["num_warps"])
            same_loop.setdefault(key, {})[r["warp_specialize"]] = r["median_ms"]
    ratios = {key: t[True] / t[False] for key, t in same_loop.items() if len(t) == 2}
    if ratios:
        lines.append(
            "time with warp_specialize=True / without, where both compiled: "
            + ", ".join(f"{ratio:.3f}" for ratio in ratios.values())
            + f" (at most {max(abs(r - 1) for r in ratios.values()):.1%} apart)"
        )
    slow = [
        r
        for r in rows
        if r["variant"] != "cublas" and r["compiles"] and r["num_warps"] == 4 and not r["warp_specialize"]
    ]
    acc_per_thread = 128 * 256 // (4 * 32)  # fp32 accumulator values per thread, at 4 warps
    if slow:
        tflops = [r["tflops"] for r in slow]
        lines.append(
            f"at 4 warps without the flag: {min(tflops):.0f} to {max(tflops):.0f} TFLOP/s; "
            f"the 128 x 256 fp32 accumulator is {acc_per_thread} values per thread on 128 threads, "
            f"and a thread has at most 255 registers"
        )
    return "\n".join(lines)


def compile_capturing_stderr(compile_once):
    """(compiled kernel or None, the exception or None, what the compiler wrote to stderr) of
    ``compile_once()``: the compiler's C++ error text goes to the process's stderr (file descriptor
    2), which is sent to a temporary file for the call."""
    sys.stderr.flush()
    with tempfile.TemporaryFile(mode="w+b") as sink:
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        try:
            compiled, error = compile_once(), None
        except Exception as e:  # the compiler's failure is the result we want to show
            compiled, error = None, e
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        sink.seek(0)
        return compiled, error, sink.read().decode(errors="replace")


def compile_outcome(kernel, warps: int, compiled, error, said: str) -> str:
    """One compile of compile_capturing_stderr as text: a failure with its exception and the first
    three error lines the compiler wrote; or the ttg.warp_specialize region of the TTGIR, the warps,
    the shared memory and the setmaxnreg count of the PTX."""
    name = f"{compilation.python_function(kernel).__name__}, {warps} warps"
    if error is not None:
        lines = [f"  {name}: fails to compile: {type(error).__name__}: {str(error).splitlines()[0][:100]}"]
        said_lines = [ln.strip() for ln in said.splitlines() if re.search(r"error|ERROR|Assertion|failed while", ln)]
        lines += [f"      {line if len(line) <= 150 else line[:147] + '...'}" for line in said_lines[:3]]
        return "\n".join(lines)
    region = "ttg.warp_specialize" in compiled.asm["ttgir"]
    total, setmaxnreg = compiled.metadata.num_warps, compilation.asm(compiled, "ptx").count("setmaxnreg")
    return (
        f"  {name}: compiles; warp_specialize region in the TTGIR: {region}; {total} warps; shared memory "
        f"{compiled.metadata.shared / 1024:.0f} KB; setmaxnreg: {setmaxnreg}"
    )


def auto_ws_against_record(verdicts: dict, record: dict | None) -> str:
    """This Triton's verdicts ({(form, warps): "fails", "ignored" or "specialized"}) beside the
    record's (auto_ws_verdicts of AUTO_WS_RECORD), each difference marked."""
    recorded = auto_ws_verdicts(record)
    if not recorded:
        return f"\nno H200 record to set these verdicts beside (results/{AUTO_WS_RECORD})"
    lines = [
        f"\nyour Triton ({triton.__version__}) against the H200 record (Triton {record['meta']['versions']['triton']}):"
    ]
    for (form, warps), verdict in verdicts.items():
        was = " / ".join(sorted(recorded.get((form, warps), {"not recorded"})))
        lines.append(
            f"  {form}, {warps} warps: {verdict} here, {was} there" + ("" if verdict == was else "  <- differs")
        )
    return "\n".join(lines)


def simulated_ws_matmul(module, who: str, shape=(300, 520, 200), programs: int = 2, seed: int = 0):
    """``module.ws_matmul`` run in course_lib's Gluon simulator on seeded bfloat16 CPU inputs (few
    programs, so each runs several tiles and the ring wraps round): (the text, program 0's trace). The
    text gives the relative error against torch and who waited on which barrier."""
    import torch

    from ..widgets.gluon_trace import run_traced, trace_text

    M, N, K = shape
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(M, K, generator=gen).to(torch.bfloat16)
    b = torch.randn(K, N, generator=gen).to(torch.bfloat16)
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16)  # NaN: every element must be stored
    [(name, traces)] = run_traced(module.ws_matmul, a, b, out, sms=programs, seed=seed)
    expected = a.float() @ b.float()
    error = ((out.float() - expected).norm() / expected.norm()).item()
    text = (
        f"{who} in the simulator at {M} x {N} x {K} on {programs} programs: relative error {error:.1e} against "
        f"torch (bf16 output: about 1e-3 expected)\n"
        + trace_text(traces[0], f"{name}, program 0 of {len(traces)}, seed {seed}:")
    )
    return text, traces[0]
