"""padded_bmm's pointer path (the exercise's hinted kernel) timed on rows 866, 872 and 880 apart, with
the given descriptor path switched off, beside the descriptor path and cuBLAS: how much of the padded
layout's gain the 16-byte loads bring by themselves. On a GPU:

    PYTHONPATH=. python3 scripts/padded_pointer_check.py OUT_DIR
"""

import json
import sys
import time

import course_lib  # noqa: F401
import torch

from course_lib import runtime, sources, tasks, timing
from course_lib.tasks import Case

mod = sources.load_module("padded_bmm")
spec = tasks.get("padded_bmm")
rows = []
for k_stride in (866, 872, 880):
    case = Case((1024, 433, 256, 866), torch.bfloat16, "bench", params=(("k_stride", k_stride),))
    inputs = spec.make_inputs(case, torch.Generator(device="cuda").manual_seed(0))
    a, e, out = inputs["a"], inputs["e"], inputs["out"]
    fit = mod.descriptors_fit
    mod.descriptors_fit = lambda *t: False  # the pointer path, whatever the layout
    pointer = timing.bench(lambda: mod.padded_bmm(a, e, out)).median_ms
    mod.descriptors_fit = fit
    tma = timing.bench(lambda: mod.padded_bmm_tma(a, e, out)).median_ms if fit(a, e, out) else None
    cublas = timing.bench(lambda: torch.matmul(a, e, out=out)).median_ms
    rows.append({"k_stride": k_stride, "pointer_ms": pointer, "tma_ms": tma, "cublas_ms": cublas})
    print(rows[-1], flush=True)
meta = {"gpu": runtime.gpu_info().name, "versions": runtime.versions(), "date": time.strftime("%Y-%m-%d")}
json.dump({"meta": meta, "rows": rows}, open(f"{sys.argv[1]}/experiment_padded_pointer_h200.json", "w"), indent=1)
