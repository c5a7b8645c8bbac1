"""The verdicts of a sweep graded as a room (scripts/gpu_speed_session.sh wrong_room, good_room): one
line per handed-in file, then the count of each status, from the gradebook CSV that ``grade`` wrote.

    python scripts/sweep_verdicts.py GRADES.csv --none-may-pass   # exit 1 if a wrong file passed
    python scripts/sweep_verdicts.py GRADES.csv --all-must-pass   # exit 1 if a correct file did not
    python scripts/sweep_verdicts.py GRADES.csv --all-must-pass --slow slow_
        # and exit 1 if a learner whose name starts with slow_ (tests/slow) was timed faster than "works"
"""

from __future__ import annotations

import argparse
import collections
import csv
import sys

from course_lib.grader.roster import MISSING as NOT_HANDED_IN  # no file for that task in the learner's folder
from course_lib.grader.tiers import WORKS


def handed_in(path: str) -> list[dict]:
    with open(path, newline="") as f:
        return [row for row in csv.DictReader(f) if row["status"] != NOT_HANDED_IN]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("grades")
    rule = parser.add_mutually_exclusive_group(required=True)
    rule.add_argument("--none-may-pass", action="store_true")
    rule.add_argument("--all-must-pass", action="store_true")
    parser.add_argument(
        "--slow",
        metavar="PREFIX",
        help="learners whose name starts with PREFIX hand in deliberately slow kernels: a timed one must be 'works'",
    )
    args = parser.parse_args(argv)
    rows = handed_in(args.grades)
    if not rows:
        print(f"{args.grades}: no graded file")
        return 1
    broken = []
    for row in sorted(rows, key=lambda r: (r["student_id"], r["assignment"])):
        passed = row["status"] == "pass"
        bad = passed if args.none_may_pass else not passed
        tier = f" [{row['speed_tier']} {row['time_us']} us]" if row.get("speed_tier") else ""
        mark = (
            "  <-- " + ("a wrong file passed" if args.none_may_pass else "a correct file did not pass") if bad else ""
        )
        too_fast = bool(
            args.slow and row["student_id"].startswith(args.slow) and row.get("speed_tier") not in (None, "", WORKS)
        )
        if too_fast:
            mark += "  <-- a deliberately slow kernel was not graded 'works'"
            bad = True
        print(f"{row['student_id']} / {row['assignment']}: {row['status'].upper()}{tier} {row['message'][:160]}{mark}")
        if bad:
            broken.append(row)
    counts = collections.Counter(row["status"] for row in rows)
    print(f"{len(rows)} files: " + ", ".join(f"{n} {status}" for status, n in sorted(counts.items())))
    if args.none_may_pass:
        what = "wrong files that passed"
    else:
        what = "correct files that did not pass" + (" or slow ones not graded 'works'" if args.slow else "")
    print(f"{what}: {len(broken)}")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
