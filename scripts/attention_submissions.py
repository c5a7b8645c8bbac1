"""Writes chapter 11's Triton submissions in tests/wrong/ch11_* and tests/good/ch11_* that are a solution but for
one mistake (or variant); scripts/ws_attention_submissions.py writes the ch11_ws_* ones. Each is
solutions/flash_attention.py or solutions/paged_decode.py without its markers and TODO lines (two wrong ones: the
right alternative in tests/good that they break), a docstring that says what is wrong (or right), and the
mistake's edits, each text it replaces occurring exactly once. Run it after changing a solution (or one of those
two alternatives), so that each submission stays its base but for its mistake (tests/test_ch11.py then says
whether each still fails with its message, or passes):

    python scripts/attention_submissions.py [--check]

Hand-made, not written here: the right alternatives in tests/good, each a kernel written otherwise on purpose (its
own loops, tiles, grid, names and softmax), graded to show that the checks accept more than the solution's way:
ch11_attention_one_loop (one masked loop, exp, 32 x 32 tiles, grid axes swapped), ch11_attention_two_pass (a
two-pass softmax), ch11_attention_prefetch_next (the next tile loaded by hand), ch11_attention_stop_past_end (the
last tile walks past seq_len, a 1-D grid), ch11_attention_clamped_rows (no load masks, rows clamped),
ch11_attention_device_descriptors (tensor descriptors made in the kernel), ch11_decode_no_split (no split, no
merge, no tl.dot) and ch11_decode_lse_slices_per_sequence (slices cut from each sequence's own length, partials as
log-sum-exp). Written here from the last two: ch11_causal_two_pass_past_diagonal and ch11_decode_empty_slice_nan.
"""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def without_markers(path: Path) -> str:
    """The file without its BEGIN/END SOLUTION markers and TODO lines, from the end of its docstring on."""
    lines = path.read_text().splitlines()
    body = "\n".join(line for line in lines if not re.match(r"\s*# (BEGIN|END) SOLUTION|\s*# TODO:", line)) + "\n"
    return body[body.index('"""', 3) + 3 :]


BASES = {  # a variant's base: the file it edits, without its docstring
    "flash_attention": ROOT / "solutions/flash_attention.py",
    "paged_decode": ROOT / "solutions/paged_decode.py",
    "good/ch11_attention_two_pass": ROOT / "tests/good/ch11_attention_two_pass/flash_attention.py",
    "good/ch11_decode_lse_slices_per_sequence": ROOT / "tests/good/ch11_decode_lse_slices_per_sequence/paged_decode.py",
}

# flash_attention
SUM = "        l_i = l_i * alpha + tl.sum(p, axis=1)\n"
ACC = "        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])\n"
STOP = "    stop = tl.minimum((pid_m + 1) * BLOCK_M, seq_len) if CAUSAL else seq_len\n"
FULL = "    full = (pid_m * BLOCK_M // BLOCK_N) * BLOCK_N if CAUSAL else (seq_len // BLOCK_N) * BLOCK_N\n"
TILES = (
    "    block_m, block_n = 128, 64  # 128 query rows share each K/V tile; 64 keys a tile "
    "keep the registers in bounds\n"
)
WALKS_ALL = (
    "    stop = seq_len  # wrong: the causal walk goes on past the diagonal (right values, half the work wasted)\n"
)
# paged_decode
MASK = '        s = tl.where((live & (tokens < context))[None, :], s, float("-inf"))\n'
MERGE = """    top = tl.max(m, axis=0)
    w = tl.math.exp2(m - top)
    total = tl.sum(l * w, axis=0)
    out = tl.sum(acc * w[:, None], axis=0) / total
"""
COPY4 = """@triton.jit
def _copy4(src, dst, B, H, S, D, s0, s1, s2, s3, t0, t1, t2, t3, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    n = B * H * S * D
    d = o % D
    s = (o // D) % S
    h = (o // (D * S)) % H
    b = o // (D * S * H)
    read = b * s0 + h * s1 + s * s2 + d * s3
    tl.store(dst + b * t0 + h * t1 + s * t2 + d * t3, tl.load(src + read, mask=o < n), mask=o < n)


"""


def edit(text, *pairs):
    """Each (old, new): old occurs exactly once."""
    for old, new in pairs:
        assert text.count(old) == 1, (old, text.count(old))
        text = text.replace(old, new)
    return text


