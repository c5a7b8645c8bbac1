"""Grade a made-up room of learners through the real command line, and check the gradebook.

    python scripts/room_test.py                                   # 40 learners, every task
    python scripts/room_test.py --learners 4 --tasks vector_copy,vector_add
    python scripts/room_test.py --learners 40 --record results/room_test_cpu.json

The room is built in a temporary folder from the repository's own material, learners taking turns
at being:

- honest:  solutions/ copied (must get full marks);
- stubs:   exercises/ copied, untouched (must get 0);
- broken:  deliberately wrong submissions, tests/wrong/<case>/<task>.py, a different case per
           learner where a task has several (must not pass);
- hostile: tests/hostile/<case>/<task>.py, when that folder exists (must not pass);
- bad:     bad files: empty, only whitespace, NUL bytes, not UTF-8, over 1 MiB, a symbolic link,
           missing (each must be its own status, score 0).

Each honest, broken or hostile learner's file is their own (a line naming them is added), as in a
real room; untouched stubs are byte for byte the same, which the grader grades once per task
(``--copies`` keeps every file an exact copy of its source, so that copies of the same source are
graded once too). Where a task has no wrong or hostile submission, that learner hands in the stub. Then
``python -m course_lib grade ROOM`` runs once; the script prints its wall time, checks that every
(learner, task) row is there once and that each learner got what their kind deserves, and exits 1
if not. ``--record PATH`` writes what happened as JSON.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WRONG = ROOT / "tests" / "wrong"
HOSTILE = ROOT / "tests" / "hostile"
NOT_WRONG_ENOUGH = {"seed_dependent"}  # wrong only for some inputs: it may pass, and that is its point
# wrong only where the GPU's timing shows it (its cases pass): handed in only when grading on a GPU
GPU_ONLY_WRONG = {"cached_by_address"}

# bad file kind -> (bytes, or None for no file, or "link"), the status the grader must give it
BAD_FILES = {
    "empty": (b"", "empty"),
    "whitespace": (b"\n   \n\t\n", "empty"),
    "binary": (b"import triton\n\x00\x00\x7fELF\x00", "binary"),
    "not_utf8": ("# r\u00e9sum\u00e9 of my kernel\nx = 1\n".encode("latin-1"), "not_utf8"),
    "huge": (b"# padding\n" * (110 * 1024), "too_large"),  # 1.07 MiB
    "link": ("link", "not_a_file"),
    "missing": (None, "missing"),
}


def course_tasks() -> list[str]:
    sys.path.insert(0, str(ROOT))
    from course_lib import tasks

    return [t.name for t in tasks.all_tasks()]


def submissions(folder: Path, task: str) -> list[Path]:
    if not folder.is_dir():
        return []
    from course_lib import runtime

    left_out = NOT_WRONG_ENOUGH | (set() if runtime.is_gpu() else GPU_ONLY_WRONG)
    return sorted(p / f"{task}.py" for p in folder.iterdir() if p.name not in left_out and (p / f"{task}.py").is_file())


def build_room(room: Path, learners: int, task_names: list[str], copies: bool = False) -> dict[str, dict]:
    """Make ROOM/<learner>/<task>.py; returns {learner: {"kind": ..., "expect": {task: what}}}."""

    def hand_in(source: Path, target: Path, name: str) -> None:
        data = source.read_bytes()
        if not copies:  # each learner's own file: the same code with their name in a comment
            data = data.rstrip(b"\n") + f"\n# handed in by {name}\n".encode()
        target.write_bytes(data)

    kinds = ["honest", "stubs", "broken"] + (["hostile"] if HOSTILE.is_dir() else []) + ["bad"]
    plan = {}
    for i in range(learners):
        kind = kinds[i % len(kinds)]
        name = f"{kind}_{i:03d}"
        folder = room / name
        folder.mkdir(parents=True)
        expect = {}
        for j, task in enumerate(task_names):
            target = folder / f"{task}.py"
            stub = ROOT / "exercises" / f"{task}.py"
            if kind == "honest":
                hand_in(ROOT / "solutions" / f"{task}.py", target, name)
                expect[task] = "full"
            elif kind == "stubs":
                shutil.copy(stub, target)
                expect[task] = "zero"
            elif kind in ("broken", "hostile"):
                pool = submissions(WRONG if kind == "broken" else HOSTILE, task)
                source = pool[(i // len(kinds) + j) % len(pool)] if pool else stub
                if pool:
                    hand_in(source, target, name)
                else:
                    shutil.copy(source, target)  # the stub, untouched
                expect[task] = "zero"
                expect[f"{task}:from"] = str(source.relative_to(ROOT))
            else:
                bad = list(BAD_FILES)[(i // len(kinds) + j) % len(BAD_FILES)]
                data, status = BAD_FILES[bad]
                if data == "link":
                    target.symlink_to(ROOT / "solutions" / f"{task}.py")
                elif data is not None:
                    target.write_bytes(data)
                expect[task] = f"status:{status}"
        plan[name] = {"kind": kind, "expect": expect}
    return plan


def distinct_files(room: Path) -> int:
    """Distinct (task, bytes) among the room's regular files: the jobs the grader runs."""
    from course_lib.grader.roster import check_file

    seen = set()
    for path in room.glob("*/*.py"):
        check = check_file(path, path.parent.name, path.stem)
        if check.status is None:  # a file the grader is given (not a bad file, a row of its own)
            seen.add((path.stem, check.sha256))
    return len(seen)


