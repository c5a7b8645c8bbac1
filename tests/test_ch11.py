"""Chapter 11's tasks, flash_attention and paged_decode: each deliberately wrong submission in
tests/wrong/ch11_*/ is rejected with a message that names what is wrong, each correct alternative in
tests/good/ch11_*/ passes, and the causal walk's rule judges what it says.

    python -m course_lib check flash_attention --source tests/wrong/ch11_no_rescale
"""

from __future__ import annotations

import json
import re
import time

import pytest
import torch
from conftest import GOOD, ROOT, WRONG

from course_lib import grader, lesson, runtime, sources, tasks
from course_lib.grader import FAIL, PASS
from course_lib.grader.isolation import probe_seed
from course_lib.tasks import ch11_attention as ch11

SEED = 2024

# folder under tests/wrong -> (task, pieces the grader's message must hold, cases that must pass)
WRONG_SUBMISSIONS = {
    # one key tile is right without a rescale; several are not, and the diagnosis names the tile width
    "ch11_no_rescale": (
        "flash_attention",
        ("with key tiles of 64, the running sum and the output were not rescaled", "several tiles (1, 1, 257, 64)"),
        ("tiny (1, 1, 1, 64)", "tiny causal (1, 1, 3, 64)"),
    ),
    # the output rescaled, the sum not: the "missing rescale of the running sum"
    "ch11_sum_not_rescaled": (
        "flash_attention",
        (
            "with key tiles of 64, the output accumulator was rescaled when a tile raised the max, but the running "
            "sum was not",
        ),
        ("tiny (1, 1, 1, 64)", "tiny causal (1, 1, 3, 64)"),
    ),  # fmt: skip
    # the first query keeps no key at all (0/0 = NaN): NaN outputs are diagnosed too
    "ch11_causal_diagonal_dropped": (
        "flash_attention",
        ("each query left out its own key", "j <= i", "NaN computed by the kernel", "tail causal (2, 1, 77, 64)"),
        ("tail (1, 2, 100, 64)", "several tiles (1, 1, 257, 64)", "head dim 128 (1, 2, 130, 128)"),
    ),
    # right values, but every key tile above the diagonal is loaded: the structural rule, not the values
    "ch11_causal_no_skip": (
        "flash_attention",
        (
            "all 11 cases are right, but a causal walk loaded key tiles above the diagonal",
            "outputs of the first 256 queries came out NaN",
            "stop = min((pid_m + 1) * BLOCK_M",
        ),
        (),
    ),  # fmt: skip
    # one key tile past the diagonal: right values, a tile of work wasted a query tile
    "ch11_causal_one_tile_past": (
        "flash_attention",
        ("a causal walk loaded key tiles above the diagonal", "(the first: query 128)", "On a causal probe of shape ("),
        (),
    ),
    # the walk runs to the slice's end, past the sequence's last page: the table's entries there name no page
    "ch11_decode_past_last_page": (
        "paged_decode",
        ("out-of-bounds access", "Most likely here: the block table is max_pages wide", "cdiv(context_lens[b], PAGE)"),
        (),
    ),
    # the diagonal's key tiles walked unmasked: queries see the later keys of their own tile
    "ch11_causal_diagonal_unmasked": (
        "flash_attention",
        (
            "with query tiles of 128 and key tiles of 64 (or any that tile this case the same way), the key tiles that "
            "hold the diagonal were walked without the causal mask",
        ),
        ("tiny (1, 1, 1, 64)", "tail (1, 2, 100, 64)"),
    ),
    # tokens <= context: one token too many where the last page has room for it
    "ch11_decode_context_off_by_one": (
        "paged_decode",
        ("each sequence also counted the token at position context_lens[b], one past its last",),
        (),
    ),
    # a wgmma in flight beside the softmax that computes nothing the output uses
    "ch11_ws_busy_wgmma": (
        "ws_attention",
        ("the consumers issued wgmmas the attention does not need", "for an attention of 1,208.0 MFLOP"),
        (),
    ),
    # every tile walked, the ones above the diagonal with their loads masked off, over copies of k and v
    "ch11_decode_group_tile_16": (
        "paged_decode",
        ("case '24 query heads a KV head'", "NaN computed by the kernel"),
        ("(1, 37, 100)",),
    ),
    "ch11_decode_empty_slice_nan": (
        "paged_decode",
        ("case 'short sequences beside a long one'", "elements are NaN computed by the kernel"),
        ("(1, 37, 100)",),
    ),
    "ch11_out_strides_of_q": (
        "flash_attention",
        ("case 'heads interleaved'", "elements are wrong"),
        ("tail (1, 2, 100, 64)",),
    ),
    "ch11_causal_two_pass_past_diagonal": (
        "flash_attention",
        (
            "a causal walk computed key tiles above the diagonal",
            "whose query tile ends at query 63, multiplied 576 keys' worth, where the key tile holding that query "
            "ends at key 63",
        ),
        (),
    ),
    "ch11_causal_scratch_copy": (
        "flash_attention",
        (
            "a causal walk computed key tiles above the diagonal",
            "multiplied 512 keys' worth, where the key tile holding that query ends at key 127",
            "the tensor cores still multiply those tiles",
        ),
        (),
    ),  # fmt: skip
    # the output accumulator not rescaled within a slice: shows only where slices walk several steps
    "ch11_decode_acc_not_rescaled": (
        "paged_decode",
        (
            "case 'long contexts, several steps a slice' with steps of 64 tokens through each slice of 12 pages, the "
            "running sum was rescaled when a step raised the max, but the output accumulator was not",
        ),
        ("ragged (3, 4, 64)", "one token (1, 1, 64)", "long context (2, 2, 64)"),
    ),  # fmt: skip
    "ch11_merge_ignores_max": (
        "paged_decode",
        ("the merge added the slices' sums and outputs as they were", "weigh slice s by exp2(m_s - M)"),
        ("one token (1, 1, 64)",),  # one slice: nothing to merge
    ),
    "ch11_decode_no_context_mask": (
        "paged_decode",
        ("the keys past each sequence's context length, up to the end of its last page, were counted",),
        (),
    ),
    # ws_attention (Gluon, in the CPU simulator): a turn barrier waited on a stale phase deadlocks, and the
    # simulator names who waits on what
    "ch11_ws_stale_turn": (
        "ws_attention",
        ("the kernel deadlocks", "waits on turn["),
        ("tiny (1, 1, 1, 64)", "one key tile (1, 3, 64, 128)"),
    ),
    # the value slot freed after the wait for the scores alone, while p @ v still reads it: caught on every run,
    # whatever the order
    "ch11_ws_free_before_wait": (
        "ws_attention",
        # either message: the copy lands under the running wgmma, or after it with nothing ordering it so
        ("overwrites v_bufs[", "warpgroup_mma_wait"),
        ("tiny (1, 1, 1, 64)", "one key tile (1, 3, 64, 128)"),  # no slot is refilled there
    ),
    # a key slot freed once q k^T is issued, before its wait: the producer refills it under the running wgmma.
    # Only a walk of four key tiles or more refills a slot freed in the loop (a learner found no case did)
    "ch11_ws_keys_freed_early": (
        "ws_attention",
        ("case 'tail, several key tiles'", "overwrites k_bufs[", "Wait for the wgmma first"),
        ("tiny (1, 1, 1, 64)", "one key tile (1, 3, 64, 128)", "causal (1, 1, 300, 64)"),
    ),
    # the unmasked walk's end at seq_len: its last tile reads past the keys; the advice names the walk's bounds,
    # not a mask on the frame's unmasked load
    "ch11_full_past_whole_tiles": (
        "flash_attention",
        ("out-of-bounds access", "Most likely here: the walk's bounds", "`full` is at most (seq_len // BLOCK_N)"),
        ("tiny causal (1, 1, 3, 64)", "several tiles causal (1, 1, 300, 64)"),
    ),
    # values right in the simulator (which carries layouts without checking them); the compiler refuses it
    "ch11_ws_no_convert_layout": (
        "ws_attention",
        ("all 7 cases are right, but the kernel does not compile for sm_90 at head dim 64", "Layout mismatch"),
        (),
    ),
    "ch11_ws_no_acc_rescale": (
        "ws_attention",
        ("elements are off by more than the tolerance", "causal (1, 1, 300, 64)"),
        ("tiny (1, 1, 1, 64)", "one key tile (1, 3, 64, 128)"),
    ),
    # the overlap's two waits: acc read while its p @ v runs; p's registers not kept alive for p @ v
    "ch11_ws_rescale_before_wait": (
        "ws_attention",
        ("used the accumulator of the wgmma reading v_bufs[", "before waiting for it"),
        ("tiny (1, 1, 1, 64)", "one key tile (1, 3, 64, 128)"),
    ),
    "ch11_ws_p_not_kept": (
        "ws_attention",
        ("whose A operand comes from registers, without that tensor in the deps of the wait", "deps=(acc, p)"),
        ("one key tile (1, 3, 64, 128)",),  # one key tile: its p @ v is the last, waited with p kept
    ),
    # the count is the mistake, not the deps: the message says so rather than send the learner to deps=(acc, p)
    "ch11_ws_scores_wait_all": (
        "ws_attention",
        ("waits for every wgmma in flight", "was it meant to wait for the earlier wgmma alone? num_outstanding=1"),
        ("one key tile (1, 3, 64, 128)",),
    ),
    # Python's // and % where the GPU rounds toward zero: the simulator does as the GPU does
    "ch11_ws_snake_python_mod": (
        "ws_attention",
        ("case 'head dim 128, causal'", "were never written"),
        ("one key tile (1, 3, 64, 128)",),
    ),
    "ch11_ws_empty_phase_floor": ("ws_attention", ("the kernel deadlocks",), ()),
    # values right in the simulator, which has no shared memory limit: the compiled kernel's size is judged
    "ch11_ws_ring_too_deep": (
        "ws_attention",
        ("the kernel asks for more shared memory than a Hopper block can have", "262,584 bytes of shared memory"),
        (),
    ),
    # values right: the turn held through the softmax, or no turns at all (no ping-pong)
    "ch11_ws_turn_over_softmax": (
        "ws_attention",
        ("all 7 cases are right, but the softmax runs inside the warpgroup's turn", "of its exp/exp2 elements inside"),
        (),
    ),
    # the turn handed to the warpgroup itself: the next one's turn barrier never sees an arrival
    "ch11_ws_turn_to_self": (
        "ws_attention",
        ("the kernel deadlocks", "nothing has arrived on it in this run"),
        (),
    ),
    # the two-consumer habit, 1 - ROLE: right with two consumers (head dim 128, and causal), a deadlock with three
    "ch11_ws_turn_one_minus_role": (
        "ws_attention",
        ("the kernel deadlocks", "waits on turn[2]", "nothing has arrived on it in this run"),
        ("one key tile (1, 3, 64, 128)", "head dim 128, causal (2, 1, 130, 128)", "causal (1, 1, 300, 64)"),
    ),
    "ch11_ws_no_turns": (
        "ws_attention",
        ("all 7 cases are right, but the consumer warpgroups take no turns",),
        (),
    ),
    # values right: the softmax waits for both GEMMs, so it never runs beside this warpgroup's own GEMM
    "ch11_ws_no_overlap": (
        "ws_attention",
        (
            "all 7 cases are right, but the softmax does not overlap the warpgroup's own GEMMs",
            "0% of its exp/exp2 elements beside its own wgmma",
        ),
        (),
    ),
    # only grouped heads show it: with one query head a KV head, h % kv_heads == h // 1
    "ch11_decode_head_modulo": (
        "paged_decode",
        ("query head h read KV head h % 2", "share KV head j (h // 2)"),
        ("head dim 128 (2, 2, 128)", "long context (2, 2, 64)", "8 query heads a KV head (2, 8, 64)"),
    ),
}

