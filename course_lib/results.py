"""Recorded GPU results in results/*.json: read them, and say where each number comes from."""

from __future__ import annotations

import json
from pathlib import Path

from .runtime import course_root


def results_dir() -> Path:
    return course_root() / "results"


def provenance(meta: dict) -> str:
    v = meta.get("versions", {})
    return (
        f"{meta.get('gpu', '?')}, torch {v.get('torch', '?')}, triton {v.get('triton', '?')}, {meta.get('date', '?')}"
    )


def read_record(name: str) -> dict | None:
    """A JSON record of results/ by file name (an experiment's, a bench's), or None where it has not
    been written yet."""
    path = results_dir() / name
    return json.loads(path.read_text()) if path.exists() else None


def load_bench_files() -> list[dict]:
    """Every benchmark record file: {"meta": ..., "records": [...], "path": ...}, newest first."""
    files = []
    for path in sorted(results_dir().glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(data, dict) and "records" in data and "meta" in data:
            data["path"] = str(path.relative_to(course_root()))
            files.append(data)
    return sorted(files, key=lambda d: d["meta"].get("date", ""), reverse=True)


def _hardware_fractions(data: dict) -> None:
    """Each record's roofline_fraction against the hardware's roof (``roofline.hardware``: the GPU's
    datasheet compute peak, not cuBLAS's measured rate, which records before 2026-12-04 used)."""
    from . import roofline, tasks

    found = data["meta"].get("peaks")
    if not found:
        return
    try:
        peaks = roofline.from_record(found)
    except TypeError:
        return

    def rate(r: dict) -> str:
        return r["dtype"] if tasks.get(r["task"]).tensor_cores else "float32"  # as bench records it

    rows = []
    for r in data["records"]:
        try:
            if r["variant"] in tasks.get(r["task"]).partial_variants:
                r["roofline_fraction"] = None  # a part of the task's work (bench records it so since)
            else:
                rows.append(r)
        except (KeyError, ValueError):
            continue
    try:
        peaks = roofline.covering(peaks, rows, rate)  # no roof below a rate the same run reached
        for r in rows:
            seconds = r["median_ms"]
            r["roofline_fraction"] = roofline.fraction_of_roofline(seconds, r["bytes"], r["flops"], peaks, rate(r))
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return


def records(task: str | None = None, variant: str | None = None) -> list[dict]:
    """Benchmark records, each with a "provenance" string, from the newest file that has the task;
    roofline_fraction against the hardware's roof (``roofline.hardware``)."""
    out = []
    for data in load_bench_files():
        rows = [
            r
            for r in data["records"]
            if (task is None or r["task"] == task) and (variant is None or r["variant"] == variant)
        ]
        if not rows:
            continue
        _hardware_fractions({"meta": data["meta"], "records": rows})
        for r in rows:
            out.append(dict(r, provenance=provenance(data["meta"]), file=data["path"]))
        if task is not None:
            break  # one file's figures: measured side by side in one run
    return out


def table(task: str) -> str:
    """The recorded figures of one task as text, with their provenance."""
    rows = records(task)
    if not rows:
        return f"no recorded GPU results for {task} in {results_dir()}"
    lines = [f"recorded on {rows[0]['provenance']} ({rows[0]['file']}):"]
    lines.append(f"  {'variant':<15}{'case':<40}{'median':>12}{'GB/s':>9}{'of roofline':>13}")
    for r in rows:
        case = f"{r['dtype']} {tuple(r['shape'])}" + "".join(f" {k}={v}" for k, v in r.get("params", {}).items())
        us = r["median_ms"] * 1e3
        share = "part" if r["roofline_fraction"] is None else f"{r['roofline_fraction']:.0%}"
        lines.append(f"  {r['variant']:<15}{case:<40}{us:>9.1f} us{r['gbs']:>9.0f}{share:>13}")
    return "\n".join(lines)
