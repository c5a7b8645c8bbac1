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


def rate_dtype(task: str, dtype: str) -> str:
    """The rate a bench row's FLOPs run at: its dtype's matmul rate on tensor cores, else float32's
    (elementwise and reduction maths runs on the float32 units whatever the storage dtype)."""
    from . import tasks

    return dtype if tasks.get(task).tensor_cores else "float32"


def hardware_fractions(rows: list[dict], peaks):
    """Set each bench row's roofline_fraction against the hardware's roof (``roofline.hardware``),
    raised to the fastest rate a row of the same run reached (``roofline.covering``); rows that do a
    part of the task's work (``TaskSpec.partial_variants``) get None. Returns the roof used. Rows of
    tasks no longer in the course keep what was recorded."""
    from . import roofline, tasks

    counted = []
    for r in rows:
        try:
            spec = tasks.get(r["task"])
        except (KeyError, ValueError):
            continue
        if r["variant"] in spec.partial_variants:
            r["roofline_fraction"] = None  # a fraction would credit it with the rest of the work
        else:
            counted.append(r)
    roof = roofline.covering(peaks, counted, lambda r: rate_dtype(r["task"], r["dtype"]))
    for r in counted:
        r["roofline_fraction"] = roofline.fraction_of_roofline(
            r["median_ms"], r["bytes"], r["flops"], roof, rate_dtype(r["task"], r["dtype"])
        )
    return roof


def records(task: str | None = None, variant: str | None = None, record: str | None = None) -> list[dict]:
    """Benchmark records, each with a "provenance" string, from the newest file that has the task, or
    from ``record`` (a bench file's path under results/, such as an earlier GPU's run kept in a folder);
    roofline_fraction against the hardware's roof (``roofline.hardware``)."""
    out = []
    if record is not None:
        data = read_record(record)
        files = [dict(data, path=f"results/{record}")] if data and "records" in data and "meta" in data else []
    else:
        files = load_bench_files()
    for data in files:
        rows = [
            r
            for r in data["records"]
            if (task is None or r["task"] == task) and (variant is None or r["variant"] == variant)
        ]
        if not rows:
            continue
        found = data["meta"].get("peaks")
        if found:  # records before 2026-12-04 were written against cuBLAS's rate as the compute roof
            from . import roofline

            hardware_fractions(rows, roofline.from_record(found))
        for r in rows:
            out.append(dict(r, provenance=provenance(data["meta"]), file=data["path"]))
        if task is not None:
            break  # one file's figures: measured side by side in one run
    return out


def _short(value) -> str:
    """A case parameter for a table's line: a long list (a batch's context lengths) as its count and range."""
    if isinstance(value, (list, tuple)) and len(value) > 4 and all(isinstance(x, (int, float)) for x in value):
        return (
            f"{len(value)} x {value[0]}" if min(value) == max(value) else f"{len(value)} of {min(value)}-{max(value)}"
        )
    return str(value)


def table(task: str, record: str | None = None) -> str:
    """The recorded figures of one task as text, with their provenance (``record``: from that bench file)."""
    rows = records(task, record=record)
    if not rows:
        return f"no recorded GPU results for {task} in {results_dir() / (record or '')}"
    lines = [f"recorded on {rows[0]['provenance']} ({rows[0]['file']}):"]
    # TFLOP/s where the task's work is matmuls (on tensor cores): a compute-bound kernel's GB/s says little
    rates = any(r.get("tflops") is not None and rate_dtype(task, r["dtype"]) != "float32" for r in rows)
    cases = [
        f"{r['dtype']} {tuple(r['shape'])}" + "".join(f" {k}={_short(v)}" for k, v in r.get("params", {}).items())
        for r in rows
    ]
    width, case_width = max([15] + [len(r["variant"]) + 1 for r in rows]), max([40] + [len(c) + 1 for c in cases])
    head = f"  {'variant':<{width}}{'case':<{case_width}}{'median':>12}{'GB/s':>9}" + (
        f"{'TFLOP/s':>9}" if rates else ""
    )
    lines.append(head + f"{'of roofline':>13}")
    for r, case in zip(rows, cases):
        us = r["median_ms"] * 1e3
        share = "part" if r["roofline_fraction"] is None else f"{r['roofline_fraction']:.0%}"
        rate = f"{r['tflops']:>9.0f}" if rates and r.get("tflops") is not None else (" " * 9 if rates else "")
        lines.append(f"  {r['variant']:<{width}}{case:<{case_width}}{us:>9.1f} us{r['gbs']:>9.0f}{rate}{share:>13}")
    return "\n".join(lines)