RIGHT = {
    "ch11_attention_one_loop": "flash_attention",  # one masked loop, exp, 32 x 32 tiles, grid axes swapped
    "ch11_attention_tall_key_tiles": "flash_attention",  # key tiles of 128 past query tiles of 32
    "ch11_attention_prefetch_next": "flash_attention",  # the next tile loaded by hand: past the walk, a masked load
    "ch11_attention_stop_past_end": "flash_attention",  # the last tile walks past seq_len (masked), 1-D grid
    "ch11_attention_clamped_rows": "flash_attention",  # no load masks: rows clamped to the last; annotated constexpr
    "ch11_attention_two_pass": "flash_attention",  # a softmax in two passes: q k^T twice a key tile, no rescale
    # tensor descriptors made in the kernel (Triton's tutorial's style): no masks on loads or stores
    "ch11_attention_device_descriptors": "flash_attention",
    "ch11_decode_no_split": "paged_decode",  # no split, no merge, no tl.dot
    # slices cut from each sequence's own length, partials as log-sum-exp and a normalized output
    "ch11_decode_lse_slices_per_sequence": "paged_decode",
    "ch11_ws_hand_over_late": "ws_attention",  # the turn handed over after the wait: less overlap, right
    "ch11_ws_rescale_before_pv": "ws_attention",  # acc rescaled in the next turn, beside q k^T
    "ch11_ws_keys_freed_late": "ws_attention",  # the key slot freed with the value slot, after p @ v's wait
}


