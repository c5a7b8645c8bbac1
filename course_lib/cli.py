"""The command line: ``python -m course_lib ...`` (also installed as ``course``).

It imports no notebook packages, so it runs on a headless GPU machine and in CI.
"""

from __future__ import annotations

import argparse
import csv
import json
import secrets
import sys
from pathlib import Path

from . import runtime


def _cmd_doctor(args) -> int:
    from . import diagnose as doctor

    found = doctor.run()
    print(doctor.format_findings(found))
    return 0 if doctor.usable(found) else 1


def _cmd_list(args) -> int:
    from . import progress, tasks

    data = progress.load()
    chapter = None
    for spec in tasks.all_tasks():
        if spec.chapter != chapter:
            chapter = spec.chapter
            print(f"chapter {chapter}")
        print(f"  {spec.name:<16} {progress.status_of(spec.name, data):<28} {spec.title}")
    return 0


def _task_names(args) -> list[str]:
    from . import tasks

    if args.all:
        return [t.name for t in tasks.all_tasks()]
    names = args.task if isinstance(args.task, list) else [args.task] if args.task else []
    if not names:
        raise SystemExit("name a task or use --all (python -m course_lib list shows the tasks)")
    try:
        return [tasks.get(name).name for name in names]
    except KeyError as e:
        raise SystemExit(str(e.args[0])) from None


def _cmd_check(args) -> int:
    from . import grading, progress, report

    names = _task_names(args)
    source = args.source or ("solutions" if args.solutions else "exercises")
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    results = grading.grade(names, source=source, seed=seed, timeout=args.timeout, jobs=args.jobs)
    if source == "exercises":
        progress.record_results(results)
    if args.json:
        print(json.dumps([r.to_dict() for r in results], indent=1))
    else:
        print(report.text(results))
    return 0 if all(r.passed for r in results) else 1


def _cmd_grade(args) -> int:
    from . import grading, report, tasks

    root = Path(args.submissions).expanduser().resolve()
    if not root.is_dir():
        raise SystemExit(f"{root} is not a folder of submissions")
    learners = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not learners:
        raise SystemExit(f"{root} holds no learner folders (expected {root}/<learner>/<task>.py)")
    try:
        names = [t.name for t in tasks.all_tasks()] if not args.task else [tasks.get(args.task).name]
    except KeyError as e:
        raise SystemExit(str(e.args[0])) from None
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    rows = []
    for learner in learners:
        results = grading.grade(names, source=learner, seed=seed, timeout=args.timeout, jobs=args.jobs)
        passed = sum(r.passed for r in results)
        print(f"{learner.name}: {passed}/{len(results)} tasks pass")
        if args.verbose:
            print(report.text(results))
        for r in results:
            rows.append(
                {
                    "learner": learner.name,
                    "task": r.task,
                    "status": r.status,
                    "cases_passed": r.cases_passed,
                    "cases_total": r.cases_total,
                    "summary": r.summary,
                    "seed": r.seed,
                }
            )
    out = Path(args.out)
    if out.suffix == ".json":
        out.write_text(json.dumps(rows, indent=1))
    else:
        with out.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    print(f"wrote {len(rows)} rows to {out}")
    return 0


def _cmd_hint(args) -> int:
    from . import progress, tasks

    try:
        spec = tasks.get(args.task)
    except KeyError as e:
        raise SystemExit(str(e.args[0])) from None
    seen = progress.load()["tasks"].get(spec.name, {}).get("hints_seen", 0)
    number = args.number or min(seen + 1, len(spec.hints) + 1)
    if number < 1:
        raise SystemExit("hints are numbered from 1")
    if number > len(spec.hints):
        print(
            f"{spec.name} has {len(spec.hints)} hints and you have seen them all. The reference solution is "
            f"solutions/{spec.name}.py: give your own version one more try before you open it."
        )
        return 0
    print(f"hint {number} of {len(spec.hints)} for {spec.name}:\n  {spec.hints[number - 1]}")
    progress.record_hint(spec.name, number)
    if number < len(spec.hints):
        print(f"(another: python -m course_lib hint {spec.name})")
    return 0


def _cmd_bench(args) -> int:
    from . import results, tasks, timing

    names = _task_names(args)
    if not runtime.is_gpu():
        print(timing.CPU_REFUSAL)
        for name in names:
            print(results.table(name))
        return 2
    from . import bench

    unknown = [n for n in names if not tasks.get(n).bench_cases]
    for n in unknown:
        print(f"{n}: no benchmark cases")
    chosen = [n for n in names if n not in unknown]
    bench.run(chosen, record=args.record, source=args.source or "solutions", dtype=args.dtype)
    return 0


def _cmd_sync(args) -> int:
    from . import exercises

    try:
        report = exercises.sync(check=args.check, force=args.force)
    except exercises.MarkerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("\n".join(report.lines(args.check)))
    if args.check:
        return 1 if report.drift else 0
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m course_lib", description="Fast GPU kernels in Triton: course tools.")
    sub = p.add_subparsers(dest="command", required=True)

    sub.add_parser("doctor", help="mode, versions, GPU and interpreter canaries; exit 0 when usable")
    sub.add_parser("list", help="tasks by chapter with your status")

    c = sub.add_parser("check", help="grade exercises/ (or solutions/); exit 0 iff all pass")
    c.add_argument("task", nargs="*", help="one or more tasks")
    c.add_argument("--all", action="store_true", help="every task")
    c.add_argument("--solutions", action="store_true", help="grade solutions/ instead of exercises/")
    c.add_argument("--source", help="grade the task files in this folder instead")
    c.add_argument("--json", action="store_true", help="results as JSON")
    c.add_argument("--seed", type=int, help="base seed of the random inputs (printed on failure)")
    c.add_argument("--timeout", type=float, help="seconds per task before it counts as hung")
    c.add_argument("--jobs", type=int, help="tasks graded at once (default: up to 4)")

    g = sub.add_parser("grade", help="grade every learner folder under SUBMISSIONS_DIR")
    g.add_argument("submissions")
    g.add_argument("--out", default="grades.csv", help="CSV, or JSON if the name ends in .json")
    g.add_argument("--task", help="grade only this task")
    g.add_argument("--seed", type=int)
    g.add_argument("--timeout", type=float)
    g.add_argument("--jobs", type=int)
    g.add_argument("--verbose", action="store_true", help="print each learner's report")

    b = sub.add_parser("bench", help="GPU only: time solutions and baselines; --record writes a JSON record")
    b.add_argument("task", nargs="?")
    b.add_argument("--all", action="store_true")
    b.add_argument("--record", help="write the records here, e.g. results/h200.json")
    b.add_argument("--source", help="time the task files in this folder (default solutions/)")
    b.add_argument("--dtype", help="only the benchmark cases of this dtype, e.g. float32")

    h = sub.add_parser("hint", help="the next hint for a task (or hint N)")
    h.add_argument("task")
    h.add_argument("number", nargs="?", type=int)

    s = sub.add_parser("sync-exercises", help="regenerate exercises/ from solutions/")
    s.add_argument("--check", action="store_true", help="write nothing; exit 1 if exercises/ differs")
    s.add_argument("--force", action="store_true", help="replace edited exercises too (a backup is kept)")
    return p


COMMANDS = {
    "doctor": _cmd_doctor,
    "list": _cmd_list,
    "check": _cmd_check,
    "grade": _cmd_grade,
    "bench": _cmd_bench,
    "hint": _cmd_hint,
    "sync-exercises": _cmd_sync,
}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except runtime.CourseSetupError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `... | head` closed the pipe: not an error of the course
        sys.stderr.close()
        return 0
