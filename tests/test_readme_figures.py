"""The README's headline figures for chapter 10 against the records they quote: each number in the
prose is recomputed from results/ here, so a new record or an edited sentence that no longer agree
fail this test."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from course_lib.lessons import ch10 as lesson10

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
HEADLINE = README[: README.index("## Two commands")]


def _ms(record: dict, variant: str, label: str = "published", dtype: str = "bfloat16") -> float:
    row = lesson10.measured(record, label, dtype, variant)
    assert row is not None, f"{variant} at {label} {dtype} is not in the record"
    return row["median_ms"]


@pytest.fixture(scope="module")
def experiment():
    record = lesson10.read_record(lesson10.EXPERIMENT_RECORD)
    assert record is not None, f"results/{lesson10.EXPERIMENT_RECORD} is missing"
    return record


def test_the_headline_names_its_record_gpu_versions_and_date(experiment):
    meta = experiment["meta"]
    assert f"`results/{lesson10.EXPERIMENT_RECORD}`" in HEADLINE
    assert meta["gpu"] in HEADLINE and meta["date"] in HEADLINE
    assert f"torch {meta['versions']['torch']}" in HEADLINE and f"Triton {meta['versions']['triton']}" in HEADLINE


def test_the_headline_times_and_speedups_are_the_records(experiment):
    step4, naive = _ms(experiment, "ws_compression"), _ms(experiment, "naive_eager")
    autotuned = _ms(experiment, "decomposed_torch_compile_max-autotune")
    cublas = _ms(experiment, "cublas_candidate_padded")
    assert f"**{step4:.2f} ms against {naive:.2f} ms**" in HEADLINE
    assert f"**{naive / step4:.1f}x**" in HEADLINE
    compiled = lesson10.measured(experiment, "published", "bfloat16", "decomposed_torch_compile_max-autotune")
    if compiled.get("compile_config"):  # timed at its best (timing.compiled_at_best): a speed-up may be claimed
        assert re.search(rf"{autotuned / step4:.1f}x faster than torch.compile\s+max-autotune", HEADLINE)
    else:  # timed with its CUDA graphs' per-call input copy: quoted as handicapped, no speed-up over it
        assert not re.search(r"x faster than torch\.compile", HEADLINE)
        assert f"took {autotuned:.2f} ms" in HEADLINE and "handicapped" in HEADLINE
    assert f"candidate GEMM alone ({cublas:.2f} ms" in HEADLINE
    target, stretch = lesson10.TARGETS_MS["published", "bfloat16"]
    assert step4 <= target and f"target of {target:.2f} ms is met, its\nstretch of {stretch:.2f} ms is not" in HEADLINE
    assert step4 > stretch


def test_the_headline_course_shape_figures_are_the_records(experiment):
    step4, naive = _ms(experiment, "ws_compression", "course"), _ms(experiment, "naive_eager", "course")
    target = lesson10.TARGETS_MS["course", "bfloat16"][0]
    assert step4 <= target
    assert f"the step takes {step4:.3f} ms against {naive:.2f} ms (target\n{target:.3f} ms)" in HEADLINE


def test_the_headline_one_launch_and_earlier_figures_are_the_records():
    one = lesson10.read_record(lesson10.EXPERIMENT_RECORD)
    assert one is not None
    slower = _ms(one, "ws_compression_one_launch") - _ms(one, "ws_compression")
    assert slower > 0 and f"{slower:.3f} ms slower (`results/{lesson10.EXPERIMENT_RECORD}`)" in HEADLINE
    for name in lesson10.FIRST_RECORDS:
        earlier = lesson10.read_record(name)
        assert earlier is not None and f"`results/{name}`" in HEADLINE
        assert f"gave {_ms(earlier, 'ws_compression'):.2f} ms" in HEADLINE


def test_the_headline_best_torch_eager_figure_is_the_records(experiment):
    """A speed-up over plain PyTorch is claimed only where the record timed it at its best (a form picked)."""
    row = lesson10.measured(experiment, "published", "bfloat16", "best_torch_eager")
    step4 = _ms(experiment, "ws_compression")
    if row and row.get("config"):
        flat = " ".join(HEADLINE.split())
        assert f"{row['median_ms']:.2f} ms) the step is {row['median_ms'] / step4:.1f}x faster" in flat
        assert f"here {row['config'].split(',')[0]}," in flat  # the form the record picked, named as it is
    else:
        assert not re.search(r"plain-PyTorch version.{0,200}x faster", HEADLINE, re.S)
