"""Writes chapter 11's Gluon submissions, tests/wrong/ch11_ws_* and tests/good/ch11_ws_*, from
solutions/ws_attention.py: the solution without its markers and TODO lines, a docstring that says what is
wrong (or right), and one mistake (or variant) each. Run it after changing the solution, so that each
submission stays the solution but for its mistake (tests/test_ch11.py then says whether each still fails
with its message, or passes):

    python scripts/ws_attention_submissions.py [--check]
"""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
src = (ROOT / "solutions/ws_attention.py").read_text()
body = (
    "\n".join(line for line in src.splitlines() if not re.match(r"\s*# (BEGIN|END) SOLUTION|\s*# TODO:", line)) + "\n"
)
doc_end = body.index('"""', 3) + 3
rest = body[doc_end:]

LOOP_TURN = """            mbarrier.arrive(turn.index(NEXT), count=1)
            turns += 1
            scores = warpgroup_mma_wait(num_outstanding=1, deps=(scores,))  # p @ v may still run
"""
FREE = "            mbarrier.arrive(v_empty.index(prev), count=1)  # p @ v has read value slot prev\n"
FREE_KEYS = (
    "            mbarrier.arrive(k_empty.index(s), count=1)  # q k^T has read key slot s: a turn before its values\n"
)
PV_ISSUE = "            acc = warpgroup_mma(p, v_bufs.index(prev).reshape([BLOCK_N, HEAD_DIM]), acc, is_async=True)\n"
RESCALE = "            acc = acc * gl.expand_dims(alpha, 1)\n"
WAIT0 = "            acc, p = warpgroup_mma_wait(num_outstanding=0, deps=(acc, p))\n"
WAIT1 = "            scores = warpgroup_mma_wait(num_outstanding=1, deps=(scores,))  # p @ v may still run\n"
ALPHA_OUT = "gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))"


def edit(text, *pairs):
    """Each (old, new): old occurs exactly once; "re:PATTERN" replaces every match (at least one)."""
    for old, new in pairs:
        if old.startswith("re:"):
            text, count = re.subn(old[3:], new, text)
            assert count, old
            continue
        assert text.count(old) == 1, (old, text.count(old))
        text = text.replace(old, new)
    return text


