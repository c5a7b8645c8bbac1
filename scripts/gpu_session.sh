#!/usr/bin/env bash
# Everything the course checks and measures on a GPU, in one call. The lent GPU machine has no
# package registry: this runs from the checkout with PYTHONPATH, no install. Outputs go to $OUT.
#   OUT=/some/dir bash scripts/gpu_session.sh [steps...]
# steps (default: all but sweep, experiments): doctor check hostile wrong room bench traffic capture
# (hostile: sandboxed, in SHARDS pytest processes at once; bubblewrap from .deps/bwrap if the machine lacks it)
#   widgets sweep experiments (scripts/experiments.py; EXPERIMENTS="timing gelu" picks some)
# WIDGET_DEPS=folder: ipywidgets and friends for a GPU machine that lacks them (widgets step)
# BENCH_TASKS="softmax layernorm" limits the bench step; BENCH_DTYPE=float32 its cases; CHECK_TASKS the
#   check step (default: --all); WRONG_CHAPTERS="ch06 ch07" the wrong step to those chapters' folders.
# capstone: scripts/experiments_capstone.py (CAPSTONE_ARGS="--sweep" adds the tile sweep) and
#   scripts/gluon_capstone.py --run: chapter 10's records (experiment_capstone.json, experiment_gluon_capstone_h200.json).
# notebooks: every notebook (NOTEBOOKS="notebooks/06_*.ipynb" picks some) run top to bottom in GPU mode
#   by scripts/run_notebooks.py (IPython from WIDGET_DEPS, or .deps when carried, where the machine
#   lacks it; NB_TIMEOUT seconds per notebook, default 600).
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export COURSE_PROGRESS="${TMPDIR:-/tmp}/course-progress.json" COURSE_CACHE="${TMPDIR:-/tmp}/course-cache"
OUT="${OUT:-results/session}"
mkdir -p "$OUT"
# bubblewrap, the grader's sandbox for rooms: a carried one where the machine has none
eval "$(bash scripts/carried_bwrap.sh)"
py=python3
steps="${*:-doctor check hostile wrong room bench traffic capture widgets}"
quiet() { grep -v -i -E "warn|online softmax|split the reduction|important use case|^softmax\.$|^$"; }
step() { printf '\n===== %s\n' "$1"; }
has() { case " $steps " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

if has doctor; then
  step doctor
  $py -m course_lib doctor 2>&1 | tee "$OUT/doctor.txt"
fi
if has check; then
  step "check --all --solutions (compiled for the GPU), then the untouched exercises"
  $py -m course_lib check ${CHECK_TASKS:---all} --solutions 2>&1 | tee "$OUT/check_solutions.txt"
  $py -m course_lib check ${CHECK_TASKS:---all} > "$OUT/check_exercises.txt" 2>&1
  echo "exit $?" >> "$OUT/check_exercises.txt"
  tail -3 "$OUT/check_exercises.txt"
fi
if has hostile; then
  step "the hostile suite, the sandbox's tests and the bounds check in GPU mode, sandboxed (none may score)"
  COURSE_MODE=gpu COURSE_TEST_SANDBOX=1 $py scripts/pytest_shards.py "${SHARDS:-6}" "$OUT/hostile_gpu" -- \
    tests/test_hostile.py tests/test_sandbox.py tests/test_bounds_check.py 2>&1 | tee "$OUT/hostile_gpu.txt"
  # one file for all shards' logs (a device call brings back only a few files)
  for f in "$OUT"/hostile_gpu.[0-9]*.txt; do printf '######## %s\n' "$(basename "$f")"; cat "$f"; done \
    > "$OUT/hostile_gpu_shards.txt" && rm -f "$OUT"/hostile_gpu.[0-9]*.txt
fi
if has room; then
  step "a small room graded in GPU mode (jobs_per_gpu() jobs share the GPU)"
  $py scripts/room_test.py --learners "${ROOM_LEARNERS:-8}" --record "$OUT/room_test_gpu.json" 2>&1 | tail -15
fi
if has wrong; then
  step "wrong submissions on the GPU (every one in tests/wrong; none may PASS)"
  one() {  # one wrong submission: its folder, task and the first line of the grader's verdict
    local file=$1 task case seed=()
    task=$(basename "$file" .py) case=$(basename "$(dirname "$file")")
    # a submission wrong only where the grader's probe draws a given shape says its seed (tests/test_ch11.py)
    [ -f "tests/wrong/$case/SEED" ] && seed=(--seed "$(cat "tests/wrong/$case/SEED")")
    printf -- '--- %s / %s: %s\n' "$case" "$task" \
      "$(timeout 200 $py -m course_lib check "$task" --source "tests/wrong/$case" "${seed[@]}" --timeout 60 2>&1 | head -1)"
  }
  export -f one && export py
  export COURSE_PERF=0  # eight at a time share the GPU: no timing here
  # eight at a time, except chapter 03's, whose grading times kernels: those alone, one by one
  # each verdict is appended as it comes (a line at a time), so a run cut short keeps what it graded
  : > "$OUT/wrong_submissions.txt"
  # only the course's tasks: tests/wrong also holds files for a task that only the tests register
  known=$($py -c "from course_lib import tasks; print('|'.join(t.name for t in tasks.all_tasks()))")
  chapters=$(for c in ${WRONG_CHAPTERS:-}; do printf '%s|' "$c"; done)
  ls tests/wrong/*/*.py | grep -E "/($known)\.py$" | grep -v '/ch03_' | { [ -n "$chapters" ] && grep -E "/(${chapters%|})_" || cat; } \
    | xargs -P 8 -I{} bash -c 'one {}' \
    >> "$OUT/wrong_submissions.txt"
  sort -o "$OUT/wrong_submissions.txt" "$OUT/wrong_submissions.txt"
  [ -z "$chapters" ] && for file in tests/wrong/ch03_*/*.py; do one "$file"; done >> "$OUT/wrong_submissions.txt"
  echo "$(wc -l < "$OUT/wrong_submissions.txt") wrong submissions graded; passed (should be none):"
  grep -E ': PASS' "$OUT/wrong_submissions.txt" || echo "  none"
fi
if has sweep; then
  step "config sweeps"
  $py scripts/sweep_configs.py --out "$OUT/sweep_rows.json" 2>&1 | quiet
fi
if has bench; then
  step bench
  all_tasks=$($py -c "from course_lib import tasks; print(' '.join(t.name for t in tasks.all_tasks() if t.bench_cases))")
  for task in ${BENCH_TASKS:-$all_tasks}; do
    $py -m course_lib bench "$task" ${BENCH_DTYPE:+--dtype $BENCH_DTYPE} --record "$OUT/bench_$task.json" 2>&1 | quiet
  done
fi
if has traffic; then
  step "traffic model against measured copies"
  $py -m course_lib.validate_traffic --record "$OUT/traffic_validation.json"
fi
if has capture; then
  step "what torch.compile generates for bias + GELU"
  $py -c "from course_lib.compilation import capture_inductor_code as c; c('$OUT/torch_compile_bias_gelu_h200.json')" 2>&1 | tail -3
fi
if has widgets; then
  step "widgets in GPU mode (benchmark panel, tuner, comparison chart)"
  mkdir -p "$OUT/widgets"
  OUT="$OUT/widgets" $py scripts/widgets_gpu_check.py 2>&1 | quiet | tee "$OUT/widgets/widgets.txt"
fi
if has experiments; then
  step "experiments"
  $py scripts/experiments.py ${EXPERIMENTS:-timing gelu rows dropout} --out "$OUT" 2>&1 | quiet
fi
if has capstone; then
  step "the capstone: every variant of chapter 10 checked and timed in one run, then the Gluon step alone"
  $py scripts/experiments_capstone.py --out "$OUT" ${CAPSTONE_ARGS:-} 2>&1 | quiet | tail -60
  $py scripts/gluon_capstone.py --run "$OUT" 2>&1 | quiet | grep -v -E "leaked|nanobind" | tail -10
fi
if has notebooks; then
  step "notebooks top to bottom in GPU mode"
  mkdir -p "$OUT/notebooks"
  # IPython and friends from .deps when the machine lacks them (carry .deps to the device);
  # notebook 10 times every step in GPU mode: give each notebook up to NB_TIMEOUT seconds
  [ -z "${WIDGET_DEPS:-}" ] && [ -d .deps/IPython ] && export WIDGET_DEPS="$PWD/.deps"
  OUT="$OUT/notebooks" NB_TIMEOUT="${NB_TIMEOUT:-600}" $py scripts/run_notebooks.py ${NOTEBOOKS:-notebooks/*.ipynb} \
    2>&1 | tail -20
fi
