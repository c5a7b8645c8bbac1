"""What a grader's trace (COURSE_TRACE, course_lib/grader/trace.py) says about where a run's time went.

    python scripts/trace_summary.py results/grader_h200/speed_2026-12-04_dedupe/room/trace.jsonl.gz

Prints the tasks graded, the job-seconds, the learners' own runs, the GPU lock's waits and holds (shared
for steps, alone for timing) and the CPUs' use (the ``cpu`` samples), with the core-seconds it comes to
in all and per GPU job. The figures of results/ READMEs
that quote a trace come from here."""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path


def read(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def summary(events: list[dict]) -> dict:
    def of(name: str) -> list[dict]:
        return [e for e in events if e["event"] == name]

    cpu = [e["busy"] for e in of("cpu")]
    out = {
        "span_s": round(events[-1]["t"] - events[0]["t"], 1) if events else 0.0,
        "tasks_graded": len(of("task result")),
        "job_s": round(sum(e["seconds"] for e in of("task graded ended")), 1),
        "cases": len(of("case")),
        "learner_runs_s": round(sum(e["ran_s"] for e in of("case")), 1),
    }
    for kind in ("shared", "alone"):
        holds = of(f"gpu {kind}")
        out[f"gpu_{kind}"] = {
            "holds": len(holds),
            "waited_s": round(sum(e["waited_s"] for e in holds), 1),
            "held_s": round(sum(e["held_s"] for e in holds), 1),
        }
    if cpu:
        out["cpu_busy"] = {"samples": len(cpu), "mean": round(sum(cpu) / len(cpu), 3), "min": min(cpu), "max": max(cpu)}
        # the CPU work of the run: the mean busy fraction of all the cores over its span, and per GPU job
        cores = max((e.get("cores") or 0 for e in of("cpu")), default=0)
        if cores:
            core_s = sum(cpu) / len(cpu) * cores * out["span_s"]
            gpu_jobs = sum(1 for e in of("task result") if str(e.get("task", "")).endswith("/gpu"))
            out["cpu_core_s"] = round(core_s)
            if gpu_jobs:
                out["core_s_per_gpu_job"] = round(core_s / gpu_jobs, 1)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trace", type=Path)
    args = p.parse_args(argv)
    print(json.dumps(summary(read(args.trace)), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