def full_text(result: grader.TaskResult) -> str:
    return "\n".join([result.summary, *result.details])


@pytest.mark.parametrize("folder", sorted(WRONG_SUBMISSIONS))
def test_wrong_submission_is_rejected(folder):
    task, pieces, passing = WRONG_SUBMISSIONS[folder]
    result = grader.grade_task(task, WRONG / folder, seed=SEED)
    text = full_text(result)
    assert result.status == FAIL, text
    for piece in pieces:
        assert piece in text, f"expected {piece!r} in the grader's message:\n{text}"
    failed = next((line for line in result.details if re.match(r"failed \d+ of \d+ cases", line)), "")
    for shape in passing:  # the bug must not show where it cannot
        assert shape not in failed, f"{shape} should pass for {folder}:\n{failed}"


# graded at seeds of their own (the probe's head dim is drawn from the seed): the seed is the folder's SEED file,
# which the GPU session's wrong step reads too (scripts/gpu_session.sh)
WRONG_AT_SEED = {p.parent.name: int(p.read_text()) for p in WRONG.glob("ch11_*/SEED")}


def test_every_ch11_wrong_submission_is_listed():
    assert {p.parent.name for p in WRONG.glob("ch11_*/*.py")} == set(WRONG_SUBMISSIONS) | set(WRONG_AT_SEED)
    assert {p.parent.name for p in GOOD.glob("ch11_*/*.py")} == set(RIGHT)


@pytest.mark.parametrize("folder", sorted(RIGHT))
def test_right_submission_passes(folder):
    result = grader.grade_task(RIGHT[folder], GOOD / folder, seed=SEED)
    assert result.status == PASS, full_text(result)
    assert result.cases_passed == result.cases_total > 0


def test_the_causal_walk_judge():
    """The rule's own logic: NaN among the early queries fails in both modes; a wrong probe run is left to
    the cases; on a GPU finite early rows pass; in CPU mode a load wholly above the diagonal fails too."""
    nan = {"mode": runtime.GPU, "right": True, "nan_rows": 64, "first_nan_row": 192}
    passed, summary, details = ch11.judge_causal_walk(nan)[0]
    assert not passed and "above the diagonal" in summary and "64 outputs of the first 256" in details[0]
    assert not ch11.judge_causal_walk({**nan, "mode": runtime.CPU})[0][0]
    assert ch11.judge_causal_walk({"mode": runtime.GPU, "right": False, "nan_rows": 0})[0][0]
    assert ch11.judge_causal_walk({"mode": runtime.GPU, "right": True, "nan_rows": 0})[0][0]
    ok = {"mode": runtime.CPU, "right": True, "nan_rows": 0, "loads": 40, "above": 0, "examples": []}
    assert ch11.judge_causal_walk(ok)[0][0]
    above = {**ok, "above": 1, "examples": [[(3, 0, 0), 256, 319, 255]]}
    passed, summary, details = ch11.judge_causal_walk(above)[0]
    assert not passed and "whose query tile ends at query 255, loaded keys 256 to 319" in details[0]
    computed = {**ok, "walks": 8, "wasted": 2, "computed": [[(1, 0, 0), 63, 320, 64]]}
    passed, summary, details = ch11.judge_causal_walk(computed)[0]
    assert not passed and summary == "a causal walk computed key tiles above the diagonal"
    assert "the dot products of 2 of 8 query tiles" in details[0] and "multiplied 320 keys' worth" in details[0]
    passed, summary, _ = ch11.judge_causal_walk({**ok, "walks": 8})[0]
    assert passed and summary.endswith("the dot products of 8 query tiles reached no key tile past the diagonal)")


def test_a_causal_walk_is_judged_per_tile_whatever_the_tiles(tmp_path):
    """The probe judges each load against its own program's query tile: a walk one key tile past the
    diagonal fails (it loaded about 72% of what a walk over every tile loads, under the old rule's bar),
    and so does one whose loop runs over every tile with the loads masked off above the diagonal; query
    tiles of 256 rows pass (the old rule failed them: each program loads 75% of the keys), and key tiles
    taller than the query tiles (tests/good)."""
    solution = (ROOT / "solutions" / "flash_attention.py").read_text()
    masked_off = lesson.write_variant("flash_attention", {
        "    stop = tl.minimum((pid_m + 1) * BLOCK_M, seq_len) if CAUSAL else seq_len\n": "    stop = seq_len\n",
        "        offs_n = start_n + tl.arange(0, BLOCK_N)\n":
            "        offs_n = start_n + tl.arange(0, BLOCK_N)\n        reach = offs_n < seq_len\n"
            "        if CAUSAL:\n            reach = reach & (offs_n <= tl.max(offs_m))\n",
        "mask=offs_n[None, :] < seq_len, other=0.0)": "mask=reach[None, :], other=0.0)",
        "mask=offs_n[:, None] < seq_len, other=0.0)": "mask=reach[:, None], other=0.0)",
    }, folder=tmp_path / "masked_off")  # fmt: skip
    result = grader.grade_task("flash_attention", masked_off.folder, seed=SEED)
    assert result.status == FAIL and "a causal walk computed key tiles above the diagonal" in result.summary, full_text(
        result
    )
    wide = lesson.write_variant(  # two query tiles on the probe, each a program; the old rule failed it
        "flash_attention", {"block_m, block_n = 128, 64": "block_m, block_n = 256, 64"}, folder=tmp_path / "wide"
    )
    result = grader.grade_task("flash_attention", wide.folder, seed=SEED)
    assert result.status == PASS, full_text(result)
    assert "block_m, block_n = 128, 64" in solution


