"""The widgets in GPU mode, without a browser: the benchmark panel, the tuner (five slider settings,
Run pressed) and the comparison chart, as a notebook would build them. Prints the text they show and
saves their plots as PNG files in $OUT.

    OUT=dir PYTHONPATH=. python3 scripts/widgets_gpu_check.py

A GPU machine without ipywidgets can be given the pure-Python wheels' contents in a folder named by
WIDGET_DEPS (appended to sys.path).
"""

import os
import sys
import time

if os.environ.get("WIDGET_DEPS"):
    sys.path.append(os.environ["WIDGET_DEPS"])
os.environ.setdefault("COURSE_CACHE", "/tmp/course-cache")
import course_lib  # noqa: F401, E402  (mode set-up first)
import ipywidgets  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402

from course_lib import runtime, sources  # noqa: E402
from course_lib import widgets as W  # noqa: E402

OUT = os.environ["OUT"]
print(runtime.MODE, runtime.gpu_info(), runtime.versions(), flush=True)


texts, imgs = W.shown_text, W.shown_images


def save(w, name):
    for k, b in enumerate(imgs(w)):
        open(f"{OUT}/{name}{k}.png", "wb").write(b)


t = time.time()
panel = W.benchmark_panel("vector_add", sizes=[2**16, 2**20, 2**24, 2**28])
print(f"=== benchmark_panel: {time.time() - t:.1f} s\n", texts(panel), flush=True)
save(panel, "panel")

module = sources.load_module("vector_add")
n = 2**26
x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
out = torch.empty_like(x)


def launch(BLOCK_SIZE, num_warps, num_stages):
    grid = (triton.cdiv(n, BLOCK_SIZE),)
    return lambda: module.add_kernel[grid](
        x, y, out, n, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps, num_stages=num_stages
    )


box = W.tuner(launch, n_bytes=3 * n * 4, check=lambda: torch.allclose(out, x + y))
sliders = {c.description: c for c in box.children if isinstance(c, ipywidgets.SelectionSlider)}
t = time.time()
for bs, nw, ns in [(1024, 4, 3), (256, 1, 1), (4096, 8, 2), (1024, 4, 3), (128, 8, 4)]:
    sliders["BLOCK_SIZE"].value, sliders["num_warps"].value, sliders["num_stages"].value = bs, nw, ns
    box.run()
print(f"=== tuner: {time.time() - t:.1f} s\n", texts(box), flush=True)

rows = W.sweep("vector_add", [(2**24,)])
chart = W.comparison_chart(rows, title="vector_add, 16M fp32, measured now")
print("=== comparison_chart\n", texts(chart), flush=True)
save(chart, "chart")
