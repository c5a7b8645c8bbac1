"""The command line: ``python -m course_lib ...`` (also installed as ``course``).

It imports no notebook packages, so it runs on a headless GPU machine and in CI.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
from pathlib import Path

from . import runtime


def _cmd_doctor(args) -> int:
    from . import checkup as doctor

    found = doctor.run()
    print(doctor.format_findings(found))
    return 0 if doctor.usable(found) else 1


def _cmd_list(args) -> int:
    from . import progress, tasks

    data = progress.load()
    specs = tasks.all_tasks()
    statuses = {spec.name: progress.status_of(spec.name, data) for spec in specs}
    name_width = max(len(spec.name) for spec in specs)
    status_width = max(28, *(len(status) for status in statuses.values()))  # a column, whatever the status says
    chapter = None
    for spec in specs:
        if spec.chapter != chapter:
            chapter = spec.chapter
            print(f"chapter {chapter}")
        print(f"  {spec.name:<{name_width}} {statuses[spec.name]:<{status_width}} {spec.title}")
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
    from . import grader, progress, sources
    from .grader import report, sandbox

    names = _task_names(args)
    source = args.source or ("solutions" if args.solutions else "exercises")
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    stream = not args.json and len(names) > 1
    done = []
    width = max(len(n) for n in names)

    def each(result) -> None:  # each task's lines as soon as it is graded (grade_jobs reports one at a time)
        done.append(result)
        lines = report.result_lines(result, width)
        lines[0] = f"[{len(done):>{len(str(len(names)))}}/{len(names)}] {lines[0]}"
        print("\n".join(lines), flush=True)

    if stream:
        print(f"grading {len(names)} tasks of {sources.display(sources.resolve(source))} (seed {seed}); "
              "each line comes as its task is done", flush=True)  # fmt: skip
    results = grader.grade(
        names, source=source, seed=seed, timeout=args.timeout, jobs=args.jobs, on_result=each if stream else None
    )
    if source == "exercises":
        progress.record_results(results)
    if args.json:
        print(json.dumps([r.to_dict() for r in results], indent=1))
    else:
        print("\n".join(report.footer(results)) if stream else report.text(results))
        if not grader.own_work(sources.resolve(source)) and not any(r.sandboxed for r in results):
            available = sandbox.available()
            why = available.reason if not available.ok else "COURSE_SANDBOX=off"
            print(f"note: {sources.display(sources.resolve(source))} was graded without the sandbox ({why})")
        elif (missing := sandbox.known_unavailable()) and not args.solutions and _first_time("no-sandbox"):
            # one's own work needs no sandbox, so no trial sandbox is made for this note (`doctor` makes one);
            # said once on this machine, not after every check (`doctor` says it again)
            print(f"note: no sandbox on this machine ({missing}): fine for your own work; "
                  "grading a room needs one (said once; `python -m course_lib doctor` says it again)")  # fmt: skip
    return 0 if all(report.settled(r) for r in results) else 1


def _first_time(note: str) -> bool:
    """True the first time ``note`` is asked for on this machine (a marker in the course's cache), and
    wherever the marker cannot be written (then the note is said every time rather than never)."""
    marker = runtime.cache_root() / "notes" / note
    if marker.exists():
        return False
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError:
        pass
    return True


def _cmd_grade(args) -> int:
    from .grader import roster

    try:
        room = roster.grade_room(
            args.submissions, args.out, args.task, seed=args.seed, timeout=args.timeout, workers=args.jobs,
            hidden=args.hidden, resume=args.resume, speed_points=args.speed_points,
            unsandboxed=args.unsandboxed, progress=False if args.quiet else None, copies_once=not args.each_copy,
        )  # fmt: skip
    except roster.UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"interrupted: {args.out} was not updated", file=sys.stderr)
        return 130
    if args.verbose:
        from .grader import report

        width = max(len(t) for t in room.tasks)
        for learner in room.learners:
            print(f"== {learner}")
            for row in room.rows_of(learner):
                result = room.results.get((learner, row["assignment"]))
                if result is not None:
                    print("\n".join(report.result_lines(result, width)))
                elif row["assignment"] in room.tasks:
                    kept = " (kept from the last run)" if (learner, row["assignment"]) in room.kept else ""
                    print(f"{row['status'].upper():<5} {row['assignment']:<{width}} {row['message']}{kept}")
    if not args.quiet:
        print("\n".join(room.learner_lines()))
    print(room.short_summary())
    return 0


def _cmd_export(args) -> int:
    from pathlib import Path

    from .grader import export

    try:
        rows = export.read_gradebook(Path(args.gradebook))
        if not rows:
            raise export.ExportError(f"{args.gradebook} holds no rows")
        if args.to == "nbgrader":
            if not args.assignment:
                raise export.ExportError("nbgrader keeps grades by assignment: give --assignment NAME")
            done = export.export_nbgrader(rows, args.db, args.assignment)
        elif args.to == "gradescope":
            out = Path(args.out) if args.out else None
            done = export.export_gradescope(rows, out, args.learner, args.visibility)
        else:
            if not args.roster:
                raise export.ExportError(
                    "Canvas matches rows by its own student IDs: give --roster, the CSV of Canvas's gradebook "
                    "export (Grades, Export), whose --match column (default: SIS Login ID) holds the folder names"
                )
            out = Path(args.out or "canvas_grades.csv")
            done = export.export_canvas(rows, out, Path(args.roster), args.match, args.assignment, args.skip_unmatched)
    except export.ExportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # a folder that cannot be written, a disk that is full
        print(f"error: cannot write {e.filename or args.out or 'the export'}: {e.strerror or e}", file=sys.stderr)
        return 2
    for note in done.notes:
        print(f"note: {note}")
    shown = ", ".join(str(p) for p in done.written[:3]) + (" ..." if len(done.written) > 3 else "")
    print(f"wrote {len(done.written)} file{'s' * (len(done.written) != 1)} for {args.to}: {shown}")
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
        from . import release, sources

        withheld = release.hints_withheld(spec.name)
        if withheld:
            print(
                f"{spec.name} has {len(spec.hints)} hint{'s' * (len(spec.hints) != 1)} in this released copy, and "
                f"you have seen {'them all' if spec.hints else 'it'}; its other {withheld} are withheld until the "
                "assignment is over."
            )
            return 0
        where = (
            f"The reference solution is solutions/{spec.name}.py: give your own version one more try before you "
            "open it."
            if sources.solution_present(spec.name)
            else "The reference solution is withheld in this copy: your instructor hands it out after the assignment."
        )
        print(f"{spec.name} has {len(spec.hints)} hints and you have seen them all. {where}")
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
    from . import bench, sources

    if not args.source and not all(sources.solution_present(n) for n in names):
        print(
            "error: bench times the course's solutions, which this copy withholds (a released assignment); "
            "--source exercises times yours",
            file=sys.stderr,
        )
        return 2
    unknown = [n for n in names if not tasks.get(n).bench_cases]
    for n in unknown:
        print(f"{n}: no benchmark cases")
    chosen = [n for n in names if n not in unknown]
    bench.run(chosen, record=args.record, source=args.source or "solutions", dtype=args.dtype)
    return 0


def _cmd_peaks(args) -> int:
    from . import roofline

    if not runtime.is_gpu():
        print(f"CPU mode: the roofline uses the datasheet's figures ({roofline.datasheet_peaks().source})")
        return 2 if args.shared else 0
    try:
        if args.shared:
            peaks, target = roofline.measure_shared(remeasure=args.remeasure)
            print(f"written for every user: {target} (users whose {roofline.SHARED_CACHE_ENV} names its folder)")
        else:
            peaks = roofline.gpu_peaks(remeasure=args.remeasure)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{peaks.gpu}: {peaks.bandwidth_gbs:.0f} GB/s, " + ", ".join(
        f"{k} {v:.0f} TFLOP/s" for k, v in peaks.tflops.items()))  # fmt: skip
    if peaks.library_tflops:
        print("cuBLAS measured: " + ", ".join(f"{k} {v:.0f} TFLOP/s" for k, v in peaks.library_tflops.items()))
    print(f"source: {peaks.source}")
    return 0


def _cmd_publish(args) -> int:
    from . import publish

    root = runtime.course_root()
    try:
        changed = publish.publish(root, repo=args.repo, branch=args.branch, check=args.check)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.check:
        for name in changed:
            print(f"{name}: its setup cell or links differ from publish's (run python -m course_lib publish)")
        return 1 if changed else 0
    print(f"{len(changed)} notebooks updated" + (f": {', '.join(changed)}" if changed else ""))
    return 0


def _cmd_sync(args) -> int:
    from . import release, stubs

    if release.is_release():
        print("\n".join(release.sync_release(runtime.course_root(), force=args.force)))
        return 0
    try:
        report = stubs.sync(check=args.check, force=args.force)
    except stubs.MarkerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("\n".join(report.lines(args.check)))
    if args.check:
        return 1 if report.drift else 0
    return 0


def _cmd_release(args) -> int:
    from . import release

    try:
        lines = release.release(Path(args.out), release.parse_chapters(args.chapters), hints=args.hints)
    except release.ReleaseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


TIMEOUT_HELP = (
    "seconds for each step (loading the file, each case) before it counts as hung; default: 10x the "
    "reference solution's time on this machine + 15 s"
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m course_lib", description="Fast GPU kernels in Triton: course tools.")
    sub = p.add_subparsers(dest="command", required=True)

    sub.add_parser("doctor", help="mode, versions, GPU and interpreter canaries; exit 0 when usable")
    sub.add_parser("list", help="tasks by chapter with your status")

    c = sub.add_parser(
        "check", help="grade exercises/ (or solutions/); exit 0 when all pass (or need a Hopper GPU this machine lacks)"
    )
    c.add_argument("task", nargs="*", help="one or more tasks")
    c.add_argument("--all", action="store_true", help="every task")
    c.add_argument("--solutions", action="store_true", help="grade solutions/ instead of exercises/")
    c.add_argument("--source", help="grade the task files in this folder instead")
    c.add_argument("--json", action="store_true", help="results as JSON")
    c.add_argument("--seed", type=int, help="base seed of the random inputs (printed on failure)")
    c.add_argument("--timeout", type=float, help=TIMEOUT_HELP)
    c.add_argument("--jobs", type=int, help="tasks graded at once (default: up to 4)")

    g = sub.add_parser("grade", help="grade every learner folder under SUBMISSIONS_DIR (SUBMISSIONS_DIR/<learner>/)")
    g.add_argument("submissions")
    g.add_argument(
        "--out", default="grades.csv",
        help="CSV (and the same rows as JSON beside it), or JSON alone if the name ends in .json; "
        "a summary goes to <name>.summary.md",
    )  # fmt: skip
    g.add_argument("--task", action="append", help="only these tasks (repeat it, or a comma list)")
    g.add_argument("--hidden", help="a JSON file of hidden cases (as COURSE_HIDDEN_CASES, which works too)")
    g.add_argument(
        "--resume", action="store_true",
        help="keep the rows of the existing --out file whose file and seed are unchanged; grade the rest",
    )  # fmt: skip
    g.add_argument("--seed", type=int, help="base seed of the inputs (with --resume: default, the recorded one)")
    g.add_argument("--timeout", type=float, help=TIMEOUT_HELP)
    g.add_argument(
        "--jobs",
        type=int,
        help="tasks graded at once (default: up to 4; on a GPU, COURSE_GPU_JOBS or from the cores, per GPU)",
    )
    g.add_argument(
        "--each-copy", action="store_true",
        help="grade byte-identical files of a task one by one (default: once, each copy gets that verdict)",
    )  # fmt: skip
    g.add_argument("--quiet", action="store_true", help="no progress bar, no line per learner")
    g.add_argument("--verbose", action="store_true", help="print each learner's full report")
    g.add_argument(
        "--speed-points", action="store_true",
        help="GPU only: points for speed on top of a pass (fast tier 0.5, expert tier 1)",
    )  # fmt: skip
    g.add_argument(
        "--unsandboxed", action="store_true",
        help="grade without the operating-system sandbox where none can be made (bubblewrap missing): only "
        "for a room whose every file you trust; the gradebook records it",
    )  # fmt: skip

    e = sub.add_parser("export", help="a room's gradebook (grade's CSV or JSON) for Gradescope, Canvas or nbgrader")
    e.add_argument("gradebook", help="the CSV or JSON that `grade` wrote")
    e.add_argument("--to", required=True, choices=["gradescope", "canvas", "nbgrader"])
    e.add_argument(
        "--out", help="gradescope: results.json (the default for one learner), or a folder (one "
        "<learner>/results.json each; default gradescope_results); "
        "canvas: the CSV to import (default canvas_grades.csv)",
    )  # fmt: skip
    e.add_argument("--learner", help="gradescope: only this learner's results.json")
    e.add_argument(
        "--visibility", default="visible", choices=["visible", "hidden", "after_due_date", "after_published"],
        help="gradescope: when learners see the results",
    )  # fmt: skip
    e.add_argument("--roster", help="canvas: Canvas's own gradebook export (its student IDs)")
    e.add_argument("--match", default="SIS Login ID", help="canvas: the roster column that holds the folder names")
    e.add_argument(
        "--assignment",
        help="canvas: one column of this name with each learner's total (default: a column per task); "
        "nbgrader: the assignment the grades go to",
    )
    e.add_argument("--skip-unmatched", action="store_true", help="canvas: leave out folders no student matches")
    e.add_argument(
        "--db", default="sqlite:///gradebook.db", help="nbgrader: its gradebook's database (default: nbgrader's own)"
    )

    b = sub.add_parser("bench", help="GPU only: time solutions and baselines; --record writes a JSON record")
    b.add_argument("task", nargs="?")
    b.add_argument("--all", action="store_true")
    b.add_argument("--record", help="write the records here, e.g. results/h200.json")
    b.add_argument("--source", help="time the task files in this folder (default solutions/)")
    b.add_argument("--dtype", help="only the benchmark cases of this dtype, e.g. float32")

    k = sub.add_parser("peaks", help="GPU only: this GPU's roofline peaks (measured once, then cached)")
    k.add_argument("--remeasure", action="store_true", help="measure again, replacing the cached figures")
    k.add_argument(
        "--shared", action="store_true",
        help="hub administrator: write them to COURSE_SHARED_CACHE for every user, so that no user measures",
    )  # fmt: skip

    u = sub.add_parser(
        "publish", help="write each notebook's Colab/Kaggle setup cell and, with --repo, its Open in Colab links"
    )
    u.add_argument("--repo", help="the course's public repository, https://github.com/ORG/NAME ('' for none)")
    u.add_argument("--branch", default=None,
                   help="the branch the links open (default: the one they open now, or main)")  # fmt: skip
    u.add_argument("--check", action="store_true", help="write nothing; exit 1 if a notebook differs")

    h = sub.add_parser("hint", help="the next hint for a task (or hint N)")
    h.add_argument("task")
    h.add_argument("number", nargs="?", type=int)

    s = sub.add_parser("sync-exercises", help="regenerate exercises/ from solutions/")
    s.add_argument("--check", action="store_true", help="write nothing; exit 1 if exercises/ differs")
    s.add_argument("--force", action="store_true", help="replace edited exercises too (a backup is kept)")

    r = sub.add_parser(
        "release", help="write a learner's copy of the course without solutions/ (an assignment's release)"
    )
    r.add_argument("out", help="a new folder, outside the course folder")
    r.add_argument(
        "--chapters",
        required=True,
        help="the assignment's chapters: 06, 00-05 or 06,07 (later chapters are not released: their "
        "exercises give earlier answers)",
    )
    r.add_argument(
        "--hints",
        type=int,
        metavar="K",
        help="keep only the first K hints of each task of the assignment and later ones (default: all; "
        "some last hints give the answer)",
    )
    return p


COMMANDS = {
    "doctor": _cmd_doctor,
    "list": _cmd_list,
    "check": _cmd_check,
    "grade": _cmd_grade,
    "export": _cmd_export,
    "bench": _cmd_bench,
    "peaks": _cmd_peaks,
    "publish": _cmd_publish,
    "hint": _cmd_hint,
    "sync-exercises": _cmd_sync,
    "release": _cmd_release,
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