def test_the_causal_probe_shape_comes_from_the_seed(tmp_path):
    """The probe's shape is drawn from the grading seed: a launcher that skips the tiles above the diagonal
    only at one fixed shape (the probe's, once) walks every tile at the shape drawn, and fails."""
    shapes = {ch11.probe_shape(seed) for seed in range(40)}
    assert len({shape for shape, _ in shapes}) >= 8 and {dtype for _, dtype in shapes} == {
        torch.float16,
        torch.bfloat16,
    }
    fixed = (1, 1, 512, 64)
    assert ch11.probe_shape(probe_seed(SEED))[0] != fixed  # the shape the grader's probe draws at SEED
    detector = lesson.write_variant("flash_attention", {
        "    NUM_STAGES: tl.constexpr,\n): ": "    NUM_STAGES: tl.constexpr, SKIP: tl.constexpr,\n): ",
        "if CAUSAL else seq_len\n": "if CAUSAL and SKIP else seq_len\n",
        "NUM_STAGES=3, num_warps": f"NUM_STAGES=3, SKIP=tuple(q.shape) == {fixed}, num_warps",
    }, folder=tmp_path / "detector")  # fmt: skip
    result = grader.grade_task("flash_attention", detector.folder, seed=SEED)
    assert result.status == FAIL and "above the diagonal" in result.summary, full_text(result)


def test_the_causal_walk_counts_reads_whatever_writes_the_output(tmp_path):
    """Attention into a float32 scratch buffer, then a second kernel that casts it into out, 16 rows a
    program: right, and judged on its reads of k and v alone, so the skipping kernel passes and the one
    that walks every tile fails."""
    for source, expected in ((ROOT / "solutions" / "flash_attention.py", PASS),
                             (WRONG / "ch11_causal_no_skip" / "flash_attention.py", FAIL)):  # fmt: skip
        folder = tmp_path / expected
        folder.mkdir()
        text = source.read_text()
        text = text.replace(
            "def flash_attention(q, k, v, out, causal, sm_scale):",
            CAST_KERNEL + "\n\ndef flash_attention(q, k, v, out, causal, sm_scale):",
        )
        text = text.replace(
            "        q, k, v, out, *q.stride(), *k.stride(), *v.stride(), *out.stride(),",
            "        q, k, v, scratch, *q.stride(), *k.stride(), *v.stride(), *scratch.stride(),",
        )
        text = text.replace(
            "    grid = (triton.cdiv(seq_len, block_m), batch * heads)",
            "    grid = (triton.cdiv(seq_len, block_m), batch * heads)\n"
            "    scratch = torch.empty_like(out, dtype=torch.float32)  # out's strides: one flat cast",
        )
        text = text.replace(
            "    return out\n",
            "    n = out.numel()\n"
            "    cast_kernel[(triton.cdiv(n, 1024),)](scratch, out, n, BLOCK=1024)\n"
            "    return out\n",
        )
        text = text.replace("import triton\n", "import torch\nimport triton\n", 1)
        (folder / "flash_attention.py").write_text(text)
        result = grader.grade_task("flash_attention", folder, seed=SEED)
        assert result.status == expected, full_text(result)


CAST_KERNEL = """@triton.jit
def cast_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n).to(dst_ptr.dtype.element_ty), mask=offs < n)"""


def test_the_diagnoses_name_only_their_mistake():
    """Each diagnosis, on float64 inputs as the grader gives them: the mistake it models is named, a
    different error is not."""
    spec = tasks.get("flash_attention")
    case = next(c for c in spec.all_cases(runtime.MODE) if c.label == "several tiles causal")
    made = spec.make_inputs(case, torch.Generator().manual_seed(1))
    inputs = {k: (v.double() if torch.is_tensor(v) else v) for k, v in made.items()}
    args = [inputs[n] for n in ("q", "k", "v", "causal", "sm_scale")]
    right = ch11.attention_reference(*args)
    assert spec.diagnose(inputs, right * 1.05, case) is None
    assert "not multiplied by sm_scale" in spec.diagnose(inputs, ch11.attention_reference(*args[:4], 1.0), case)
    assert "also attended to the key after it" in spec.diagnose(inputs, ch11.attention_reference(*args, shift=1), case)
    assert "key tiles of 32" in spec.diagnose(inputs, ch11._no_rescale(*args, 32), case)
    assert "but the output accumulator was not" in spec.diagnose(
        inputs, ch11._no_rescale(*args, 64, sum_rescaled=True), case
    )
    assert "but the running sum was not" in spec.diagnose(inputs, ch11._no_rescale(*args, 64, acc_rescaled=True), case)
    both = ch11._no_rescale(*args, 64, sum_rescaled=True, acc_rescaled=True)  # the online softmax itself
    assert torch.allclose(both, right) and spec.diagnose(inputs, both, case) is None
    # keys past seq_len counted as zeros: only a non-causal case can show it
    tail = next(c for c in spec.all_cases(runtime.MODE) if c.label == "tail")
    made = spec.make_inputs(tail, torch.Generator().manual_seed(2))
    inputs = {k: (v.double() if torch.is_tensor(v) else v) for k, v in made.items()}
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    zeros = k.new_zeros(*k.shape[:-2], 28, k.shape[-1])  # 100 keys padded to 128
    padded = ch11.attention_reference(
        q, torch.cat([k, zeros], -2), torch.cat([v, zeros], -2), False, inputs["sm_scale"]
    )
    assert "28 keys past seq_len (up to 128, the end of the last key tile)" in spec.diagnose(inputs, padded, tail)


def test_reference_by_query_blocks_is_the_whole_reference(monkeypatch):
    """The reference holds at most REFERENCE_SCORES scores at once (the timed case's whole matrix is 64 GiB
    in float64): computed a block of queries at a time, causal masks and shifted diagonals included, it
    is the one-matrix reference."""
    gen = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 3, 37, 16, generator=gen, dtype=torch.float64) for _ in range(3))
    whole = {(c, s): ch11.attention_reference(q, k, v, c, 0.25, shift=s) for c in (False, True) for s in (-1, 0, 1)}
    monkeypatch.setattr(ch11, "REFERENCE_SCORES", 2 * 3 * 37 * 5)  # blocks of 5 queries, the last of 2
    for (causal, shift), expected in whole.items():
        got = ch11.attention_reference(q, k, v, causal, 0.25, shift=shift)
        assert torch.equal(got.isnan(), expected.isnan())
        assert torch.allclose(got.nan_to_num(), expected.nan_to_num(), rtol=0, atol=1e-12), (causal, shift)


