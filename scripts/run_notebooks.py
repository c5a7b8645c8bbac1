"""Run notebooks' code cells top to bottom without Jupyter, for a GPU machine that has no Jupyter
server or kernel: each notebook in a fresh process, its cells through IPython's InteractiveShell
(magics and display work; widgets print their text form). Reports each notebook's time and the
first failing cell, and writes every cell's printed output to OUT/<notebook>.txt.

    OUT=dir PYTHONPATH=. python3 scripts/run_notebooks.py notebooks/0*.ipynb

IPython is needed (pure Python; WIDGET_DEPS may name a folder that holds it, as for
scripts/widgets_gpu_check.py). The CPU-mode test of the notebooks (tests/test_notebooks.py) runs them
with a real kernel through nbclient instead.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_one(path: Path, out_dir: Path) -> int:
    if os.environ.get("WIDGET_DEPS"):
        sys.path.append(os.environ["WIDGET_DEPS"])
    os.environ.setdefault("MPLBACKEND", "Agg")
    from IPython.core.interactiveshell import InteractiveShell

    os.chdir(path.parent)  # notebooks run from their own folder
    shell = InteractiveShell.instance()
    cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    log = []
    failed = 0
    for i, cell in enumerate(cells):
        source = "".join(cell["source"])
        buffer = io.StringIO()
        start = time.time()
        with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
            result = shell.run_cell(source, store_history=True)
        took = time.time() - start
        log.append(f"===== cell {i} ({took:.1f} s)\n{source}\n----- output\n{buffer.getvalue()}")
        if not result.success:
            failed += 1
            err = result.error_in_exec or result.error_before_exec
            print(f"  cell {i}: {type(err).__name__}: {str(err)[:300]}", flush=True)
    (out_dir / f"{path.stem}.txt").write_text("\n".join(log))
    return failed


def main() -> int:
    out_dir = Path(os.environ.get("OUT", "build/notebook-runs")).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    if sys.argv[1] == "--one":
        return 1 if run_one(Path(sys.argv[2]).resolve(), out_dir) else 0
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    status = 0
    for name in sys.argv[1:]:
        start = time.time()
        try:
            proc = subprocess.run(
                [sys.executable, __file__, "--one", name], env=env, timeout=float(os.environ.get("NB_TIMEOUT", 300))
            )
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        print(f"{name}: {'ok' if rc == 0 else f'FAILED ({rc})'} in {time.time() - start:.0f} s", flush=True)
        status |= rc != 0
    return status


if __name__ == "__main__":
    sys.exit(main())
