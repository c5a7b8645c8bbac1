#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (the zip that
# make_autograder.py wrote is in /autograder/source): the course's runtime in CPU mode (Gradescope's
# machines have no GPU: Hopper-only tasks are reported "not graded here", never scored 0), and
# bubblewrap, the grader's sandbox.
set -euo pipefail
apt-get update -q
apt-get install -y -q bubblewrap python3-venv
cd /autograder/source/course
python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check torch --index-url https://download.pytorch.org/whl/cpu
.venv/bin/python -m pip install -q --disable-pip-version-check -e .
.venv/bin/python -m course_lib doctor
# the time limits are measured once, from the course's solutions, here rather than in every run
.venv/bin/python -m course_lib check --all --solutions > /dev/null || true