def test_a_timed_shape_is_not_diagnosed():
    """A diagnosis at the timed shape would be some twenty float64 attentions on the CPU: the failure is
    reported undiagnosed, at once. The largest graded case is still diagnosed."""
    spec = tasks.get("flash_attention")
    bench = spec.timed_case()
    big = torch.zeros(1, 1, 1, 1, dtype=torch.float64).expand(*bench.shape)  # no memory behind it
    inputs = {"q": big, "k": big, "v": big, "causal": False, "sm_scale": 0.1}
    began = time.perf_counter()
    assert spec.diagnose(inputs, big, bench) is None
    assert time.perf_counter() - began < 1.0
    graded = [c.shape for c in spec.cases(runtime.GPU)] + [shape for shape, *_ in ch11.WS_ATTENTION_GPU]
    assert len(graded) > 10 and max(b * h * s * s for b, h, s, _ in graded) <= ch11.DIAGNOSE_SCORES


def test_hidden_cases_of_chapter_11_need_only_a_shape(tmp_path):
    """An instructor's hidden case names a shape and a dtype: the causal flag, the KV heads, the page size
    and the context lengths default (the lengths drawn from the seed)."""
    hidden = tmp_path / "hidden.json"
    hidden.write_text(json.dumps({"flash_attention": [{"shape": [1, 2, 90, 64], "dtype": "float16"}],
                                  "paged_decode": [{"shape": [3, 2, 64], "dtype": "bfloat16"}]}))  # fmt: skip
    for task in ("flash_attention", "paged_decode"):
        result = grader.grade_task(task, "solutions", seed=SEED, hidden=str(hidden))
        assert result.status == PASS, full_text(result)
        assert result.cases_total == len(tasks.get(task).all_cases(runtime.MODE)) + 1


def test_the_notebooks_numbers_come_from_the_model_it_states():
    """Notebook 11's section 1 and 6 figures, from course_lib.lessons.ch11: the 8B layer's weights, the
    regimes (prefill compute-bound, decode memory-bound), attention's share growing with the prompt and
    with batch x context, Amdahl, the causal tiles, and the JIT's three keys against one."""
    from course_lib import roofline
    from course_lib.lessons import ch11 as lesson11

    peaks = roofline.datasheet_peaks("H200")
    layer = lesson11.Layer()
    assert layer.weights() == 4096 * (4096 + 2 * 1024) + 4096 * 4096 + 4096 * 2 * 14336 + 14336 * 4096
    prefill = lesson11.prefill_parts(layer, 8192, peaks)
    assert all(p.floor.bound == "compute" for p in prefill)
    shares = [lesson11.share(lesson11.prefill_parts(layer, s, peaks)) for s in (2048, 8192, 32768)]
    assert shares == sorted(shares) and 0.10 < shares[1] < 0.16
    decode = lesson11.decode_parts(layer, 64, 4096, peaks)
    assert all(p.floor.bound == "memory" for p in decode) and 0.65 < lesson11.share(decode) < 0.75
    assert lesson11.amdahl(0.5, 2.0) == pytest.approx(4 / 3) and lesson11.amdahl(0.0, 10.0) == 1.0
    assert lesson11.causal_tiles(256, 128, 64) == (
        2 + 4,
        8,
    )  # tiles (0, 1) for the first query tile, 0-3 for the second
    assert [
        len(k) for k in (lesson11.compile_keys(range(1, 65)), lesson11.compile_keys(range(1, 65), specialize=False))
    ] == [3, 1]


def test_the_decode_compile_widths_come_from_the_launcher():
    """Section 6's widths at which a growing block table compiles paged_decode again: computed from the
    solution's launcher (its launches recorded and specialized, nothing run), and following it when it changes.
    The record of ninth_run (16 sequences, 8 KV heads, the table a view of the widest) counted 7 compiles on 5
    steps: the same as the keys here."""
    from course_lib.lessons import ch11 as lesson11

    grown = lesson11.decode_compile_keys(256)
    assert len(grown) == 7 and lesson11.decode_compile_widths(grown) == [1, 2, 3, 5, 61]
    assert sorted(name for name, _ in grown).count("decode_merge_kernel") == 2  # NUM_SPLITS 2 and 4
    anew = lesson11.decode_compile_keys(256, reallocated=True)  # the row stride is the width: 16 and 64 too
    assert len(anew) == 9 and lesson11.decode_compile_widths(anew) == [1, 2, 3, 5, 16, 61, 64]
    # a launcher with slices of at most 256 tokens: 8 slices from 65 pages on, a new key for both kernels there
    module = sources.load_module("paged_decode")
    module.SLICE_TOKENS = 256
    shorter = lesson11.decode_compile_keys(128, launcher=module.paged_decode)
    assert 65 in lesson11.decode_compile_widths(shorter) and len(shorter) > len(lesson11.decode_compile_keys(128))


def test_the_layer_profile_script_runs(tmp_path):
    """scripts/attention_layer_profile.py, the GPU record of section 1, on tiny shapes on the CPU."""
    import subprocess
    import sys

    from conftest import ROOT

    out = tmp_path / "layer.json"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "attention_layer_profile.py"), "--dry-run",
                           "--out", str(out)], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert {r["phase"] for r in rows} == {"prefill", "decode"} and {"attention", "the layer"} <= {
        r["part"] for r in rows
    }


def test_a_slot_freed_before_its_wait_fails_under_every_order(tmp_path):
    """The simulator's happens-before rule for wgmma reads: the mistake fails whatever order the seed picks
    (before the rule it passed on most orders: the copy had to be issued inside the window)."""
    from course_lib import gluon_cpu
    from course_lib.gluon_cpu.language import ProtocolError

    module = sources.load_module("ws_attention", WRONG / "ch11_ws_free_before_wait")
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, 300, 64, generator=gen).to(torch.float16) for _ in range(3))
    for seed in range(6):
        with pytest.raises(
            ProtocolError, match="nothing ordering the write after the warpgroup_mma_wait|still reads it"
        ):
            with gluon_cpu.launches_simulated(seed=seed, event_weight=(0.2, 1.0, 5.0)[seed % 3]):
                module.ws_attention(q, k, v, torch.empty_like(q), True, 0.125, sms=1 + seed % 2)


