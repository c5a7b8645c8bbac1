"""Chapter 09's task, ring_pipeline: the mbarrier emulator (parity, expected bytes, deadlock, what a
wait tells its role), the solution passes through the grader, the stub is TODO, every deliberately
wrong submission in tests/wrong/ch09_*/ fails with the rule it breaks, and a trace the worker forged
is rejected by the replay in the grader's process.

    python -m course_lib check ring_pipeline --source tests/wrong/ch09_release_before_mma_done
"""

from __future__ import annotations

import functools
import json

import pytest
from conftest import GOOD, ROOT, WRONG

from course_lib import barriers, grader, sources, stubs, tasks
from course_lib.barriers import STAGE_BYTES, Arrive, Bar, ExpectTx, Load, Mma, MmaWait, Wait
from course_lib.grader import FAIL, PASS, TODO

TASK = "ring_pipeline"
SEED = 2024
SOLUTION = ROOT / "solutions" / f"{TASK}.py"


def full_text(result: grader.TaskResult) -> str:
    return "\n".join([result.summary, *result.details])


@functools.cache
def solution_roles():
    """The reference solution's roles, imported here (tests only: the grader never imports learner code)."""
    module = sources.load_file(SOLUTION, "ring_trace", "ring_pipeline_solution_for_tests")[0]
    return module.producer, module.consumer


def roles_from_lists(producer_ops, consumer_ops):
    """Roles that yield fixed lists (built from the ring's barriers)."""

    def producer(k_steps, num_buffers, ready, empty):
        yield from producer_ops(ready, empty)

    def consumer(k_steps, num_buffers, ready, empty):
        yield from consumer_ops(ready, empty)

    return producer, consumer


# --------------------------------------------------------------------------------------------------
# the emulator on its own


def test_parity_fresh_barrier_lets_phase_one_through():
    """Wait(bar, 1) passes on a fresh barrier, Wait(bar, 0) waits for the first completion; after one
    completion it is the other way round."""
    run = barriers._Run(1, 1, 0, "late")
    bar = Bar("empty", 0)
    assert run._passes(bar, 1) and not run._passes(bar, 0)
    run._arrive(bar, run.roles["consumer"])
    assert run.bars[bar].completed == 1
    assert run._passes(bar, 0) and not run._passes(bar, 1)
    run._arrive(bar, run.roles["consumer"])  # two phases on: parity alone cannot tell phase 0 from 2
    assert run._passes(bar, 1) and not run._passes(bar, 0)


def test_expect_tx_completes_only_when_the_arrival_and_all_bytes_are_in():
    run = barriers._Run(1, 1, 0, "late")
    bar, producer = Bar("ready", 0), run.roles["producer"]
    run.bars[bar].tx += STAGE_BYTES
    run._arrive(bar, producer)  # ExpectTx: the one arrival, and bytes still to land
    assert run.bars[bar].completed == 0 and "32768 bytes to land" in run._bar_text(bar)
    run.loads.append(barriers._LoadRec(0, 0))
    run.slot_k[0] = 0
    run._land(run.loads[0])
    assert run.bars[bar].completed == 1 and "L0" in run.bars[bar].known


def test_bytes_landing_before_the_expect_still_complete_the_phase():
    """The tx count may go negative (the copy's bytes counted before the expect): real PTX semantics."""
    run = barriers._Run(1, 1, 0, "late")
    bar = Bar("ready", 0)
    run.loads.append(barriers._LoadRec(0, 0))
    run.slot_k[0] = 0
    run._land(run.loads[0])
    assert run.bars[bar].completed == 0 and run.bars[bar].tx == -STAGE_BYTES
    run.bars[bar].tx += STAGE_BYTES
    run._arrive(bar, run.roles["producer"])
    assert run.bars[bar].completed == 1