# folder under tests -> (base, docstring, edits)
variants = {
    "wrong/ch11_no_rescale": (
        "flash_attention",
        "Wrong on purpose: the running sum and output are not rescaled when a tile raises the max.",
        [
            (
                SUM + ACC,
                "        l_i = l_i + tl.sum(p, axis=1)  # wrong: the old sum and output are not rescaled\n"
                "        acc = tl.dot(p.to(v.dtype), v, acc)\n",
            )
        ],
    ),
    "wrong/ch11_sum_not_rescaled": (
        "flash_attention",
        "Wrong on purpose: the output accumulator is rescaled when a tile raises the max, the running sum is not.",
        [(SUM, "        l_i = l_i + tl.sum(p, axis=1)  # wrong: the old sum is not rescaled (acc is)\n")],
    ),
    "wrong/ch11_causal_diagonal_dropped": (
        "flash_attention",
        "Wrong on purpose: the causal mask drops each query's own key (j < i where j <= i belongs).",
        [
            (
                "keep = keep & (offs_n[None, :] <= offs_m[:, None])\n",
                "keep = keep & (offs_n[None, :] < offs_m[:, None])  # wrong: drops the diagonal\n",
            )
        ],
    ),
    "wrong/ch11_causal_diagonal_unmasked": (
        "flash_attention",
        "Wrong on purpose: with a causal mask the unmasked walk runs to the last whole key tile before the walk's\n"
        "stop, so the key tiles that hold the diagonal are walked without the causal mask: queries see the later\n"
        "keys of their own tile.",
        [
            (
                FULL,
                "    # wrong: the unmasked walk runs to the last whole key tile before "
                "stop, so the tiles that hold the\n"
                "    # diagonal are walked without the causal mask\n"
                "    full = (stop // BLOCK_N) * BLOCK_N if CAUSAL else (seq_len // BLOCK_N) * BLOCK_N\n",
            )
        ],
    ),
    "wrong/ch11_causal_no_skip": (
        "flash_attention",
        "Right values, wasted work: the causal walk loads every key tile, the ones above the diagonal masked.",
        [(STOP, WALKS_ALL)],
    ),
    "wrong/ch11_causal_one_tile_past": (
        "flash_attention",
        "Wrong on purpose (right values, wasted work): the causal walk stops one key tile past the diagonal, so\n"
        "each query tile loads a key tile whose scores are all masked.",
        [
            (
                STOP,
                "    # wrong: one key tile past the diagonal (its scores all masked: right "
                "values, a tile's work wasted)\n"
                "    stop = tl.minimum((pid_m + 1) * BLOCK_M + BLOCK_N, seq_len) if CAUSAL else seq_len\n",
            )
        ],
    ),
    "wrong/ch11_causal_scratch_copy": (
        "flash_attention",
        "Wrong on purpose (right values, wasted work): the causal walk goes over every "
        "key tile, the loads of the ones\n"
        "above the diagonal masked off, and it reads copies of k and v made by a first "
        "kernel, so that no load of k or v\n"
        "itself lies above the diagonal, and none of the masked-off loads reads memory. The probe counts the\n"
        "products: each query tile multiplies every key tile.",
        [
            ("import triton\n", "import torch\nimport triton\n"),
            (
                "        if MASKED:\n            k = tl.load(",
                "        if MASKED:\n"
                "            lim = tl.minimum(seq_len, tl.max(offs_m) + 1) if CAUSAL else seq_len\n"
                "            k = tl.load(",
            ),
            ("mask=offs_n[None, :] < seq_len, other=0.0)", "mask=offs_n[None, :] < lim, other=0.0)"),
            ("mask=offs_n[:, None] < seq_len, other=0.0)", "mask=offs_n[:, None] < lim, other=0.0)"),
            (STOP, WALKS_ALL),
            ("def flash_attention(", COPY4 + "def flash_attention("),
            (
                "    batch, heads, seq_len, head_dim = q.shape\n",
                "    B, H, S, D = q.shape\n"
                "    k2, v2 = torch.empty_like(k), torch.empty_like(v)\n"
                "    for src, dst in ((k, k2), (v, v2)):\n"
                "        _copy4[(triton.cdiv(src.numel(), 1024),)](src, dst, B, H, S, D, "
                "*src.stride(), *dst.stride(), BLOCK=1024)\n"
                "    k, v = k2, v2\n"
                "    batch, heads, seq_len, head_dim = q.shape\n",
            ),
        ],
    ),
    "wrong/ch11_causal_stop_by_key_tile": (
        "flash_attention",
        "Wrong on purpose (right values, wasted work): the causal walk stops at (pid_m + 1) * BLOCK_N, a key tile's\n"
        "size where the query tile's belongs, and the launcher takes 32 x 64 tiles at "
        "head dim 128 (64 x 64 at 64). At\n"
        "head dim 64 the tiles are square and the stop is right; at 128 each query tile walks past the diagonal. The\n"
        "probe draws its head dim from the seed: graded at a seed that draws 128, it fails.",
        [
            (STOP, STOP.replace("(pid_m + 1) * BLOCK_M", "(pid_m + 1) * BLOCK_N")),
            (
                TILES,
                "    # 64 x 64 tiles; at head dim 128 the accumulator is twice as wide: half the query rows keep it in"
                " registers\n"
                "    block_m, block_n = (64, 64) if head_dim == 64 else (32, 64)\n",
            ),
        ],
    ),
    "wrong/ch11_full_past_whole_tiles": (
        "flash_attention",
        "Wrong on purpose: without a causal mask the unmasked walk runs to seq_len, so "
        "where seq_len is no multiple of\n"
        "BLOCK_N its last tile is loaded without a mask, past the end of the keys.",
        [
            (
                FULL + "    full = tl.minimum(full, (seq_len // BLOCK_N) * BLOCK_N)\n",
                "    full = (pid_m * BLOCK_M // BLOCK_N) * BLOCK_N if CAUSAL else seq_len  # wrong: past the last whole"
                " tile\n",
            )
        ],
    ),
    "wrong/ch11_out_strides_of_q": (
        "flash_attention",
        "Wrong on purpose: the launcher passes q's strides for out (\"out has q's shape\"). "
        "Right wherever out and q share\n"
        "a layout; the case whose q is heads-interleaved and whose out is contiguous writes the wrong places.",
        [
            (
                "*v.stride(), *out.stride(),\n",
                "*v.stride(), *q.stride(),  # wrong: out has its own\n",
            )
        ],
    ),
    "good/ch11_attention_tall_key_tiles": (
        "flash_attention",
        "Right, with other tiles: key tiles of 128, taller than the query tiles of 32 (a walk's last tile reaches\n"
        "past its last query, and is masked there), so a program's diagonal tile starts before its queries end.",
        [
            (
                TILES,
                "    # right: key tiles taller than the query tiles (a walk's last tile "
                "reaches past its last query, and"
                " is\n"
                "    # masked there), so a program's diagonal tile starts before its queries end\n"
                "    block_m, block_n = 32, 128\n",
            ),
            ("NUM_STAGES=3, num_warps=8 if head_dim == 128 else 4,", "NUM_STAGES=2, num_warps=4,"),
        ],
    ),
    "wrong/ch11_causal_two_pass_past_diagonal": (
        "good/ch11_attention_two_pass",
        "Wrong on purpose (right values, wasted work): tests/good/ch11_attention_two_pass, but its first pass, for\n"
        "the rows' maxima, walks every key tile, past the diagonal, its loads there masked off (zeros); the second\n"
        "stops at the diagonal. No load of a key above the diagonal reads memory, and the outputs are right: the\n"
        "products of the first pass are what the probe counts (more q k^T than p v, and not the second pass's\n"
        "tiles over again).",
        [
            (
                "    kt = tl.load(Kb + cols[None, :] * skn + d[:, None] * skd, mask=cols[None, :] < N, other=0.0)\n",
                "    lim = tl.minimum(N, tl.max(rows) + 1) if CAUSAL else N\n"
                "    kt = tl.load(Kb + cols[None, :] * skn + d[:, None] * skd, mask=cols[None, :] < lim, other=0.0)\n",
            ),
            (
                "    for start in range(0, end, BN):  # pass 1: each row's max\n",
                "    for start in range(0, N, BN):  # pass 1: every tile (wasted above the diagonal)\n",
            ),
        ],
    ),
    # paged_decode
    "wrong/ch11_decode_acc_not_rescaled": (
        "paged_decode",
        "Wrong on purpose: the walk rescales the running sum when a step raises the max, but not the output\n"
        "accumulator. A slice of one step never rescales anything, so only a case whose slices walk several steps\n"
        "shows it (the long contexts).",
        [
            (
                "        acc = tl.dot(p_.to(v.dtype), v, acc * alpha[:, None])\n",
                "        acc = tl.dot(p_.to(v.dtype), v, acc)  # wrong: acc is not rescaled by alpha\n",
            )
        ],
    ),
    "wrong/ch11_decode_context_off_by_one": (
        "paged_decode",
        "Wrong on purpose: the scores are kept for tokens <= context, one token past each sequence's last, where the\n"
        "last page has room for it.",
        [(MASK, MASK.replace("tokens < context", "tokens <= context").replace("\n", "  # wrong: one token past\n"))],
    ),
    "wrong/ch11_decode_no_context_mask": (
        "paged_decode",
        "Wrong on purpose: the last page's tokens past the context length are not masked (only the step's pages\n"
        "past the slice's last are).",
        [(MASK, '        s = tl.where(live[None, :], s, float("-inf"))  # wrong: tokens past the context kept\n')],
    ),
    "wrong/ch11_decode_past_last_page": (
        "paged_decode",
        "Wrong on purpose: the walk runs to the slice's end, past the sequence's last page: the table's entries there\n"
        "name no page, and the context mask would hide their scores, not the reads.",
        [
            (
                "    last = tl.minimum(first + pages_per_split, tl.cdiv(context, PAGE))  # pages past the context: "
                "never read\n",
                "    last = first + pages_per_split  # wrong: past the sequence's last page, cdiv(context, PAGE)\n",
            )
        ],
    ),
    "wrong/ch11_decode_group_tile_16": (
        "paged_decode",
        "Wrong on purpose: the solution with the group's tile fixed at 16 rows "
        "(BLOCK_G=16). Right while a KV head has\n"
        "at most 16 query heads; with more (24 in a case), the heads past the 16th are never computed.",
        [("BLOCK_G=max(16, triton.next_power_of_2(group)),", "BLOCK_G=16,")],
    ),
    "wrong/ch11_decode_head_modulo": (
        "paged_decode",
        "Wrong on purpose: query head h reads KV head h % kv_heads, not h // group.",
        [
            (
                "    heads = kv_head * GROUP + offs_g\n",
                "    heads = kv_head + offs_g * tl.num_programs(1)  # wrong: query head h "
                "taken as KV head h % kv_heads\n",
            )
        ],
    ),
    "wrong/ch11_merge_ignores_max": (
        "paged_decode",
        "Wrong on purpose: the merge adds the slices' partial sums without bringing them to a common max.",
        [
            (
                MERGE,
                "    # wrong: each slice's sum and output are measured against its own max; adding them as they are\n"
                "    # weighs the slices wrongly\n"
                "    total = tl.sum(l, axis=0)\n"
                "    out = tl.sum(acc, axis=0) / total\n",
            )
        ],
    ),
    "wrong/ch11_decode_empty_slice_nan": (
        "good/ch11_decode_lse_slices_per_sequence",
        "Wrong on purpose: tests/good/ch11_decode_lse_slices_per_sequence without its guard for a slice that saw no\n"
        "token. Slices are cut from each sequence's own length, so a short sequence beside "
        "a long one (which makes many\n"
        "slices) has slices with nothing in them: their sum is 0 and their max -inf, and "
        "lse = m + log2(l), o = acc / l\n"
        "give NaN, which the merge's weight of 0 does not remove (0 x NaN is NaN).",
        [
            (
                "    has = l > 0\n"
                '    lse = tl.where(has, m + tl.log2(tl.where(has, l, 1.0)), float("-inf"))\n'
                "    o = acc / tl.where(has, l, 1.0)[:, None]\n",
                "    lse = m + tl.log2(l)\n    o = acc / l[:, None]\n",
            )
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
    rests = {base: without_markers(path) for base, path in BASES.items()}
    stale = []
    for folder, (base, doc, pairs) in variants.items():
        path = ROOT / "tests" / folder / BASES[base].name
        text = formatted(path, '"""' + doc + '"""' + edit(rests[base], *pairs))
        if "--check" in argv:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path.relative_to(ROOT)))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print("wrote", path.relative_to(ROOT))
    if stale:
        print("not their base but for their mistake (run scripts/attention_submissions.py):", *stale)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
