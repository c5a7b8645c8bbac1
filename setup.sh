#!/usr/bin/env bash
# Set up the course in .venv and then either open it or test it:
#   bash setup.sh lab    # install, then open JupyterLab on the first notebook
#   bash setup.sh test   # install with the test tools, then run the whole test suite
#   bash setup.sh deps   # install with the test tools only
# Run it from anywhere; it works in the folder it lives in. Safe to run again.
# `lab` passes what follows it to JupyterLab (the container: bash setup.sh lab --ip=0.0.0.0).
# COURSE_VENV puts the environment elsewhere than .venv (the container keeps it outside the course
# folder, which a learner's own folder replaces when mounted).
set -euo pipefail
cd "$(dirname "$0")"
what="${1:-lab}"
[ $# -gt 0 ] && shift
py="${PYTHON:-python3}"
venv="${COURSE_VENV:-.venv}"
venv="$(mkdir -p "$venv" && cd "$venv" && pwd)"

if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv "$venv"
fi
pip() { "$venv/bin/python" -m pip --disable-pip-version-check "$@"; }

# torch first, so that the course's own install does not pull a build you did not choose.
# TORCH_SPEC overrides, e.g. TORCH_SPEC="torch --index-url https://download.pytorch.org/whl/cpu".
if ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  if [ -n "${TORCH_SPEC:-}" ]; then
    # shellcheck disable=SC2086
    pip install -q $TORCH_SPEC
  elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    pip install -q torch            # a CUDA build, for GPU mode
  else
    # CPU mode, the build this course is tested with: PyTorch's CPU build from its own index (2.5 GB
    # less than the CUDA build PyPI serves, half the memory a check needs); where that index cannot
    # be reached (asked once, 5 s at most), the build PyPI or a local mirror has
    cpu_index=https://download.pytorch.org/whl/cpu
    if "$venv/bin/python" -c "import urllib.request; urllib.request.urlopen('$cpu_index/torch/', timeout=5)" 2>/dev/null; then
      pip install -q torch==2.13.0 --extra-index-url "$cpu_index"
    else
      pip install -q torch==2.13.0
    fi
  fi
fi

# The course's own install builds with this venv's setuptools, not one fetched into a throwaway
# build environment each time: once set up, running this again needs no network (a workshop's Wi-Fi).
if ! "$venv/bin/python" -c "import setuptools, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 77)" 2>/dev/null; then
  pip install -q "setuptools>=77"
fi
install() { pip install -q --no-build-isolation "$@"; }

case "$what" in
  lab)
    install -e .
    "$venv/bin/python" -m course_lib sync-exercises
    "$venv/bin/python" -m course_lib doctor || true
    extra=()
    [ "$(id -u)" = 0 ] && extra+=(--allow-root)  # containers and CI machines often run as root
    # serve the whole course (exercises/ too) and put the venv first on PATH, so that `python -m
    # course_lib ...` in a JupyterLab terminal finds the course's Python
    export PATH="$venv/bin:$PATH"
    exec "$venv/bin/jupyter" lab --ServerApp.root_dir="$PWD" ${extra[@]+"${extra[@]}"} "$@" notebooks/00_setup.ipynb
    ;;
  test)
    install -e ".[dev]"
    exec "$venv/bin/python" -m pytest -q tests "$@"
    ;;
  deps)
    install -e ".[dev]"
    ;;
  *)
    echo "usage: bash setup.sh [lab|test|deps]" >&2
    exit 2
    ;;
esac
