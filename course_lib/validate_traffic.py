"""Check the traffic model against a GPU: three copies, predicted in the interpreter, timed on the GPU.

    python -m course_lib.validate_traffic --record results/traffic_validation_h200.json   (GPU)

The prediction runs in a CPU-mode subprocess (the interpreter sees the addresses); the timing runs in
this process on the GPU; the record holds both, side by side, with the GPU, versions and date.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import triton
import triton.language as tl

from . import runtime


@triton.jit
def strided_copy_kernel(
    x_ptr,  # source; element i is read from x_ptr + i * stride
    out_ptr,  # destination, contiguous
    n_elements,  # elements copied
    stride,  # distance between elements read, in elements
    BLOCK_SIZE: tl.constexpr,
):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    values = tl.load(x_ptr + offsets * stride, mask=mask)
    tl.store(out_ptr + offsets, values, mask=mask)


# name -> (stride, element offset of the source from a 128-byte boundary)
VARIANTS = {
    "coalesced": (1, 0),
    "misaligned": (1, 1),
    "strided_2": (2, 0),
    "strided_4": (4, 0),
    "strided_8": (8, 0),
}
BLOCK_SIZE = 1024


def _launch(name: str, n: int, device: str):
    import torch

    stride, offset = VARIANTS[name]
    buf = torch.randn(n * stride + offset + 64, device=device)
    x = buf[offset:]
    out = torch.empty(n, device=device)
    grid = (triton.cdiv(n, BLOCK_SIZE),)
    return lambda: strided_copy_kernel[grid](x, out, n, stride, BLOCK_SIZE=BLOCK_SIZE)


def predict(n: int = 16 * BLOCK_SIZE) -> dict:
    """Sector counts per element copied, from the interpreter (CPU mode)."""
    from . import traffic

    out = {}
    for name in VARIANTS:
        launch = _launch(name, n, "cpu")
        with traffic.record() as rec:
            launch()
        s = rec.summary()
        out[name] = {
            "sectors_per_element": s["sectors"] / n,
            "distinct_sectors_per_element": s["distinct_sectors"] / n,
            "efficiency": s["efficiency"],
        }
    return out


def measure(n: int = 256 * 2**20) -> dict:
    """Median time of each copy on the GPU (GPU mode)."""
    from . import timing

    out = {}
    for name in VARIANTS:
        launch = _launch(name, n, "cuda")
        t = timing.bench(launch)
        out[name] = {"median_ms": t.median_ms, "p20_ms": t.p20_ms, "p80_ms": t.p80_ms, "n_elements": n}
    return out


def _predict_in_subprocess() -> dict:
    env = dict(os.environ, COURSE_MODE="cpu")
    code = "import json, course_lib.validate_traffic as v; print(json.dumps(v.predict()))"
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


def compare(predicted: dict, measured: dict) -> list[dict]:
    base_p = predicted["coalesced"]["sectors_per_element"]
    base_d = predicted["coalesced"]["distinct_sectors_per_element"]
    base_m = measured["coalesced"]["median_ms"]
    rows = []
    for name in VARIANTS:
        rows.append(
            {
                "variant": name,
                "stride": VARIANTS[name][0],
                "offset_elements": VARIANTS[name][1],
                "predicted_ratio_per_warp": predicted[name]["sectors_per_element"] / base_p,
                "predicted_ratio_distinct": predicted[name]["distinct_sectors_per_element"] / base_d,
                "measured_ratio": measured[name]["median_ms"] / base_m,
                "measured_ms": measured[name]["median_ms"],
            }
        )
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--record", help="write the comparison here (JSON)")
    args = parser.parse_args(argv)
    if not runtime.is_gpu():
        print("the validation times kernels: run it on a GPU")
        return 2
    predicted = _predict_in_subprocess()
    measured = measure()
    rows = compare(predicted, measured)
    info = runtime.gpu_info()
    record = {
        "what": "traffic model (32-byte sectors per warp of 32 lanes) against measured copy times",
        "gpu": info.name,
        "versions": runtime.versions(),
        "date": time.strftime("%Y-%m-%d"),
        "block_size": BLOCK_SIZE,
        "predicted": predicted,
        "measured": measured,
        "comparison": rows,
    }
    print(f"{'variant':<12}{'model/warp':>12}{'model/distinct':>16}{'measured':>10}{'ms':>10}")
    for r in rows:
        print(
            f"{r['variant']:<12}{r['predicted_ratio_per_warp']:>12.3f}{r['predicted_ratio_distinct']:>16.3f}"
            f"{r['measured_ratio']:>10.3f}{r['measured_ms']:>10.3f}"
        )
    if args.record:
        with open(args.record, "w") as f:
            json.dump(record, f, indent=1)
    return 0


if __name__ == "__main__":
    import course_lib  # noqa: F401  (sets the mode up before anything else)

    sys.exit(main())