def check(rows: list[dict], plan: dict, task_names: list[str]) -> list[str]:
    problems = []
    pairs = [(r["student_id"], r["assignment"]) for r in rows]
    wanted = [(learner, task) for learner in sorted(plan) for task in task_names]
    if pairs != wanted:
        missing = sorted(set(wanted) - set(pairs))
        extra = [p for p, n in Counter(pairs).items() if n > 1 or p not in set(wanted)]
        problems.append(f"rows are not one per (learner, task) in order: missing {missing[:5]}, extra {extra[:5]}")
    for r in rows:
        learner, task = r["student_id"], r["assignment"]
        if learner not in plan or task not in plan[learner]["expect"]:
            continue
        expect = plan[learner]["expect"][task]
        score, top = float(r["score"]), float(r["max_score"])
        where = f"{learner}/{task}.py ({plan[learner]['expect'].get(f'{task}:from', plan[learner]['kind'])})"
        if expect == "full" and not (r["status"] == "pass" and score == top > 0):
            problems.append(f"{where}: expected full marks, got {r['status']} {score}/{top}: {r['message']}")
        elif expect == "zero" and (r["status"] == "pass" or score != 0):
            problems.append(f"{where}: expected 0, got {r['status']} {score}/{top}: {r['message']}")
        elif expect.startswith("status:") and (r["status"] != expect[7:] or score != 0):
            problems.append(f"{where}: expected {expect[7:]} and 0, got {r['status']} {score}/{top}")
    return problems


def version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return ""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--learners", type=int, default=40)
    p.add_argument("--tasks", help="comma list (default: every task)")
    p.add_argument("--seed", type=int, default=2024)
    p.add_argument("--jobs", type=int, help="passed to grade --jobs")
    p.add_argument("--timeout", type=float, help="passed to grade --timeout")
    p.add_argument("--record", help="write a JSON record here, e.g. results/room_test_cpu.json")
    p.add_argument("--keep", action="store_true", help="keep the room and the gradebook (their folder is printed)")
    p.add_argument("--speed-points", action="store_true", help="passed to grade (GPU: speed tiers scored)")
    p.add_argument("--limit-s", type=float, help="stop the grade command after this many seconds (recorded)")
    p.add_argument("--copies", action="store_true", help="every file an exact copy of its source (see above)")
    args = p.parse_args(argv)

    every = course_tasks()
    task_names = every if not args.tasks else [t for t in every if t in {n.strip() for n in args.tasks.split(",")}]
    unknown = sorted({n.strip() for n in (args.tasks or "").split(",") if n.strip()} - set(every))
    if unknown or not task_names or args.learners < 1:
        print(f"error: unknown tasks {unknown}" if unknown else "error: nothing to grade", file=sys.stderr)
        return 2

    work = Path(tempfile.mkdtemp(prefix="room-test-"))
    try:
        room = work / "room"
        plan = build_room(room, args.learners, task_names, copies=args.copies)
        distinct = distinct_files(room)
        out = work / "grades.csv"
        command = [sys.executable, "-m", "course_lib", "grade", str(room), "--out", str(out), "--seed", str(args.seed)]
        command += ["--quiet", "--task", ",".join(task_names)]
        command += ["--jobs", str(args.jobs)] if args.jobs else []
        command += ["--timeout", str(args.timeout)] if args.timeout else []
        command += ["--speed-points"] if args.speed_points else []
        env = dict(os.environ, COURSE_PROGRESS=str(work / "progress.json"))
        kinds = Counter(v["kind"] for v in plan.values())
        print(f"grading {args.learners} learners x {len(task_names)} tasks ({dict(kinds)}) in {room}: "
              f"{distinct} distinct files to grade", flush=True)  # fmt: skip
        start = time.perf_counter()
        try:
            done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=args.limit_s)
        except subprocess.TimeoutExpired:
            print(f"error: the room was not graded in {args.limit_s:.0f} s", file=sys.stderr)
            if args.record:
                Path(args.record).parent.mkdir(parents=True, exist_ok=True)
                Path(args.record).write_text(json.dumps({"learners": args.learners, "tasks": task_names,
                                                         "unfinished_after_s": args.limit_s}, indent=1) + "\n")  # fmt: skip
            return 1
        seconds = time.perf_counter() - start
        print(done.stdout.rstrip())
        if done.returncode != 0 or not out.exists():
            print(done.stderr.rstrip()[-4000:], file=sys.stderr)
            print(f"error: grade exited {done.returncode}", file=sys.stderr)
            return 1
        with out.open(newline="") as f:
            rows = list(csv.DictReader(f))
        problems = check(rows, plan, task_names)
        if "Traceback" in done.stdout + done.stderr:
            problems.append("the command printed a traceback")
        statuses = Counter(r["status"] for r in rows)
        print(f"\nwall time {seconds:.1f} s for {len(rows)} rows; statuses {dict(statuses)}")
        for line in problems:
            print(f"PROBLEM {line}")
        print("room test: " + ("ok" if not problems else f"{len(problems)} problems"))
        if args.record:
            record = {
                "meta": {
                    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                    "machine": os.cpu_count(),
                    "platform": platform.platform(),
                    "python": platform.python_version(),
                    "torch": version("torch"),
                    "triton": version("triton"),
                    "mode": os.environ.get("COURSE_MODE", "auto"),
                },
                "learners": args.learners,
                "kinds": dict(kinds),
                "copies": args.copies,
                "distinct_files": distinct,
                "tasks": task_names,
                "rows": len(rows),
                "seconds": round(seconds, 1),
                "statuses": dict(statuses),
                "speed_tiers": dict(Counter(r.get("speed_tier", "") for r in rows if r.get("speed_tier"))),
                "speed_points": args.speed_points,
                "seed": args.seed,
                "problems": problems,
            }
            path = Path(args.record)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(record, indent=1) + "\n")
            print(f"wrote {path}")
        return 0 if not problems else 1
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