variants = {
    "wrong/ch11_ws_stale_turn": (
        "Wrong on purpose: the turn counter is not advanced in the loop, so each warpgroup waits on a stale phase of\nits turn barrier (a deadlock).",
        [(LOOP_TURN, LOOP_TURN.replace("            turns += 1\n", ""))],
    ),
    "wrong/ch11_ws_free_before_wait": (
        "Wrong on purpose: the previous tile's value slot is freed after the wait for the scores alone, while this\nwarpgroup's p @ v (issued after the scores) may still read its values: the producer may refill it under the\nrunning wgmma.",
        [(FREE, ""), (WAIT1, WAIT1 + FREE)],
    ),
    "wrong/ch11_ws_keys_freed_early": (
        "Wrong on purpose: the key slot is freed as soon as q k^T is issued, before the wait that sees it complete:\nthe producer may refill the slot while the wgmma still reads its keys.",
        [(FREE_KEYS, ""), (PV_ISSUE, PV_ISSUE + FREE_KEYS)],
    ),
    "wrong/ch11_ws_no_acc_rescale": (
        "Wrong on purpose: the running sum is rescaled when the max grows, the output accumulator is not.",
        [(RESCALE, "")],
    ),
    "wrong/ch11_ws_no_convert_layout": (
        "Wrong on purpose: alpha (in the scores' row layout) rescales acc (in the output's layout) with no\ngl.convert_layout. The CPU simulator does not check layouts, and at head dim 128 the two layouts are the same;\nat head dim 64 the compiler refuses it.",
        [(ALPHA_OUT + ",", "alpha,  # wrong: alpha stays in the scores' row layout, acc is in o_layout")],
    ),
    "wrong/ch11_ws_rescale_before_wait": (
        "Wrong on purpose: acc is rescaled before the wait that sees its p @ v complete: on the GPU the wgmma is\nstill writing those registers.",
        [(RESCALE, ""), (WAIT0, RESCALE + WAIT0)],
    ),
    "wrong/ch11_ws_p_not_kept": (
        "Wrong on purpose: the wait for p @ v does not keep p (the wgmma's A operand, in registers) in its deps: on\nthe GPU the compiler may reuse p's registers for the next tile's probabilities while the wgmma still reads\nthem. The values come out right in the simulator; its protocol check names it.",
        [(WAIT0, "            acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))\n")],
    ),
    "wrong/ch11_ws_scores_wait_all": (
        "Wrong on purpose: the wait for the scores leaves nothing outstanding (num_outstanding=0), so it also waits\n"
        "for the p @ v issued after them, and without p in its deps: the overlap inside a warpgroup is lost, and on\n"
        "the GPU nothing keeps p's registers alive while that wgmma reads them.",
        [
            (
                WAIT1,
                "            scores = warpgroup_mma_wait(num_outstanding=0, deps=(scores,))  # waits for p @ v too\n",
            )
        ],
    ),
    "wrong/ch11_ws_ring_too_deep": (
        "Wrong on purpose: three key slots and three value slots. At head dim 128 the rings and the query and output\n"
        "tiles ask for more shared memory than a Hopper block may have (227 KB): the launch fails on the GPU. At head\n"
        "dim 64 it fits, and the simulator has no such limit.",
        [("BLOCK_M, BLOCK_N, NUM_BUFFERS = 64, 128, 2", "BLOCK_M, BLOCK_N, NUM_BUFFERS = 64, 128, 3")],
    ),
    "wrong/ch11_ws_snake_python_mod": (
        "Wrong on purpose: the snake's backward round written with Python's remainder in mind, base + (-1 - item) %\n"
        "NUM_SMS. A kernel's % rounds toward zero as C's does (srem): the remainder is negative, so in a full backward\n"
        "round some items are computed twice and others never.",
        [
            (
                "        item = gl.where(back, base + NUM_SMS - 1 - item % NUM_SMS, item)\n",
                "        item = gl.where(back, base + (-1 - item) % NUM_SMS, item)  # wrong: Python's %, not the GPU's\n",
            )
        ],
    ),
    "wrong/ch11_ws_empty_phase_floor": (
        "Wrong on purpose: the producer waits for a slot's release at phase ((t - NUM_BUFFERS) // NUM_BUFFERS) & 1,\n"
        "the phase of the slot's previous tile, -1's for the first NUM_BUFFERS tiles: odd under Python's floor, which\n"
        "a fresh barrier passes. A kernel's // rounds toward zero (divsi): that phase is 0 for t = 1, and the\n"
        "producer waits for a release that never comes.",
        [
            (
                "    mbarrier.wait(empty.index(s), ((t // NUM_BUFFERS) & 1) ^ 1)\n",
                "    mbarrier.wait(empty.index(s), ((t - NUM_BUFFERS) // NUM_BUFFERS) & 1)  # wrong: Python's //\n",
            )
        ],
    ),
    "wrong/ch11_ws_no_overlap": (
        "Wrong on purpose (values right): the scores and p @ v are waited for together before the softmax, so a\nwarpgroup's softmax never runs beside its own GEMM; only the other warpgroup's GEMMs overlap it. FlashAttention-3\noverlaps both.",
        [(WAIT1, "            scores, acc, p = warpgroup_mma_wait(num_outstanding=0, deps=(scores, acc, p))\n")],
    ),
    "wrong/ch11_ws_busy_wgmma": (
        "Wrong on purpose (values right): the kernel without the overlap, plus a wgmma issued only to be in flight\n"
        "beside the softmax (q k^T again, its result never used). The share of the softmax beside a wgmma looks\n"
        "like the overlap's; the FLOPs of wgmma issued, against the attention's, show the work done for nothing.",
        [
            (
                WAIT1,
                "            scores, acc, p = warpgroup_mma_wait(num_outstanding=0, deps=(scores, acc, p))\n"
                "            busy = warpgroup_mma(q_tile, k_t, s_zero, use_acc=False, is_async=True)  # for nothing\n",
            ),
            (FREE_KEYS, ""),  # the busy wgmma reads the keys too: their slot is freed after its wait
            (WAIT0, "            busy = warpgroup_mma_wait(num_outstanding=0, deps=(busy,))\n" + FREE_KEYS),
        ],
    ),  # fmt: skip
    "good/ch11_ws_keys_freed_late": (
        "Right, less eager: the key slot is freed with the value slot, after the wait for p @ v, a turn later than it\ncould be (as one ring of (key, value) slots did): never wrong, the producer's next copy waits longer.",
        [(FREE_KEYS, ""), (WAIT0, WAIT0 + FREE_KEYS)],
    ),
    "good/ch11_ws_hand_over_late": (
        "Right, with less overlap: each warpgroup hands the turn over only after its scores are in, so the other's\nGEMMs no longer run beside this one's wait (on a GPU: slower, never wrong).",
        [(LOOP_TURN, WAIT1 + "            mbarrier.arrive(turn.index(NEXT), count=1)\n            turns += 1\n")],
    ),
    "good/ch11_ws_rescale_before_pv": (
        "Right, another order: acc is rescaled by the previous softmax step's alpha in the next turn, between issuing\n"
        "q k^T and issuing p @ v (while q k^T runs), instead of right after p @ v completes.",
        [
            (
                "        # acc is still zero: alpha has nothing to rescale\n",
                "        # acc is still zero: alpha (0) rescales nothing, but the next turn applies it\n",
            ),
            (RESCALE, ""),
            (PV_ISSUE, RESCALE + PV_ISSUE),
            (
                "        # the last tile's p @ v, in one more turn\n",
                "        # the last tile's p @ v, in one more turn\n        acc = acc * gl.expand_dims(alpha, 1)\n",
            ),
        ],
    ),
    "wrong/ch11_ws_turn_over_softmax": (
        "Wrong on purpose (values right): the turn is handed over only after the softmax, so the other warpgroup's\n"
        "GEMMs wait through it: the two warpgroups' softmaxes and GEMMs run one after the other, not side by side.",
        [
            (LOOP_TURN, WAIT1),
            (WAIT0, "            mbarrier.arrive(turn.index(NEXT), count=1)\n            turns += 1\n" + WAIT0),
        ],
    ),
    "wrong/ch11_ws_turn_to_self": (
        "Wrong on purpose: each warpgroup hands the turn to itself (turn.index(ROLE)), not to the next: the next\n"
        "warpgroup waits for a turn that nothing ever gives it (a deadlock).",
        [("re:mbarrier\\.arrive\\(turn\\.index\\(NEXT\\)", "mbarrier.arrive(turn.index(ROLE)")],
    ),
    "wrong/ch11_ws_turn_one_minus_role": (
        "Wrong on purpose: the turn handed over as two consumers hand it, to 1 - ROLE. Right at head dim 128 (two\n"
        "consumers); at head dim 64 the third warpgroup's turn never comes, and the first two pass it between them.",
        [("re:mbarrier\\.arrive\\(turn\\.index\\(NEXT\\)", "mbarrier.arrive(turn.index(1 - ROLE)")],
    ),
    "wrong/ch11_ws_no_turns": (
        "Wrong on purpose (values right): the consumers take no turns at the tensor cores (no turn barrier waited\n"
        "on or arrived on): nothing keeps one warpgroup's softmax beside the other's GEMMs.",
        [
            ("re:\\n *mbarrier\\.wait\\(turn\\.index\\(ROLE\\)[^\\n]*", ""),
            ("re:\\n *mbarrier\\.arrive\\(turn\\.index\\(NEXT\\)[^\\n]*\\n *turns \\+= 1", ""),
        ],
    ),
}


def formatted(path: Path, text: str) -> str:
    ruff = next(
        (r for r in (Path(sys.executable).parent / "ruff", ROOT / ".venv" / "bin" / "ruff") if r.exists()), "ruff"
    )
    done = subprocess.run([str(ruff), "format", "--stdin-filename", str(path), "-"],
                          input=text, capture_output=True, text=True, check=True, cwd=ROOT)  # fmt: skip
    return done.stdout


def main(argv: list[str]) -> int:
    """Writes each submission; with --check, writes nothing and names those that differ (exit 1)."""
    stale = []
    for folder, (doc, pairs) in variants.items():
        path = ROOT / "tests" / folder / "ws_attention.py"
        text = formatted(path, '"""' + doc + '\n"""' + edit(rest, *pairs))
        if "--check" in argv:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path.relative_to(ROOT)))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print("wrote", path.relative_to(ROOT))
    if stale:
        print("not the solution but for their mistake (run scripts/ws_attention_submissions.py):", *stale)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
