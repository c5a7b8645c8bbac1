#!/usr/bin/env bash
# One device call for chapter 11, whichever GPU comes: on an H200 the records the issue's targets are judged
# by (smoke, the check of the three tasks, the Gluon bench, the course's bench and JIT record, the head-dim-64
# variant, the grader's clock against bench's), on another GPU that variant and the clocks first (head dim 64 is
# the open gap), the check and the wrong submissions in GPU mode, then the benches. PLAN_H200 / PLAN_OTHER override the steps.
#   OUT=... bash scripts/gpu_attention_call.sh      # everything in $OUT/attention_call.tgz
set -uo pipefail
cd "$(dirname "$0")/.."
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
mkdir -p /tmp/gpu-cache && cp .deps/gpu-cache/*.json /tmp/gpu-cache/ 2>/dev/null
export COURSE_CACHE=/tmp/gpu-cache
case "$name" in
  *H200*) steps="${PLAN_H200:-attention_smoke attention_check attention_gluon attention_bench attention_d64 timing_gap cache_save}" ;;
  *) steps="${PLAN_OTHER:-attention_d64 timing_gap attention_check attention_wrong attention_gluon attention_bench cache_save}" ;;
esac
echo "GPU: $name; steps: $steps"
# the device brings back only a few files from $OUT: the steps write to a folder of their own, packed into one
# archive after each step (a call cut short keeps what ended)
work="${TMPDIR:-/tmp}/attention-call"
mkdir -p "$work"
for step in $steps; do
  OUT="$work" bash scripts/gpu_speed_session.sh "$step"
  mkdir -p "${OUT:=results/session}" && tar czf "$OUT/attention_call.tgz" -C "$work" .
done