def test_the_ws_attention_judge_wants_two_consumer_warpgroups():
    facts = {"launches": 1, "kernel": "k", "gluon": True, "warp_specialize": 1, "worker_warps": [1],
             "worker_regs": [40], "setmaxnreg": ["inc 240"], "wgmma": 4, "tma_loads": 3, "expect_tx": 1,
             "mbarrier_waits": 4, "num_warps": 5, "shared": 1 << 17, "probe": "p",
             "overlap": {"partitions": {"_consumer (default partition)": [48, 64]}}}  # fmt: skip
    verdicts = ch11.judge_ws_attention(facts)
    assert any(not ok and "no second consumer warpgroup" in summary for ok, summary, _ in verdicts)
    assert all(ok for ok, _, _ in ch11.judge_ws_attention({**facts, "worker_warps": [4, 1], "num_warps": 9}))


def test_the_overlap_judge_wants_each_consumers_softmax_beside_its_own_gemm():
    """The bar is per consumer: one warpgroup overlapping does not carry the other; a kernel the simulator
    cannot run is not judged on it; a simulator failure is named."""

    def judge(partitions, held=None, barriers=("turn[0]", "turn[1]")):
        turns = {"barriers": list(barriers), "held": held or {n: [0, c[1]] for n, c in partitions.items()}}
        return ch11._judge_overlap({"partitions": partitions, "turns": turns})

    def passed(verdicts):
        return all(ok for ok, _, _ in verdicts)

    assert passed(judge({"a": [48, 64], "b": [48, 64], "producer": [0, 0]}))
    assert not passed(judge({"a": [48, 64], "b": [0, 64]}))
    assert not passed(judge({}))
    # the turns: none at all, or a softmax inside its turn, fail; half of it inside passes
    assert not passed(judge({"a": [48, 64], "b": [48, 64]}, barriers=()))
    assert not passed(judge({"a": [48, 64], "b": [48, 64]}, held={"a": [0, 64], "b": [48, 64]}))
    assert passed(judge({"a": [48, 64], "b": [48, 64]}, held={"a": [32, 64], "b": [32, 64]}))
    assert passed(ch11._judge_overlap({"not_simulated": "inline PTX"}))
    ok, summary, _ = ch11._judge_overlap({"error": "Deadlock: ..."})[0]
    assert not ok and "simulator" in summary


def test_the_turn_facts_follow_each_consumers_own_order():
    """A turn barrier is one consumer's wait and the other's arrival; an exponential counts as inside the turn
    between a consumer's wait on one and its next arrival on one. Barriers among a consumer and the producer
    are no turns."""
    timeline = {
        "c0": [("w", "ready[0]"), ("w", "turn[0]"), ("a", "turn[1]"), ("x", 8), ("w", "turn[0]"), ("x", 8),
               ("a", "turn[1]"), ("a", "empty[0]")],
        "c1": [("w", "ready[0]"), ("w", "turn[1]"), ("a", "turn[0]"), ("x", 8), ("x", 8)],
        "producer": [("w", "empty[0]"), ("a", "ready[0]")],
    }  # fmt: skip
    facts = ch11._turn_facts([timeline], ["c0", "c1"])
    assert facts == {"barriers": ["turn[0]", "turn[1]"], "held": {"c0": [8, 16], "c1": [0, 16]}}
    # one barrier both consumers wait on and arrive on, in alternating phases, is a turn too
    shared = {"c0": [("w", "t"), ("a", "t"), ("x", 8)], "c1": [("w", "t"), ("x", 8), ("a", "t")]}
    assert ch11._turn_facts([shared], ["c0", "c1"]) == {"barriers": ["t"], "held": {"c0": [0, 8], "c1": [8, 8]}}


def test_a_wgmma_accumulator_is_read_only_through_its_wait(tmp_path):
    """Reading an async wgmma's accumulator fails whatever the order of events: before the wait that sees it
    complete (its registers are not ready), and after, through the name the wgmma returned instead of the
    wait's result (nothing orders that read after the wait)."""
    from course_lib import gluon_cpu, lesson
    from course_lib.gluon_cpu.language import ProtocolError

    # acc's wait not assigned: acc read afterwards through the name the wgmma returned
    stale = lesson.write_variant("ws_attention", {
        "            acc, p = warpgroup_mma_wait(num_outstanding=0, deps=(acc, p))\n":
        "            warpgroup_mma_wait(num_outstanding=0, deps=(acc, p))\n",
    }, folder=tmp_path / "stale")  # fmt: skip
    # acc passed through the scores' wait (num_outstanding=1) and read after it: still pending, on every order
    early = lesson.write_variant("ws_attention", {
        "scores = warpgroup_mma_wait(num_outstanding=1, deps=(scores,))":
        "scores, acc = warpgroup_mma_wait(num_outstanding=1, deps=(scores, acc))",
    }, source=WRONG / "ch11_ws_rescale_before_wait", folder=tmp_path / "partial")  # fmt: skip
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, 300, 64, generator=gen).to(torch.float16) for _ in range(3))
    for folder, expected in ((WRONG / "ch11_ws_rescale_before_wait", "before waiting for it"),
                             (stale.folder, "through the name the wgmma returned"),
                             (early.folder, "before waiting for it")):  # fmt: skip
        module = sources.load_module("ws_attention", folder)
        for seed in range(6):
            with pytest.raises(ProtocolError, match=expected):
                with gluon_cpu.launches_simulated(seed=seed, event_weight=(0.2, 1.0, 5.0)[seed % 3]):
                    module.ws_attention(q, k, v, torch.empty_like(q), True, 0.125, sms=1 + seed % 2)


def test_the_contiguous_sdpa_bar_computes_the_same_decode():
    """paged_decode's bench bar for uniform lengths, on a small case on the CPU: SDPA over the gathered
    keys gives the reference's values; ragged lengths get no such bar."""
    spec = tasks.get("paged_decode")
    case = tasks.Case(
        (3, 4, 64), torch.float32, "uniform", params=(("kv_heads", 2), ("page", 16), ("contexts", (40,) * 3))
    )
    made = spec.make_inputs(case, torch.Generator().manual_seed(0))
    ref_inputs = {k: v for k, v in made.items() if k != "out"}
    [bar] = spec.bench_variants(case).values()
    expected = ch11.decode_reference(**ref_inputs)
    assert torch.allclose(bar(**ref_inputs), expected, atol=1e-5) and torch.allclose(
        bar(**ref_inputs), expected, atol=1e-5
    )
    assert spec.bench_variants(spec.bench_cases[0]) == {}


