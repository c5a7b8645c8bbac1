"""The record readers of notebooks 06, 07 and 09 (course_lib.lessons.ch06, ch07, ch09): each table
says that its record is not recorded yet where it is missing (the CPU-mode notebook runs, with the
records in results/, never take that branch), and names the record it read, with its provenance,
where it is there."""

from __future__ import annotations

import pytest

from course_lib import results
from course_lib.lessons import ch06, ch07, ch09

MISSING = {  # each table without its record -> what it must say
    "ch06.kernels_table": (lambda: ch06.kernels_table(None), "not recorded yet"),
    "ch06.grouping_table": (lambda: ch06.grouping_table(None, 0.0, 60), "not recorded yet"),
    "ch06.bench_table": (lambda: ch06.bench_table("tiled_matmul", []), "not recorded yet"),
    "ch06.solutions_table": (
        lambda: ch06.solutions_table({"tiled_matmul": [], "grouped_matmul": []}, 0.0),
        "not recorded yet",
    ),
    "ch06.stages_sweep_table": (lambda: ch06.stages_sweep_table(None), "not recorded yet"),
    "ch06.stage_pairs_table": (lambda: ch06.stage_pairs_table(None), "not recorded yet"),
    "ch07.decode_table": (lambda: ch07.decode_table(None), "not recorded yet"),
    "ch09.stages_against_model": (
        lambda: ch09.stages_against_model(None, [], [], {}, [], {}, 8),
        "not recorded yet",
    ),
    "ch09.gluon_records_table": (lambda: ch09.gluon_records_table(None, [], []), "not recorded yet"),
    "ch09.auto_ws_table": (lambda: ch09.auto_ws_table(None), "not recorded yet"),
    "ch09.auto_ws_against_record": (lambda: ch09.auto_ws_against_record({}, None), "no H200 record"),
}


@pytest.mark.parametrize("name", MISSING)
def test_a_table_without_its_record_says_so(name):
    table, expected = MISSING[name]
    assert expected in table()


RECORDED = {  # a record's file name -> the table that reads it
    ch06.GROUPING_RECORD: ch06.kernels_table,
    ch06.STAGES_RECORD: ch06.stages_sweep_table,
    ch07.DECODE_RECORD: ch07.decode_table,
    ch09.GLUON_RECORD: lambda record: ch09.gluon_records_table(record, [], []),
    ch09.AUTO_WS_RECORD: ch09.auto_ws_table,
}


@pytest.mark.parametrize("name", RECORDED)
def test_a_table_names_its_record_and_provenance(name):
    record = results.read_record(name)
    if record is None:
        pytest.skip(f"results/{name} is not recorded")
    text = RECORDED[name](record)
    assert name in text and results.provenance(record["meta"]) in text


def test_the_noise_band_is_the_widest_gap_of_one_call():
    noise, text = ch06.noise_band()
    gaps = ch06.same_call_gaps()
    assert noise == (max(g[3] for g in gaps) if gaps else 0.0)
    assert text.startswith("noise band:")
    assert ch06.verdict(1 + noise + 1e-9, noise) == "helped" and ch06.verdict(1.0, noise) == "within noise"