def test_wrong_byte_count_is_a_deadlock_naming_the_bytes():
    def producer_ops(ready, empty):
        yield ExpectTx(ready[0], STAGE_BYTES // 2)
        yield Load(0, slot=0, bar=ready[0])

    def consumer_ops(ready, empty):
        yield Wait(ready[0], 0)
        yield Mma(slot=0)
        yield MmaWait(pending=0)

    outcome = barriers.simulate(*roles_from_lists(producer_ops, consumer_ops), k_steps=1, num_buffers=1)
    assert not outcome.ok and outcome.rule == "deadlock", outcome.report()
    assert "16384 bytes landed that nothing expected" in outcome.report()


def test_deadlock_names_each_role_its_k_slot_and_phase():
    def producer_ops(ready, empty):
        yield Wait(empty[0], phase=0)  # not the opposite parity: blocks on the fresh barrier

    def consumer_ops(ready, empty):
        yield Wait(ready[0], phase=0)

    for schedule in barriers.SCHEDULES:
        outcome = barriers.simulate(*roles_from_lists(producer_ops, consumer_ops), 2, 1, schedule=schedule)
        text = outcome.report()
        assert outcome.summary.startswith("deadlock: both roles wait"), text
        assert "the producer, about to load k=0 (slot 0, round 0), waits: Wait(empty[0], phase=0)" in text
        assert "the consumer, about to multiply k=0 (slot 0, round 0), waits: Wait(ready[0], phase=0)" in text
        assert "empty[0] has completed 0 phases" in text and "passes only once it has completed an odd number" in text


def test_a_wait_that_passes_by_chance_guarantees_nothing():
    """The consumer spins on shared Python state until the producer has issued the load, then
    multiplies without waiting on ready[0]. In the eager order the bytes have landed by then, but
    nothing the hardware guarantees made them land first."""
    issued = []

    def producer(k_steps, num_buffers, ready, empty):
        for k in range(k_steps):
            yield Wait(empty[0], phase=(k % 2) ^ 1)
            yield ExpectTx(ready[0], STAGE_BYTES)
            yield Load(k, slot=0, bar=ready[0])
            issued.append(k)

    def consumer(k_steps, num_buffers, ready, empty):
        for k in range(k_steps):
            while k not in issued:
                yield MmaWait(pending=0)  # passes at once: a spin
            yield Mma(slot=0)
            yield MmaWait(pending=0)
            yield Arrive(empty[0])

    outcome = barriers.simulate(producer, consumer, k_steps=3, num_buffers=1, schedule="eager")
    assert outcome.rule == "unfilled read", outcome.report()
    assert "had landed, but nothing made the consumer wait for it" in outcome.report()


@pytest.mark.parametrize(
    ("op", "piece"),
    [
        (lambda ready, empty: Wait(ready[0], 2), "a phase is a parity bit, 0 or 1"),
        (lambda ready, empty: Mma(slot=0), "MMAs are the consumer's job"),
        (lambda ready, empty: Load(1, slot=1, bar=ready[1]), "its next load is k=0"),
        (lambda ready, empty: Load(0, slot=0, bar=empty[0]), "its bytes count on ready[0]"),
        (lambda ready, empty: Wait(Bar("ready", 7), 0), "not one of the ring's barriers"),
        (lambda ready, empty: Wait(ready[0], 0.0), "phase is a float, not an int"),
        (lambda ready, empty: "Wait(ready[0], 0)", "the producer yielded a str"),
        (lambda ready, empty: None, "the producer yielded None"),
    ],
)
def test_operations_out_of_protocol_are_named(op, piece):
    def producer(k_steps, num_buffers, ready, empty):
        yield op(ready, empty)

    def consumer(k_steps, num_buffers, ready, empty):
        yield Wait(ready[0], 0)

    outcome = barriers.simulate(producer, consumer, k_steps=2, num_buffers=2)
    assert outcome.rule == "protocol", outcome.report()
    assert piece in outcome.summary, outcome.summary


def test_a_role_that_never_ends_is_stopped():
    def producer(k_steps, num_buffers, ready, empty):
        while True:
            yield Arrive(ready[0])

    def consumer(k_steps, num_buffers, ready, empty):
        yield Wait(empty[0], phase=0)  # never completes: nobody arrives on empty[0]

    outcome = barriers.simulate(producer, consumer, k_steps=2, num_buffers=1)
    assert outcome.rule == "too many" and "a loop that never ends" in outcome.summary


def test_consumer_returning_with_an_mma_running_is_a_wrong_result():
    def consumer(k_steps, num_buffers, ready, empty):
        for k in range(k_steps):
            yield Wait(ready[0], k % 2)
            yield Mma(slot=0)
            if k < k_steps - 1:
                yield MmaWait(pending=0)
                yield Arrive(empty[0])

    producer = solution_roles()[0]
    outcome = barriers.simulate(producer, consumer, k_steps=3, num_buffers=1, schedule="eager")
    assert outcome.rule == "wrong result" and "end with MmaWait(pending=0)" in outcome.summary, outcome.report()


@pytest.mark.parametrize("schedule", barriers.SCHEDULES)
@pytest.mark.parametrize(("k_steps", "num_buffers"), [(1, 1), (5, 1), (7, 2), (8, 3), (3, 4), (16, 5)])
def test_solution_passes_every_order_and_the_replay_agrees(k_steps, num_buffers, schedule):
    producer, consumer = solution_roles()
    for seed in range(4):
        outcome = barriers.simulate(producer, consumer, k_steps, num_buffers, seed=seed, schedule=schedule)
        assert outcome.ok, outcome.report()
        trace = barriers.record(producer, consumer, k_steps, num_buffers, seed, schedule)
        again = barriers.replay(trace, k_steps, num_buffers, seed, schedule)
        assert again.ok and again.events == outcome.events, again.report()


def test_schedules_differ_and_late_lets_the_producer_run_ahead():
    producer, consumer = solution_roles()
    runs = {s: barriers.simulate(producer, consumer, 8, 3, seed=1, schedule=s) for s in barriers.SCHEDULES}
    assert len({json.dumps(r.events) for r in runs.values()}) == 3
    late = runs["late"].timeline
    first_land = next(i for i, line in enumerate(late) if "lands" in line)
    assert sum("Load(" in line for line in late[:first_land]) == 3  # every slot filled before any byte lands


# --------------------------------------------------------------------------------------------------
# through the grader


@pytest.mark.parametrize("seed", [0, SEED])
def test_solution_passes(seed):
    result = grader.grade_task(TASK, "solutions", seed=seed)
    assert result.status == PASS, full_text(result)
    assert result.cases_passed == result.cases_total == len(tasks.get(TASK).all_cases("cpu"))


def test_cases_cover_what_the_design_asks():
    cases = [tasks.get(TASK).call_case(c, 0)[1] for c in tasks.get(TASK).all_cases("cpu")]
    assert {c["num_buffers"] for c in cases} >= {1, 2, 3, 4}
    assert any(c["k_steps"] % c["num_buffers"] for c in cases)
    assert any(c["k_steps"] < c["num_buffers"] for c in cases)
    assert {c["schedule"] for c in cases} == set(barriers.SCHEDULES)
    assert sum(c["schedule"] == "late" for c in cases) >= 4


def test_untouched_stub_reports_todo():
    assert stubs.is_untouched(TASK, ROOT), f"exercises/{TASK}.py was edited: run sync-exercises --force"
    result = grader.grade_task(TASK, "exercises", seed=SEED)
    assert result.status == TODO, full_text(result)
    assert result.summary == f"not implemented yet: producer in exercises/{TASK}.py (still to write as well: consumer)"


def test_only_the_consumer_left_is_todo_naming_it(tmp_path):
    text = SOLUTION.read_text()
    head, tail = text.split("def consumer(", 1)
    head = head.replace(stubs.BEGIN, "").replace(stubs.END, "")
    (tmp_path / f"{TASK}.py").write_text(stubs.make_exercise(head + "def consumer(" + tail, TASK))
    result = grader.grade_task(TASK, tmp_path, seed=SEED)
    assert result.status == TODO and result.summary == f"not implemented yet: consumer in exercises/{TASK}.py"


# folder -> pieces the message must hold; cases whose k_steps <= num_buffers may pass (no round 1)
WRONG_SUBMISSIONS = {
    "ch09_missing_wait": ("read of a buffer not yet filled", "the consumer never waited on ready[0]",
                          "came before it knew the load of k=0 had landed"),
    "ch09_wrong_phase": ("read of a buffer not yet filled|deadlock", "round 1"),
    "ch09_early_arrive": ("early release: the consumer's Arrive(empty[0]) came before its Mma of k=0",),
    "ch09_release_before_mma_done": ("release before the MMA finished (the Hopper bug)",
                                     "Arrive(empty[0]) for k=0 came while the wgmma reading slot 0 could",
                                     "the last MmaWait(pending=1) left up to 1 MMA running"),
    "ch09_producer_no_empty_wait": ("overwrite of a buffer still in use", "the producer never waited on empty[0]",
                                    "Load of k=3 into slot 0 (round 1)"),
    # ws_matmul's protocol: right with 2 buffers or more; with 1, a deadlock that is no phase bug
    "ch09_in_flight_one_buffer": ("deadlock: keeping one MMA in flight needs at least 2 buffers, and this case has 1",
                                  "the consumer holds slot 0: it multiplied k=0 there and has not released it",
                                  "the phases are right", "gl.static_assert(NUM_BUFFERS >= 2)"),
}  # fmt: skip
ONE_BUFFER_ONLY = {"ch09_in_flight_one_buffer"}  # its cases with 2 buffers or more pass


@pytest.mark.parametrize("folder", sorted(WRONG_SUBMISSIONS))
def test_wrong_submission_is_rejected(folder):
    result = grader.grade_task(TASK, WRONG / folder, seed=SEED)
    text = full_text(result)
    assert result.status == FAIL, text
    assert "Traceback" not in text
    for piece in WRONG_SUBMISSIONS[folder]:
        assert any(p in text for p in piece.split("|")), (piece, text)
    assert "reproduce: python -m course_lib check ring_pipeline --source" in text
    cases = tasks.get(TASK).all_cases("cpu")
    if folder in ONE_BUFFER_ONLY:
        assert "check the phases" not in text, text
        one = [c for c in cases if c.options["num_buffers"] == 1]
        assert result.cases_total - result.cases_passed == len(one) >= 2, text
        return
    short = [c for c in cases if c.options["k_steps"] <= c.options["num_buffers"]]
    assert result.cases_total - len(short) <= result.cases_total - result.cases_passed


def test_every_ch09_wrong_submission_is_listed():
    assert {p.parent.name for p in WRONG.glob(f"ch09_*/{TASK}.py")} == set(WRONG_SUBMISSIONS)  # ws_matmul: its own test


# Other right protocols (tests/good): one MMA kept in flight (the previous slot released after
# MmaWait(pending=1), as solutions/ws_matmul.py does, falling back to pending=0 with one buffer), two
# kept in flight, and the pre-arrive trick instead of the opposite parity.
GOOD_SUBMISSIONS = ("ch09_keep_one_in_flight", "ch09_keep_two_in_flight", "ch09_pre_arrive")


@pytest.mark.parametrize("folder", GOOD_SUBMISSIONS)
def test_other_right_protocols_pass(folder):
    result = grader.grade_task(TASK, GOOD / folder, seed=SEED)
    assert result.status == PASS, full_text(result)


def test_a_consumer_that_never_releases_is_told_so_not_to_check_the_phases():
    def producer(k_steps, num_buffers, ready, empty):
        for k in range(k_steps):
            yield Wait(empty[k % 2], phase=((k // 2) % 2) ^ 1)
            yield ExpectTx(ready[k % 2], STAGE_BYTES)
            yield Load(k, slot=k % 2, bar=ready[k % 2])

    def consumer(k_steps, num_buffers, ready, empty):
        for k in range(k_steps):
            yield Wait(ready[k % 2], phase=(k // 2) % 2)
            yield Mma(slot=k % 2)
            yield MmaWait(pending=0)

    outcome = barriers.simulate(producer, consumer, k_steps=4, num_buffers=2, schedule="late")
    text = outcome.report()
    assert outcome.summary == "deadlock: the consumer holds slot 0 while it waits for the tile that must go into it"
    assert "the phases are right" in text and "check the phases" not in text, text


def test_a_phase_bug_deadlock_still_says_check_the_phases():
    def producer(k_steps, num_buffers, ready, empty):
        for k in range(k_steps):
            yield Wait(empty[0], phase=0)  # not the opposite parity: round 0 blocks on the fresh barrier
            yield ExpectTx(ready[0], STAGE_BYTES)
            yield Load(k, slot=0, bar=ready[0])

    consumer = solution_roles()[1]
    outcome = barriers.simulate(producer, consumer, k_steps=2, num_buffers=1, schedule="late")
    assert outcome.rule == "deadlock" and "check the phases" in outcome.report(), outcome.report()


# --------------------------------------------------------------------------------------------------
# forged traces: the replay in the grader's process trusts nothing the worker says


def _solution_trace(k_steps=4, num_buffers=2, seed=7, schedule="late") -> dict:
    producer, consumer = solution_roles()
    return json.loads(barriers.record(producer, consumer, k_steps, num_buffers, seed, schedule))


def _replay(trace: dict, k_steps=4, num_buffers=2, seed=7, schedule="late") -> barriers.Outcome:
    return barriers.replay(json.dumps(trace), k_steps, num_buffers, seed, schedule)


def test_forged_wait_that_could_not_pass_is_rejected():
    """The trace claims the consumer's first wait passed before the load of k=0 landed."""
    trace = _solution_trace()
    events = trace["events"]
    wait = next(
        i for i, e in enumerate(events) if e == ["y", "consumer", {"op": "Wait", "bar": ["ready", 0], "phase": 0}]
    )
    step = next(i for i, e in enumerate(events) if i > wait and e == ["s", "consumer"])
    forged = events[: wait + 1] + [events[step]] + [e for i, e in enumerate(events) if i > wait and i != step]
    outcome = _replay({**trace, "events": forged})
    assert not outcome.ok and outcome.rule == "inconsistent", outcome.report()
    assert "the trace has the consumer's Wait(ready[0], phase=0) pass there, but it could not" in outcome.summary
    assert "ready[0] has completed 0 phases" in outcome.summary


def test_a_wrong_submissions_trace_replays_to_its_own_verdict():
    """The trace of the Hopper-bug consumer carries no verdict: the replay finds the bug itself."""
    module = sources.load_file(
        WRONG / "ch09_release_before_mma_done" / f"{TASK}.py", "ring_trace", "ch09_bug_for_tests"
    )[0]
    outcome = _replay(json.loads(module.ring_trace(4, 2, 7, "late")))
    assert outcome.rule == "release before done", outcome.report()


@pytest.mark.parametrize(
    ("change", "piece"),
    [
        (lambda t: {**t, "schedule": "eager"}, "the grader asked for"),
        (lambda t: {**t, "seed": 8}, "the grader asked for"),
        (lambda t: {**t, "events": t["events"][:-5]}, "inconsistent trace: it ends at event"),
        (lambda t: {**t, "events": t["events"] + [["m"]]}, "the trace goes on"),
        (lambda t: {**t, "events": [["l", 0]] + t["events"]}, "where the producer's next operation"),
        (lambda t: {k: v for k, v in t.items() if k != "version"}, "not one barriers.record made"),
    ],
)
def test_tampered_traces_are_rejected(change, piece):
    outcome = _replay(change(_solution_trace()))
    assert not outcome.ok and outcome.rule == "inconsistent", outcome.report()
    assert piece in outcome.summary, outcome.summary


def test_trace_from_an_easier_schedule_is_rejected():
    """A trace recorded in the eager order, relabelled as the late one the grader asked for."""
    trace = _solution_trace(schedule="eager")
    outcome = _replay({**trace, "schedule": "late"})
    assert not outcome.ok and outcome.summary.startswith("inconsistent trace at event"), outcome.report()


@pytest.mark.parametrize(
    "value", ["not json", json.dumps({"ok": True}), json.dumps([1, 2]), "[" * 100_000, 42, None, ["a"]]
)
def test_junk_instead_of_a_trace_is_rejected(value):
    outcome = barriers.replay(value, 4, 2, 7, "late")
    assert not outcome.ok and outcome.rule == "inconsistent"


FORGING_RING_TRACE = '''

def ring_trace(k_steps, num_buffers, seed, schedule):
    """Forged: records the roles in the friendliest order, whatever the grader asked for."""
    return barriers.record(producer, consumer, k_steps=k_steps, num_buffers=num_buffers, seed=seed, schedule="eager")
'''


def test_a_worker_that_records_another_schedule_fails_through_the_grader(tmp_path):
    """The Hopper-bug consumer in the eager order: its MMAs finish at once, but the trace does not say
    what the grader asked for, and the replay's own verdict is the Hopper bug anyway."""
    text = (WRONG / "ch09_release_before_mma_done" / f"{TASK}.py").read_text()
    text = text.split("def ring_trace(", 1)[0].rstrip() + "\n" + FORGING_RING_TRACE
    (tmp_path / f"{TASK}.py").write_text(text)
    result = grader.grade_task(TASK, tmp_path, seed=SEED)
    assert result.status == FAIL, full_text(result)
    assert "inconsistent trace" in result.summary or "the Hopper bug" in result.summary, full_text(result)


def test_hints_come_in_order():
    hints = tasks.get(TASK).hints
    assert 3 <= len(hints) <= 4
    assert "k % num_buffers" in hints[0] and "parity" in hints[1] and "(r % 2) ^ 1" in hints[2]
    assert "MmaWait(pending=1)" in hints[-1]
