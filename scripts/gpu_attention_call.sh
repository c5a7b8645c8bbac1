#!/usr/bin/env bash
# One device call for chapter 11, whichever GPU comes: on an H200 the records the issue's targets are judged
# by (smoke, the check of the three tasks, the Gluon bench), on another GPU what can be learned there first
# (the check, the decode sweep, the causal study). PLAN_H200 / PLAN_OTHER override the steps.
#   OUT=... bash scripts/gpu_attention_call.sh
set -uo pipefail
cd "$(dirname "$0")/.."
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
mkdir -p /tmp/gpu-cache && cp .deps/gpu-cache/*.json /tmp/gpu-cache/ 2>/dev/null
export COURSE_CACHE=/tmp/gpu-cache
case "$name" in
  *H200*) steps="${PLAN_H200:-attention_smoke attention_check attention_gluon cache_save}" ;;
  *) steps="${PLAN_OTHER:-attention_check decode_sweep causal_study cache_save}" ;;
esac
echo "GPU: $name; steps: $steps"
bash scripts/gpu_speed_session.sh $steps
