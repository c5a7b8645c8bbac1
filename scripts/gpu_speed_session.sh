#!/usr/bin/env bash
# Issue 22 on a GPU, in one call per step: speed tiers, correct alternatives, and a room's time.
#   OUT=/some/dir bash scripts/gpu_speed_session.sh [steps...]
# steps, run in the order given (default: check slow good): doctor overhead check slow good wrong room
#   wrong_room good_room many_launches: the sweeps graded as rooms (grade, sandboxed), and the slowest good file
# CHECK_AGAIN=0: the check step grades once (the first time on a machine measures limits and bars)
# FIRST_S / AGAIN_S: cut the check step's first / second run after this many seconds (default: none)
#   room_start  the room in a process session of its own (it outlives the call, on a machine kept warm);
#   room_wait   waits for it (at most WAIT_S, default 560) and copies its lines and record to $OUT
#   overhead  scripts/launch_overhead.py: each solution's timed call bare and under each layer of the worker
#   check  check --all --solutions twice: the first run measures the time limits and the speed bars
#          (once per machine), the second is what a grader meets afterwards; each timed
#   slow   the deliberately slow correct kernels of tests/slow: each must PASS with speed tier "works"
#   good   every correct alternative of tests/good that names a GPU task: each must PASS
#   wrong  every deliberately wrong submission of tests/wrong: none may PASS
#   room   scripts/room_test.py: 40 learners x 22 tasks, --speed-points (ROOM_LIMIT_S, default 560)
#   cache_save  the grader's cache (limits, bars, peaks) as $OUT/cache.tgz, to seed the next machine
#   gpu_tests   the tests that run only on a GPU (COURSE_MODE=gpu), where pytest is there
#   hold        tests/test_gpu_hold.py in GPU mode (the grader's GPU-hold protocol)
#   decode      scripts/experiments_gemm.py decode: chapter 07's decode kernels and split-K, to results/
#   gluon       scripts/gluon_gpu_outputs.py: chapters 09-10's Gluon kernels on the GPU and in the CPU simulator
#   attention   chapter 11 (attention_smoke, attention_check, attention_gluon, attention_layer): its solutions checked, the Gluon kernel beside SDPA's backends and the Triton
#               kernel (experiment_attention_h200.json), the layer's parts timed at prefill and decode
#               (experiment_attention_layer_h200.json); each part under its own timeout
#   decode_sweep  scripts/decode_sweep.py: the decode kernel's slices, pages a step, stages and warps
#   causal_study  scripts/gluon_attention.py --causal-study: what slows the causal Gluon kernel
#   attention_d64  scripts/gluon_attention.py --d64: head dim 64, three consumer warpgroups against two, and causal
#               (experiment_attention_d64.json)
#   timing_gap  scripts/timing_gap.py: why the grader's time reads above course_lib bench's (clocks and power sampled;
#               experiment_timing_gap_h200.json, named for the GPU)
#   attention_tiers  ws_attention's speed tier for right kernels other than the solution (tiers_*.txt)
#   attention_wrong  chapter 11's wrong submissions graded in GPU mode (wrong_submissions.txt): none may pass
#               (ATTENTION_WRONG=ch11_ws: the Gluon task's alone)
#   attention_bench  chapter 11's tasks benched beside their baselines (bench_TASK_h200.json, named for the GPU that ran it), and the
#               JIT's cost as decode contexts grow (experiment_attention_jit_h200.json); ATTENTION_BENCH_TASKS
#               names the tasks, ATTENTION_JIT_S=0 leaves the JIT record out
# The lent GPU machine has no package registry: this runs from the checkout with PYTHONPATH.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export COURSE_PROGRESS="${TMPDIR:-/tmp}/course-progress.json" COURSE_CACHE="${COURSE_CACHE:-${TMPDIR:-/tmp}/course-cache}"
OUT="${OUT:-results/session}"
mkdir -p "$OUT"
# the grader's timeline (holds of the GPU's lock waited for and held, tasks, timings' windows)
export COURSE_TRACE="${COURSE_TRACE:-$(cd "$OUT" && pwd)/trace.jsonl}"
eval "$(bash scripts/carried_bwrap.sh)"
py=python3
# the records' names say which GPU made them (_h200, _h100, ...): an H100's record once came back named _h200
gpu_tag=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | grep -oiE '[a-z][0-9]{2,3}' | head -1 \
  | tr 'A-Z' 'a-z')
