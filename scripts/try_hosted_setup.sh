#!/usr/bin/env bash
# A recorded try of the notebooks' setup cell in a fresh runtime that has only torch (as a plain Jupyter
# or a Kaggle CPU runtime might): the cell must fetch the course, install what is missing (Triton's
# interpreter, matplotlib, tqdm, ipywidgets) without touching torch, and a check must pass.
# Usage: bash scripts/try_hosted_setup.sh OUT_DIR   (needs PyPI; torch 2.13.0 from pip's source)
set -euo pipefail
out=${1:?OUT_DIR}
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
log="$out/hosted_setup_try.log"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "python: $(python3 --version 2>&1)"
  git -C "$here" rev-parse HEAD | sed 's/^/course commit: /'
  # the published repository: a clone of this checkout's HEAD
  git clone -q "$here" "$work/published"
  python3 -m venv "$work/runtime"
  start=$SECONDS
  "$work/runtime/bin/pip" install -q torch==2.13.0
  echo "torch installed in $((SECONDS - start)) s: $("$work/runtime/bin/python" -c 'import torch; print(torch.__version__)')"
  echo "before the cell: $("$work/runtime/bin/pip" list 2>/dev/null | grep -iE '^(torch|triton|numpy|matplotlib|tqdm|ipywidgets) ' | tr -s ' ' | paste -sd, -)"
  cell=$(python3 - "$here/notebooks/00_setup.ipynb" <<'PY'
import json, sys
cells = json.load(open(sys.argv[1]))["cells"]
print("".join(next(c for c in cells if c["cell_type"] == "code")["source"]))
PY
)
  mkdir -p "$work/content"
  start=$SECONDS
  (cd "$work/content" && env -u COURSE_ROOT -u COURSE_MODE COURSE_REPO="file://$work/published" \
    "$work/runtime/bin/python" -c "$cell
import course_lib, subprocess, sys
print('course_lib from', course_lib.__file__)
print('mode', course_lib.MODE)
done = subprocess.run([sys.executable, '-m', 'course_lib', 'check', 'vector_copy', '--solutions'], capture_output=True, text=True)
print('check vector_copy --solutions: exit', done.returncode, '|', done.stdout.strip().splitlines()[0] if done.stdout.strip() else done.stderr[-300:])
")
  echo "the cell, the import and the check took $((SECONDS - start)) s"
  echo "after the cell: $("$work/runtime/bin/pip" list 2>/dev/null | grep -iE '^(torch|triton|numpy|matplotlib|tqdm|ipywidgets) ' | tr -s ' ' | paste -sd, -)"
} 2>&1 | grep -v -e "^WARNING: Location" -e "Failed to initialize NumPy" -e "_conversion_method_template" | tee "$log"
