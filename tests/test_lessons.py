"""The record readers of notebooks 06, 07, 09 and 10 (course_lib.lessons.ch06, ch07, ch09, ch10): each table
says that its record is not recorded yet where it is missing (the CPU-mode notebook runs, with the
records in results/, never take that branch), and names the record it read, with its provenance,
where it is there."""

from __future__ import annotations

import pytest

from course_lib import results
from course_lib.lessons import ch06, ch07, ch09, ch10

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


RATE = 989e12  # FLOP/s: any roof will do for the text's shape; notebook 10 passes the datasheet's bf16 peak
NO_RECORDS = {"baselines": None, "experiment": None, "gluon": None}
MISSING_10 = {  # notebook 10's texts, with results/ empty and no record passed -> what each must say
    "ch10.naive_against_records": (
        lambda: ch10.naive_against_records(1.0, RATE, RATE / 2, None, None),
        f"the recorded baselines (results/{ch10.BASELINES_RECORD}): not in results/",
    ),
    "ch10.decomposition_recorded": (lambda: ch10.decomposition_recorded(None, RATE), ""),
    "ch10.padding_records": (lambda: ch10.padding_records(NO_RECORDS), "chapter 08's bench: not recorded yet"),
    "ch10.decomposed_rest_recorded": (lambda: ch10.decomposed_rest_recorded(None, RATE), ""),
    "ch10.step4_records": (lambda: ch10.step4_records(None), f"step 4 in the experiment: {ch10.NOT_YET}"),
    "ch10.ws_tries_table": (lambda: ch10.ws_tries_table(None), ch10.NOT_YET),
}


@pytest.mark.parametrize("name", MISSING_10)
def test_a_ch10_text_without_its_records_says_so(name, tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_ROOT", str(tmp_path))  # a course whose results/ is empty
    text, expected = MISSING_10[name]
    got = text()
    assert expected in got if expected else got == ""  # "": the notebook prints nothing without the baselines
    assert "recorded on" not in got


RECORDED_10 = {  # notebook 10's texts -> (the record each reads, the text from it)
    "ch10.naive_against_records": (
        ch10.BASELINES_RECORD,
        lambda record: ch10.naive_against_records(1.0, RATE, RATE / 2, record, None),
    ),
    "ch10.decomposition_recorded": (ch10.BASELINES_RECORD, lambda record: ch10.decomposition_recorded(record, RATE)),
    "ch10.padding_records": (
        ch10.EXPERIMENT_RECORD,
        lambda record: ch10.padding_records(dict(NO_RECORDS, experiment=record)),
    ),
    "ch10.step4_records": (ch10.EXPERIMENT_RECORD, ch10.step4_records),
    "ch10.ws_tries_table": (ch10.EXPERIMENT_RECORD, ch10.ws_tries_table),
}


@pytest.mark.parametrize("name", RECORDED_10)
def test_a_ch10_text_names_its_record_and_provenance(name):
    record_name, text = RECORDED_10[name]
    record = results.read_record(record_name)
    if record is None:
        pytest.skip(f"results/{record_name} is not recorded")
    got = text(record)
    assert results.provenance(record["meta"]) in got
    if name != "ch10.decomposition_recorded":  # its line gives the provenance alone, as the notebook prints it
        assert record_name in got


def test_the_decomposed_split_reads_the_published_baselines():
    record = results.read_record(ch10.BASELINES_RECORD)
    if record is None:
        pytest.skip(f"results/{ch10.BASELINES_RECORD} is not recorded")
    row = ch10.baseline_row(record, "published")
    text = ch10.decomposed_rest_recorded(record, RATE)
    assert results.provenance(record["meta"]) in text
    assert f"{row['decomposed_eager_ms'] - row['cublas_candidate_ms']:.3f} ms" in text


def test_the_decode_table_reads_split_k_by_loop_form_atomics_and_tile():
    """A record of the split-K experiment as scripts/experiments_gemm.py now writes it (loop form, atomics,
    the parts of a whole run); the 2026-12-01 record's rows, which name neither, read as its own form."""

    def row(variant, ms, bn=64, bk=256, split=2, **config):
        cfg = {"BLOCK_N": bn, "BLOCK_K": bk, "num_warps": 4, "num_stages": 4, "split_k": split, **config}
        return {"variant": variant, "shape": [16, 8192, 8192], "median_ms": ms / 1e3, "config": cfg}

    steps = {"sem": "relaxed", "loop": "steps"}
    record = {
        "meta": {"gpu": "G", "date": "2026-12-05"},
        "rows": [
            row("split_k", 41.0, **steps),
            row("split_k", 40.0, split=4, **steps),
            row("split_k_zero", 2.0, split=4, **steps),
            row("split_k_partial", 33.0, split=4, **steps),
            row("split_k_finish", 3.0, split=4, **steps),
            row("split_k", 44.0, sem="acq_rel", loop="steps"),
            row("split_k", 58.0, sem="relaxed", loop="bounds"),
            row("split_k", 250.0, bn=128, sem="relaxed", loop="bounds"),
            row("split_k", 63.0),  # the first record's form: no loop, no sem
        ],
    }
    text = ch07.decode_table(record)
    assert "loop over steps, relaxed atomics: 40.0 to 41.0 us" in text
    assert "default atomics (acq_rel): 44.0 to 44.0 us" in text
    assert "loop over K offsets (not pipelined): 58.0 to 58.0 us" in text
    assert "(not pipelined) (the first record's wide tiles): 250.0 to 250.0 us" in text
    assert "(not pipelined), default atomics: 63.0 to 63.0 us" in text
    parts = "each timed alone: zero 2.0 us, partial 33.0 us, finish 3.0 us"
    assert f"its best (4 parts, BLOCK_N 64, BLOCK_K 256) in parts, {parts}" in text


def test_a_bench_table_can_read_an_earlier_gpus_record_and_says_which():
    """results.table(task, record=...) reads that bench file (an H100's run kept in a folder) and names it with
    its provenance; a matmul task's table gives TFLOP/s, a batch's context lengths are shown as count and range,
    and a record that is not there says so."""
    name = "attention_h100_2026-12-05/seventh_run/bench_paged_decode_h100.json"
    record = results.read_record(name)
    if record is None:
        pytest.skip(f"results/{name} is not recorded")
    text = results.table("paged_decode", record=name)
    assert f"results/{name}" in text and results.provenance(record["meta"]) in text
    assert "contexts=64 of 2048-6061" in text and "contexts=64 x 4096" in text and "TFLOP/s" not in text
    prefill = results.table("ws_attention", record=name.replace("paged_decode", "ws_attention"))
    assert "TFLOP/s" in prefill.splitlines()[1] and " 664 " in prefill  # 663.6 TFLOP/s, the first solution row
    assert "no recorded GPU results" in results.table("ws_attention", record="no_such_folder/bench.json")