def test_the_jit_script_runs(tmp_path):
    """scripts/attention_jit.py, section 6's GPU record, on tiny shapes on the CPU (no compile happens in the
    interpreter: the loops and the record only)."""
    import subprocess
    import sys

    out = tmp_path / "jit.json"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "attention_jit.py"), "--dry-run", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert [r["way"] for r in json.loads(out.read_text())["rows"]] == ["paged_decode, table grows",
                                                                       "paged_decode, table fixed"]  # fmt: skip


def test_the_decode_baseline_computes_the_reference():
    """paged_decode's eager baseline (one batched gather, one masked SDPA call) gives the reference's values
    on every CPU case, ragged lengths and grouped heads included."""
    spec = tasks.get("paged_decode")
    for case in spec.all_cases(runtime.MODE):
        made = spec.make_inputs(case, torch.Generator().manual_seed(3))
        inputs = {k: (v.double() if torch.is_tensor(v) and v.is_floating_point() else v) for k, v in made.items()
                  if k != "out"}  # fmt: skip
        assert torch.allclose(spec.baseline(**inputs), spec.reference(**inputs), atol=1e-12), case.label


def test_the_gluon_submissions_are_the_solution_but_for_their_mistake(tmp_path):
    """tests/{wrong,good}/ch11_ws_* are whole files (each graded as it is); the script that writes them from the
    solution says whether each is still the solution but for its own mistake, and notices one that is not."""
    import shutil
    import subprocess
    import sys

    script = ROOT / "scripts" / "ws_attention_submissions.py"
    done = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    copy = tmp_path / "course"  # the check must bite: a copy of the project with one submission edited
    for part in ("scripts", "solutions", "tests/wrong", "tests/good"):
        shutil.copytree(ROOT / part, copy / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")  # ruff's settings
    edited = copy / "tests" / "wrong" / "ch11_ws_no_overlap" / "ws_attention.py"
    edited.write_text(edited.read_text().replace("num_outstanding=0", "num_outstanding=1", 1))
    done = subprocess.run([sys.executable, str(copy / "scripts" / script.name), "--check"], capture_output=True,
                          text=True, cwd=copy)  # fmt: skip
    assert done.returncode == 1 and "ch11_ws_no_overlap" in done.stdout, done.stdout + done.stderr


def test_the_triton_submissions_are_their_base_but_for_their_mistake(tmp_path):
    """tests/{wrong,good}/ch11_* made from solutions/flash_attention.py and paged_decode.py (or from the right
    alternative they break) by scripts/attention_submissions.py are still what it writes; the check notices a
    submission edited by hand, and the ones a changed solution leaves behind."""
    import shutil
    import subprocess
    import sys

    script = ROOT / "scripts" / "attention_submissions.py"
    done = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    copy = tmp_path / "course"
    for part in ("scripts", "solutions", "tests/wrong", "tests/good"):
        shutil.copytree(ROOT / part, copy / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")  # ruff's settings
    edited = copy / "tests" / "wrong" / "ch11_no_rescale" / "flash_attention.py"
    edited.write_text(edited.read_text().replace("acc = tl.dot(p.to(v.dtype), v, acc)", "acc = acc", 1))
    solution = copy / "solutions" / "paged_decode.py"
    solution.write_text(solution.read_text().replace("num_warps=4, num_stages=2", "num_warps=4, num_stages=3", 1))
    done = subprocess.run([sys.executable, str(copy / "scripts" / script.name), "--check"], capture_output=True,
                          text=True, cwd=copy)  # fmt: skip
    stale = set(re.findall(r"tests/(?:wrong|good)/(ch11_\w+)/", done.stdout))
    paged = {"ch11_merge_ignores_max", "ch11_decode_group_tile_16", "ch11_decode_head_modulo"}
    assert done.returncode == 1 and "ch11_no_rescale" in stale and paged <= stale, done.stdout + done.stderr
    assert not stale & {"ch11_out_strides_of_q", "ch11_decode_empty_slice_nan"}, done.stdout  # the rest stand


def test_the_lessons_decode_split_is_the_solutions():
    """lessons.ch11.decode_programs restates the solution launcher's split (a lesson cannot import a solution:
    releases withhold them); the launches the solution makes must keep agreeing with it."""
    from course_lib import compilation
    from course_lib.lessons import ch11 as lessons

    solution = sources.load_module("paged_decode", "solutions")
    for batch, kv_heads, max_pages in [
        (1, 1, 1),
        (3, 2, 40),
        (16, 8, 256),
        (64, 8, 256),
        (65, 2, 256),
        (200, 8, 3),
        (64, 8, 384),
        (64, 32, 32),
    ]:
        q = torch.zeros(batch, 2 * kv_heads, 64, dtype=torch.float16)
        cache = torch.zeros(8, 16, kv_heads, 64, dtype=torch.float16)
        table = torch.zeros(batch, max_pages, dtype=torch.int32)
        lengths = torch.ones(batch, dtype=torch.int32)
        args = (q, cache, cache.clone(), table, lengths, 0.1, torch.empty_like(q))
        launches = compilation.recorded_launches(solution.paged_decode, *args)
        grid = launches[0][2]["grid"]
        assert (batch * kv_heads, grid[0] * grid[1] * grid[2]) == lessons.decode_programs(batch, kv_heads, max_pages)


def test_the_nanobind_report_at_exit_is_not_the_learners_output():
    """Triton 3.9's bindings list their leaks when a Python that compiled a Gluon kernel exits; the worker's
    output shown as "your code printed" drops those lines and keeps the learner's own."""
    from course_lib.grader.isolation import _without_teardown_noise

    printed = (
        'step 1\nnanobind: leaked 4 instances!\n - leaked instance 0x7f of type "triton._C.libtriton.ir.attribute"\n'
        'nanobind: leaked 326 functions!\n - leaked function "create_scaled_downcast_fp8"\n - ... skipped remainder\n'
        "nanobind: this is likely caused by a reference counting issue in the binding code.\n"
        "See https://nanobind.readthedocs.io/en/latest/refleaks.html\nstep 2 - leaked nothing\n"
    )
    assert _without_teardown_noise(printed) == "step 1\nstep 2 - leaked nothing\n"
    assert _without_teardown_noise("no noise here\n") == "no noise here\n"
    lone = ' - leaked function "mine", a line the learner printed\n'  # no report above it: the learner's own
    assert _without_teardown_noise(lone) == lone


def test_a_register_operand_renamed_before_its_wait_is_named(tmp_path):
    """p given the next tile's probabilities before the wait for p @ v: the deps hold "p", but not the tensor
    the wgmma reads, and the message says so (a learner found the plain message pointing at deps=(acc, p))."""
    from course_lib import gluon_cpu, lesson
    from course_lib.gluon_cpu.language import ProtocolError

    renamed = lesson.write_variant("ws_attention", {
        "            p_next, m_i, l_i, alpha = _softmax_step(": "            p, m_i, l_i, alpha = _softmax_step(",
        "            p = p_next\n": "",
    }, folder=tmp_path)  # fmt: skip
    module = sources.load_module("ws_attention", renamed.folder)
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, 300, 64, generator=gen).to(torch.float16) for _ in range(3))
    with pytest.raises(ProtocolError, match="that name was given a new value"):
        with gluon_cpu.launches_simulated(seed=0):
            module.ws_attention(q, k, v, torch.empty_like(q), True, 0.125, sms=1)