gpu_tag=${gpu_tag:-gpu}
steps="${*:-check slow good}"
timed() { # label, command...: runs it, appends "label: N s, exit E" to $OUT/times.txt
  local label=$1 start end code
  shift
  start=$(date +%s.%N)
  "$@"
  code=$?
  end=$(date +%s.%N)
  printf '%s: %s s, exit %s\n' "$label" "$($py -c "print(round($end - $start, 1))")" "$code" | tee -a "$OUT/times.txt"
}

{
  date -u +"%Y-%m-%d %H:%M UTC"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  $py -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  nproc
  git log -1 --format='commit %H' 2>/dev/null || true
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

step_doctor() {
  $py -m course_lib doctor > "$OUT/doctor.txt" 2>&1
  tail -3 "$OUT/doctor.txt"
}
step_overhead() {
  timeout 300 $py scripts/launch_overhead.py --out "$OUT/launch_overhead.json" > "$OUT/launch_overhead.txt" 2>&1
  cat "$OUT/launch_overhead.txt"
}
step_check() {
  timed "check --all --solutions, first on this machine (limits and bars measured)" \
    timeout "${FIRST_S:-0}" $py -m course_lib check --all --solutions > "$OUT/check_solutions_first.txt" 2>&1
  if [ "${CHECK_AGAIN:-1}" = 1 ]; then
    timed "check --all --solutions, again" \
      timeout "${AGAIN_S:-0}" $py -m course_lib check --all --solutions > "$OUT/check_solutions_again.txt" 2>&1
  fi
  grep -h -E "^\[|speed:|tasks pass|speed tiers" "$OUT"/check_solutions_*.txt | cut -c1-220
}
step_slow() {
  for folder in tests/slow/*/; do
    for file in "$folder"*.py; do
      task=$(basename "$file" .py)
      timed "slow $(basename "$folder") $task" \
        $py -m course_lib check "$task" --source "$folder" >> "$OUT/slow.txt" 2>&1
    done
  done
  grep -E "^(PASS|FAIL|HANG|CRASH|GPU)|speed:" "$OUT/slow.txt" | cut -c1-220
}
step_good() {
  for folder in tests/good/*/; do
    for file in "$folder"*.py; do
      task=$(basename "$file" .py)
      $py -c "from course_lib import tasks; tasks.get('$task')" 2>/dev/null || continue
      echo "== $folder $task" >> "$OUT/good.txt"
      $py -m course_lib check "$task" --source "$folder" >> "$OUT/good.txt" 2>&1
    done
  done
  grep -E "^== |^(PASS|FAIL|HANG|CRASH|GPU)" "$OUT/good.txt" | cut -c1-200
}
step_wrong() {
  for folder in tests/wrong/*/; do
    for file in "$folder"*.py; do
      task=$(basename "$file" .py)
      $py -c "from course_lib import tasks; tasks.get('$task')" 2>/dev/null || continue
      echo "== $folder $task" >> "$OUT/wrong.txt"
      COURSE_PERF=0 $py -m course_lib check "$task" --source "$folder" >> "$OUT/wrong.txt" 2>&1
    done
  done
  echo "wrong submissions that passed: $(grep -c '^PASS' "$OUT/wrong.txt")"
}
# the same sweeps graded as rooms (each folder a learner, sandboxed, COURSE_GPU_JOBS at once): minutes, not an hour
step_wrong_room() {
  timed "tests/wrong graded as a room (COURSE_PERF=0)" \
    env COURSE_PERF=0 $py -m course_lib grade tests/wrong --out "$OUT/wrong_room.csv" > "$OUT/wrong_room.txt" 2>&1
  $py scripts/sweep_verdicts.py "$OUT/wrong_room.csv" --none-may-pass | tee "$OUT/wrong_room_verdicts.txt"
}
step_good_room() {
  local room="${TMPDIR:-/tmp}/course-good-room"
  rm -rf "$room" && mkdir -p "$room"
  for folder in tests/good/*/ tests/slow/*/; do
    [ "$(basename "$folder")" = many_launches ] && continue # its own step: minutes of launches
    cp -r "$folder" "$room/$(basename "$(dirname "$folder")")_$(basename "$folder")"
  done
  timed "tests/good and tests/slow graded as a room" \
    $py -m course_lib grade "$room" --quiet --out "$OUT/good_room.csv" > "$OUT/good_room.txt" 2>&1
  $py scripts/sweep_verdicts.py "$OUT/good_room.csv" --all-must-pass --slow slow_ | tee "$OUT/good_room_verdicts.txt"
}
step_many_launches() {
  timed "many_launches (524,288 launches a call at the timed shape)" \
    timeout "${MANY_S:-420}" $py -m course_lib check vector_add --source tests/good/many_launches > "$OUT/many_launches.txt" 2>&1
  grep -E "^(PASS|FAIL|HANG|CRASH|GPU)|speed:" "$OUT/many_launches.txt" | cut -c1-220
}
step_room() {
  timed "room 40 x 22, --speed-points" \
    $py scripts/room_test.py --learners 40 --speed-points --limit-s "${ROOM_LIMIT_S:-560}" \
    --record "$OUT/room_40x22.json" > "$OUT/room.txt" 2>&1
  tail -30 "$OUT/room.txt"
}

step_cache_save() {
  tar czf "$OUT/cache.tgz" -C "$COURSE_CACHE" . && tar tzf "$OUT/cache.tgz" | tr '\n' ' ' && echo
}
step_hold() {
  COURSE_MODE=gpu timeout "${HOLD_S:-240}" $py -m pytest -q -p no:cacheprovider tests/test_gpu_hold.py \
    > "$OUT/gpu_hold.txt" 2>&1
  tail -3 "$OUT/gpu_hold.txt"
}
step_decode() {
  timeout "${DECODE_S:-400}" $py scripts/experiments_gemm.py decode --out "$OUT/experiments" > "$OUT/decode.txt" 2>&1
  grep -E "M=16 +(split_k|small_m|eager|cublas)" "$OUT/decode.txt" | cut -c1-200 | head -60
}
step_gluon() {
  timeout "${GLUON_S:-180}" $py scripts/gluon_gpu_outputs.py --out "$OUT/gluon" > "$OUT/gluon.txt" 2>&1
  cut -c1-400 "$OUT/gluon.txt" | tail -12
}
step_attention_smoke() {
  timeout "${ATTENTION_SMOKE_S:-90}" $py scripts/gluon_attention.py --smoke > "$OUT/attention_smoke.txt" 2>&1
  echo "smoke: exit $?" >> "$OUT/attention_smoke.txt"
  cat "$OUT/attention_smoke.txt"
}
step_attention_check() {
  timed "check of chapter 11's solutions" timeout "${ATTENTION_CHECK_S:-300}" \
    $py -m course_lib check flash_attention paged_decode ws_attention --solutions > "$OUT/attention_check.txt" 2>&1
  tail -8 "$OUT/attention_check.txt"
}
step_attention_gluon() {
  timed "gluon bench" timeout "${ATTENTION_GLUON_S:-200}" \
    $py scripts/gluon_attention.py --bench "$OUT" > "$OUT/attention_gluon.txt" 2>&1
  cat "$OUT/attention_gluon.txt"
}
step_attention_layer() {
  timed "layer profile" timeout "${ATTENTION_LAYER_S:-150}" $py scripts/attention_layer_profile.py \
    --out "$OUT/experiment_attention_layer_${gpu_tag}.json" > "$OUT/attention_layer.txt" 2>&1
  cat "$OUT/attention_layer.txt"
}
step_decode_sweep() {
  timed "decode sweep" timeout "${DECODE_SWEEP_S:-300}" $py scripts/decode_sweep.py --bench "$OUT" > "$OUT/decode_sweep.txt" 2>&1
  grep -E "^best|solution|sdpa" "$OUT/decode_sweep.txt" | cut -c1-300
}
step_causal_study() {
  timed "causal study" timeout "${CAUSAL_STUDY_S:-200}" $py scripts/gluon_attention.py --causal-study "$OUT" \
    > "$OUT/causal_study.txt" 2>&1
  cat "$OUT/causal_study.txt"
}
step_attention_d64() {  # head dim 64: three consumer warpgroups against two, and causal, beside cuDNN
  timed "d64" timeout "${D64_S:-180}" $py scripts/gluon_attention.py --d64 "$OUT" > "$OUT/d64.txt" 2>&1
  cat "$OUT/d64.txt"
}
step_timing_gap() {  # the grader's clock against bench's on one machine, with the SM clock and power beside them
  timed "timing gap" timeout "${TIMING_GAP_S:-150}" $py scripts/timing_gap.py \
    --out "$OUT/experiment_timing_gap_${gpu_tag}.json" > "$OUT/timing_gap.txt" 2>&1
  cat "$OUT/timing_gap.txt"
}
step_attention_tiers() {  # the speed tiers of chapter 11 on right kernels other than the solutions
  local source
  for source in scripts/attention_variants/first_version tests/good/ch11_ws_hand_over_late; do
    timed "check ws_attention --source $source" timeout "${TIERS_S:-240}" \
      $py -m course_lib check ws_attention --source "$source" > "$OUT/tiers_$(basename "$source").txt" 2>&1
    grep -E "^(PASS|FAIL|HANG|CRASH)|speed:" "$OUT/tiers_$(basename "$source").txt" | cut -c1-400
  done
}
step_attention_wrong() {  # chapter 11's wrong submissions graded in GPU mode: none may pass
  WRONG_CHAPTERS="${ATTENTION_WRONG:-ch11}" timeout "${ATTENTION_WRONG_S:-300}" bash scripts/gpu_session.sh wrong \
    > "$OUT/attention_wrong.txt" 2>&1
  echo "wrong: exit $?" >> "$OUT/attention_wrong.txt"
  tail -30 "$OUT/attention_wrong.txt" | cut -c1-250
}
step_attention() {
  step_attention_smoke
  step_attention_check
  step_attention_gluon
  step_attention_layer
}
step_attention_bench() {
  local task  # bench takes one task a call: a record each
  for task in ${ATTENTION_BENCH_TASKS:-flash_attention ws_attention paged_decode}; do
    timeout "${ATTENTION_BENCH_S:-130}" $py -m course_lib bench "$task" --record "$OUT/bench_${task}_${gpu_tag}.json" \
      > "$OUT/bench_$task.txt" 2>&1
    echo "bench $task: exit $?" >> "$OUT/bench_$task.txt"
    grep -v "^peaks" "$OUT/bench_$task.txt" | cut -c1-160
  done
  [ "${ATTENTION_JIT_S:-150}" = 0 ] && return  # ATTENTION_JIT_S=0: no JIT record
  timeout "${ATTENTION_JIT_S:-150}" $py scripts/attention_jit.py --out "$OUT/experiment_attention_jit_${gpu_tag}.json" \
    > "$OUT/attention_jit.txt" 2>&1
  echo "jit: exit $?" >> "$OUT/attention_jit.txt"
  cat "$OUT/attention_jit.txt"
}
step_gpu_tests() {
  if $py -c "import pytest" 2>/dev/null; then
    COURSE_MODE=gpu timeout 300 $py -m pytest -q -p no:cacheprovider tests/test_ch04.py -k "gpu_numbers" \
      > "$OUT/gpu_tests.txt" 2>&1
  else
    echo "no pytest on this machine" > "$OUT/gpu_tests.txt"
  fi
  tail -5 "$OUT/gpu_tests.txt"
}

ROOM_DIR="${TMPDIR:-/tmp}/course-room"
step_room_start() {
  mkdir -p "$ROOM_DIR"
  rm -f "$ROOM_DIR"/*
  date +%s.%N > "$ROOM_DIR/started"
  COURSE_TRACE="$ROOM_DIR/trace.jsonl" setsid nohup $py scripts/room_test.py --learners 40 --speed-points --limit-s "${ROOM_LIMIT_S:-1200}" \
    --record "$ROOM_DIR/room_40x22.json" > "$ROOM_DIR/room.txt" 2>&1 < /dev/null &
  echo "room started in the background: $ROOM_DIR"
}
step_room_wait() {
  local waited=0
  while [ ! -e "$ROOM_DIR/room_40x22.json" ] && [ "$waited" -lt "${WAIT_S:-560}" ]; do
    sleep 5
    waited=$((waited + 5))
  done
  echo "room: $($py -c "import time; print(round(time.time() - float(open('$ROOM_DIR/started').read()), 1))") s since its start"
  cp "$ROOM_DIR"/room.txt "$ROOM_DIR"/room_40x22.json "$ROOM_DIR"/trace.jsonl "$OUT"/ 2>/dev/null
  [ -e "$ROOM_DIR/trace.jsonl" ] && echo "room trace: $(grep -c '"task result"' "$ROOM_DIR/trace.jsonl") tasks graded so far"
  tail -30 "$ROOM_DIR/room.txt"
}

for name in $steps; do
  "step_$name"
done
