"""Chapters 09-10's Gluon kernels run on a GPU and on the CPU (course_lib.gluon_cpu), on the same inputs.

    PYTHONPATH=. python3 scripts/gluon_gpu_outputs.py --out DIR

On a Hopper GPU: each case's inputs are made on the CPU from a seed (so any machine makes them
again), the kernel runs on the GPU, its output is saved (DIR/outputs.pt, bfloat16; an output equal
to an earlier case's bit for bit is saved once, DIR/outputs.json names which), and the same
kernel runs in the CPU simulator under two orders of the asynchronous events; the largest difference
between the two outputs is printed and written to DIR/outputs.json. tests/test_gluon_cpu.py compares
the simulator with the saved GPU outputs wherever results/gluon_cpu_h200/outputs.pt exists.

The cases are small (the simulator runs them in seconds) and still wrap the ring round its slots,
have K tails, edge tiles and several tiles per program."""

from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib
import sys
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# name: (file, kind, shape, programs); the kind says which inputs and call
CASES = {
    "ws_matmul 300x520x200 on 2": ("solutions/ws_matmul.py", "matmul", (300, 520, 200), 2),
    "ws_matmul 129x264x456 on 3": ("solutions/ws_matmul.py", "matmul", (129, 264, 456), 3),
    "ws_matmul wait_for_zero 300x520x200 on 2": ("tests/good/ch09_wait_for_zero/ws_matmul.py", "matmul", (300, 520, 200), 2),
    "ws_matmul one_slot 300x520x200 on 2": ("tests/slow/ch09_one_slot/ws_matmul.py", "matmul", (300, 520, 200), 2),
    "ws_compression B12 U3 M130 Ku72 Kc136 N96 on 3": ("solutions/ws_compression.py", "compression", (12, 3, 130, 72, 136, 96), 3),
    "ws_compression serpentine B12 U3 M130 Ku72 Kc136 N96 on 3": (
        "tests/good/ch10_ws_tile_serpentine/ws_compression.py", "compression", (12, 3, 130, 72, 136, 96), 3),
}  # fmt: skip


def module_of(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def inputs(kind: str, shape: tuple) -> dict:
    """The case's inputs on the CPU, from seed 0, and the output buffer (NaN: every element must be written)."""
    gen = torch.Generator().manual_seed(0)
    if kind == "matmul":
        M, N, K = shape
        a = torch.randn(M, K, generator=gen).to(torch.bfloat16)
        b = torch.randn(K, N, generator=gen).to(torch.bfloat16)
        return {"a": a, "b": b, "out": torch.full((M, N), float("nan"), dtype=torch.bfloat16)}
    B, U, M, Ku, Kc, N = shape
    w_u, w_c = torch.randn(M, Ku, generator=gen).bfloat16(), torch.randn(M, Kc, generator=gen).bfloat16()
    e_user, e_cand = torch.randn(U, Ku, N, generator=gen).bfloat16(), torch.randn(B, Kc, N, generator=gen).bfloat16()
    user_of = torch.randint(0, U, (B,), generator=gen)
    out = torch.full((B, M, N), float("nan"), dtype=torch.bfloat16)
    return {"w_u": w_u, "w_c": w_c, "e_user": e_user, "e_cand": e_cand, "user_of": user_of, "out": out}


def run(module, kind: str, tensors: dict, programs: int) -> torch.Tensor:
    if kind == "matmul":
        module.ws_matmul(tensors["a"], tensors["b"], tensors["out"], sms=programs)
    else:
        t = tensors
        module.ws_compression(t["w_u"], t["w_c"], t["e_user"], t["e_cand"], t["user_of"], t["out"], sms=programs)
    return tensors["out"]


def input_sum(tensors: dict) -> float:
    """A checksum of the inputs, so that a machine whose generator makes other numbers is found out."""
    return float(sum(t.double().sum().item() for name, t in tensors.items() if name != "out"))


def difference(x: torch.Tensor, y: torch.Tensor) -> float:
    """The largest |x - y| / (|y| + 1): the tests' measure (bfloat16 rounds at 2**-8 relative)."""
    return ((x.double() - y.double()).abs() / (y.double().abs() + 1)).max().item()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    from course_lib import gluon_cpu

    saved, report = {}, {"cases": {}}
    report["machine"] = {
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "triton": __import__("triton").__version__,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    for name, (path, kind, shape, programs) in CASES.items():
        module = module_of(path, "gluon_case_" + str(abs(hash(name))))
        cpu = inputs(kind, shape)
        gpu = {k: v.cuda() for k, v in cpu.items()}
        start = time.perf_counter()
        out_gpu = run(module, kind, gpu, programs).cpu()
        torch.cuda.synchronize()
        row = {"file": path, "shape": list(shape), "programs": programs, "input_sum": input_sum(cpu)}
        row["gpu_nan"] = int(out_gpu.isnan().sum())
        row["gpu_s"] = round(time.perf_counter() - start, 2)
        for order, weight in (("random", 1.0), ("late", 0.0)):
            sim = inputs(kind, shape)
            start = time.perf_counter()
            with gluon_cpu.launches_simulated(seed=0, event_weight=weight):
                out_cpu = run(module, kind, sim, programs)
            row[f"cpu_{order}_s"] = round(time.perf_counter() - start, 2)
            row[f"cpu_{order}_vs_gpu"] = difference(out_cpu, out_gpu)
            row[f"cpu_{order}_equal_fraction"] = (out_cpu == out_gpu).double().mean().item()
        same = next((other for other, kept in saved.items() if torch.equal(kept, out_gpu)), None)
        if same is None:
            saved[name] = out_gpu
        else:  # a right alternative gives the solution's very bits on the GPU: kept once
            row["gpu_output_same_as"] = same
        report["cases"][name] = row
        print(name, json.dumps(row), flush=True)
    torch.save(saved, args.out / "outputs.pt")
    (args.out / "outputs.json").write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