@pytest.mark.parametrize("seed", [2021, 2022, 2025, 2019])  # lengths 576, 448, 320, 320 (head dim 128): no 128s
@pytest.mark.parametrize(
    "folder", ["ch11_attention_prefetch_next", "ch11_attention_stop_past_end", "ch11_attention_clamped_rows"]
)
def test_what_reads_or_computes_nothing_above_the_diagonal_passes(folder, seed):
    """A load whose mask keeps no lane reads nothing (a prefetch past the walk's last tile), and tiles past
    seq_len in the last query tile's walk lie past its nominal rows, not above the diagonal: both right
    kernels pass the causal probe at probe lengths that are no multiple of their query tile (an earlier rule
    counted every load that kept no lane, and failed them on such seeds; a later one took a tile's nominal rows
    from its loads alone, which a kernel that clamps rows to the last instead of masking hides)."""
    assert ch11.probe_shape(probe_seed(seed))[0][2] % 128
    result = grader.grade_task("flash_attention", GOOD / folder, seed=seed)
    assert result.status == PASS, full_text(result)


def test_a_product_that_is_no_keys_work_is_not_counted(tmp_path):
    """The causal probe counts the products q k^T (over the head dim) and p v (into it) in keys walked; a
    right kernel that takes its row sums as p @ ones, one more product a tile, still passes."""
    ones = lesson.write_variant("flash_attention", {
        "        l_i = l_i * alpha + tl.sum(p, axis=1)\n":
            "        sums = tl.dot(p.to(v.dtype), tl.full([BLOCK_N, 16], 1.0, v.dtype))  # (BLOCK_M, 16), alike\n"
            "        l_i = l_i * alpha + tl.sum(sums, axis=1) / 16\n",
    }, folder=tmp_path / "ones")  # fmt: skip
    result = grader.grade_task("flash_attention", ones.folder, seed=2022)
    assert result.status == PASS, full_text(result)


def test_exp_where_exp2_belongs_is_named(tmp_path):
    """The kernel's scores are scaled by sm_scale * log2(e) for exp2; tl.exp on them is the softmax at the
    wrong temperature, named as such (the notebook and a hint write the formula with exp)."""
    natural = lesson.write_variant("flash_attention", {
        "        p = tl.math.exp2(s - m_new[:, None])\n": "        p = tl.exp(s - m_new[:, None])\n",
        "        alpha = tl.math.exp2(m_i - m_new)": "        alpha = tl.exp(m_i - m_new)",
    }, folder=tmp_path / "natural")  # fmt: skip
    result = grader.grade_task("flash_attention", natural.folder, seed=SEED)
    assert result.status == FAIL and "exponentiated with exp: use tl.math.exp2" in result.summary, full_text(result)


def test_a_causal_walk_through_device_descriptors_is_probed_too(tmp_path):
    """The causal probe counts each query tile's products, whatever reads the tiles: the descriptor-made
    kernel (right) walking every key tile fails it, as the pointer-made one does."""
    walks_all = lesson.write_variant("flash_attention", {
        "        stop = tl.minimum((pid_m + 1) * BLOCK_M, seq_len)\n": "        stop = seq_len\n",
    }, source=GOOD / "ch11_attention_device_descriptors", folder=tmp_path)  # fmt: skip
    result = grader.grade_task("flash_attention", walks_all.folder, seed=SEED)
    assert result.status == FAIL and "a causal walk loaded key tiles above the diagonal" in result.summary, full_text(
        result
    )


def test_a_walk_that_wastes_tiles_at_head_dim_128_only_fails_where_the_probe_draws_128():
    """The probe draws its head dim (64 or 128) from the grading seed: a kernel whose causal stop is right only
    with square tiles (it takes 64 x 64 at head dim 64, 32 x 64 at 128) fails at a seed that draws 128."""
    seed = WRONG_AT_SEED["ch11_causal_stop_by_key_tile"]
    assert ch11.probe_shape(probe_seed(seed))[0][3] == 128 and ch11.probe_shape(probe_seed(SEED))[0][3] == 64
    result = grader.grade_task("flash_attention", WRONG / "ch11_causal_stop_by_key_tile", seed=seed)
    assert result.status == FAIL and "a causal walk" in result.summary and "above the diagonal" in result.summary, (
        full_text(result)
    )


@pytest.mark.parametrize("shape", [(1, 1, 300, 64), (2, 1, 70, 64), (1, 2, 520, 64)])
def test_the_causal_three_consumer_experiment_applies_and_is_right(shape, tmp_path):
    """scripts/gluon_attention.py's CAUSAL_THREE (three consumers at head dim 64 with a causal mask, each walking
    to its group's last query) is edits of the solution: each must still apply, and the kernel it makes must be
    right in the simulator, or the GPU experiment would time a broken kernel or none."""
    import importlib.util

    from course_lib import gluon_cpu

    spec = importlib.util.spec_from_file_location("gluon_attention", ROOT / "scripts" / "gluon_attention.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    variant = lesson.write_variant("ws_attention", script.CAUSAL_THREE, folder=tmp_path)
    module = sources.load_module("ws_attention", variant.folder)
    assert module.consumers(64, True) == 3
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(*shape, generator=gen).to(torch.bfloat16) for _ in range(3))
    out = torch.full_like(q, float("nan"))
    with gluon_cpu.launches_simulated(seed=1):
        module.ws_attention(q, k, v, out, True, 0.125, sms=2)
    expected = ch11.attention_reference(q.double(), k.double(), v.double(), True, 0.125)
    assert torch.allclose(out.float(), expected.float(), atol=2e-2, rtol=2e-2)
