#!/usr/bin/env bash
# Everything the course checks and measures on a GPU, in one call (the lent GPU machine has no
# package registry: run from the checkout with PYTHONPATH, no install). Outputs go to $OUT:
#   doctor.txt, check_solutions.txt, check_exercises.txt, wrong_submissions.txt,
#   bench.json (python -m course_lib bench --all --record), traffic_validation.json
# Usage: OUT=/some/dir bash scripts/gpu_session.sh [bench-tasks...]
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export COURSE_PROGRESS="${TMPDIR:-/tmp}/course-progress.json" COURSE_CACHE="${TMPDIR:-/tmp}/course-cache"
OUT="${OUT:-results/session}"
mkdir -p "$OUT"
py=python3

step() { printf '\n===== %s\n' "$1"; }

step doctor
$py -m course_lib doctor 2>&1 | tee "$OUT/doctor.txt"

step "check --all --solutions (compiled for the GPU)"
$py -m course_lib check --all --solutions 2>&1 | tee "$OUT/check_solutions.txt"
echo "exit ${PIPESTATUS[0]}" | tee -a "$OUT/check_solutions.txt"

step "check --all on untouched exercises (must fail cleanly)"
$py -m course_lib check --all > "$OUT/check_exercises.txt" 2>&1
echo "exit $?" >> "$OUT/check_exercises.txt"
cat "$OUT/check_exercises.txt"

step "wrong submissions on the GPU"
: > "$OUT/wrong_submissions.txt"
for dir in tests/wrong/*/; do
  for file in "$dir"*.py; do
    [ -e "$file" ] || continue
    task=$(basename "$file" .py)
    echo "--- $(basename "$dir") / $task" >> "$OUT/wrong_submissions.txt"
    timeout 300 $py -m course_lib check "$task" --source "$dir" --timeout 60 >> "$OUT/wrong_submissions.txt" 2>&1
    echo "exit $?" >> "$OUT/wrong_submissions.txt"
  done
done
grep -c "^--- " "$OUT/wrong_submissions.txt" || true

step "bench"
if [ "$#" -gt 0 ]; then
  for task in "$@"; do $py -m course_lib bench "$task" --record "$OUT/bench_$task.json"; done
else
  $py -m course_lib bench --all --record "$OUT/bench.json"
fi

step "traffic model against measured copies"
$py -m course_lib.validate_traffic --record "$OUT/traffic_validation.json"
