"""course_lib.gluon_cpu: chapter 09's warp-specialized GEMM run on the CPU, its protocol checked.

The right kernels (the solution, and two right alternatives) give the product on shapes with ring
wrap-around, a K tail, edge tiles and several tiles per program, under random and late orders of the
asynchronous events. Each protocol mistake, made in a copy of the solution, is caught and named."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from conftest import GOOD, ROOT, TESTS, WRONG

from course_lib import gluon_cpu

SOLUTION = ROOT / "solutions" / "ws_matmul.py"
ORDERS = {"random": 1.0, "late": 0.0}  # event_weight: events as often as partitions, or as late as can be


def _module(path, name="ws_under_test"):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _inputs(M, N, K, seed=0):
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(M, K, generator=gen).to(torch.bfloat16)
    b = torch.randn(K, N, generator=gen).to(torch.bfloat16)
    return a, b, torch.full((M, N), float("nan"), dtype=torch.bfloat16)


def _run(module, M, N, K, sms, seed, order):
    a, b, out = _inputs(M, N, K)
    with gluon_cpu.launches_simulated(seed=seed, event_weight=ORDERS[order]):
        module.ws_matmul(a, b, out, sms=sms)
    return out, a.double() @ b.double()


# M, N, K, programs: 3 x 3 tiles of 128 x 256 on 2 programs (several tiles each, the ring running on
# across tiles and wrapping round its 3 slots), K = 200 (3 steps of 64 and a tail of 8), edge tiles
SHAPES = [(300, 520, 200, 2), (128, 256, 64, 1), (129, 264, 456, 3)]


@pytest.mark.parametrize("order", sorted(ORDERS))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_the_solution_gives_the_product_on_the_cpu(shape, order):
    module = _module(SOLUTION)
    for seed in range(3):
        out, ref = _run(module, *shape, seed=seed, order=order)
        assert not out.isnan().any(), "every element of out written by the TMA stores"
        err = (out.double() - ref).abs() / (ref.abs() + 1)
        assert err.max() < 2**-7, (seed, err.max().item())  # bf16's rounding of the output


@pytest.mark.parametrize(
    "path", [GOOD / "ch09_wait_for_zero" / "ws_matmul.py", TESTS / "slow" / "ch09_one_slot" / "ws_matmul.py"]
)
def test_right_alternatives_run_right(path):
    module = _module(path)
    for order in ORDERS:
        out, ref = _run(module, 300, 520, 200, 2, seed=1, order=order)
        assert ((out.double() - ref).abs() / (ref.abs() + 1)).max() < 2**-7


def test_a_seed_replays_one_interleaving_and_other_seeds_try_others():
    from course_lib.compilation import recorded_launches

    module = _module(SOLUTION)
    a, b, out = _inputs(300, 520, 200)
    (kernel, args, kwargs), *_ = recorded_launches(module.ws_matmul, a, b, out, sms=2)

    def log(seed):
        return [s.log for s in gluon_cpu.simulate(kernel, args, kwargs, seed=seed)]

    assert log(5) == log(5)
    assert log(5) != log(6)


# --------------------------------------------------------------------------------- protocol mistakes

_PRODUCER_WAIT = "            mbarrier.wait(empty.index(s), phase ^ 1)\n"
_EXPECT = "a_desc.block_type.nbytes + b_desc.block_type.nbytes)"
_CONSUMER_STEP = """            acc = warpgroup_mma(a_bufs.index(s), b_bufs.index(s), acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
            if kk > 0:
                mbarrier.arrive(empty.index((count - 1) % NUM_BUFFERS), count=1)"""
_TAIL = """        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        mbarrier.arrive(empty.index((count - 1) % NUM_BUFFERS), count=1)"""

_TAIL_WAIT = "        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))"
_RELEASE_EARLY = """            acc = warpgroup_mma(a_bufs.index(s), b_bufs.index(s), acc, is_async=True)
            mbarrier.arrive(empty.index(s), count=1)
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))"""
_FENCE = "        fence_async_shared()  # the registers' writes"
_STORE_WAIT = "        tma.store_wait(0)  # the previous tile's"

# name: (text of the solution, its replacement, what the report must say); or ([(text, replacement), ...], said)
MISTAKES = {
    "no_expect": ("            mbarrier.expect(ready.index(s), " + _EXPECT + "\n", "", "no mbarrier.expect announced"),
    "bytes_of_a_only": (_EXPECT, "a_desc.block_type.nbytes)", "counted fewer bytes than the copies"),
    "bytes_twice": (_EXPECT, "2 * (" + _EXPECT + ")", "byte(s) still to come"),
    "no_ready_wait": ("            mbarrier.wait(ready.index(s), (count // NUM_BUFFERS) & 1)\n", "", "a_bufs["),
    "no_empty_wait": (_PRODUCER_WAIT, "", ("a_bufs[", "is a wait missing")),
    "empty_wait_on_the_wrong_parity": (_PRODUCER_WAIT, _PRODUCER_WAIT.replace("phase ^ 1", "phase"), "waits on empty["),
    # the slot freed right after its wgmma is started (and once more at the tile's end: removed too)
    "release_before_the_wgmma_completes": ([(_CONSUMER_STEP, _RELEASE_EARLY), (_TAIL, _TAIL_WAIT)],
                                           "the wgmma reading a_bufs["),
    "last_slot_never_freed": (_TAIL, _TAIL_WAIT, "waits on"),
    "no_fence_before_the_tma_store": (_FENCE, "        # (", "no fence_async_shared()"),
    "no_store_wait_before_reusing_c_smem": (_STORE_WAIT, "        # (", "overwrites c_smem while the TMA store"),
}  # fmt: skip


def _broken(name: str, tmp_path):
    source = SOLUTION.read_text()
    *edit, _ = MISTAKES[name]
    for old, new in edit[0] if len(edit) == 1 else [edit]:
        assert old in source, (name, old)
        source = source.replace(old, new, 1)
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    return _module(path, name)


@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_each_protocol_mistake_is_caught_and_named(name, tmp_path):
    """Under the orders tried (random and late, two seeds each) the mistake is caught, and each report
    names it. A run may also come out right where the order hid the mistake (a TMA store that happened
    to finish before c_smem was written again): the grader tries several orders for that reason."""
    module = _broken(name, tmp_path)
    said = MISTAKES[name][-1]
    said = said if isinstance(said, tuple) else (said,)
    caught = []
    for order in ORDERS:
        for seed in range(2):
            try:
                out, ref = _run(module, 300, 520, 200, 2, seed=seed, order=order)
            except (gluon_cpu.ProtocolError, gluon_cpu.Deadlock) as e:
                assert any(s in str(e) for s in said), (order, seed, str(e))
                caught.append((order, seed))
            else:
                assert ((out.double() - ref).abs() / (ref.abs() + 1)).max() < 2**-7, (order, seed)
    assert caught, f"{name} was never caught"


def test_the_stale_phase_submission_deadlocks_and_says_who_waits_on_what():
    module = _module(WRONG / "ch09_ws_stale_phase" / "ws_matmul.py")
    with pytest.raises(gluon_cpu.Deadlock) as caught:
        _run(module, 300, 520, 200, 2, seed=0, order="random")
    said = str(caught.value)
    assert "_consumer (default partition) waits on ready[" in said and "_producer (worker partition 1)" in said, said
    assert "phase(s) completed" in said


def test_what_is_not_simulated_says_so():
    """A Gluon call the CPU runtime lacks: named, not a traceback from inside Triton."""
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl

    @gluon.jit
    def counts(x_ptr):
        gl.atomic_add(x_ptr + gl.program_id(0), 1)

    with pytest.raises(gluon_cpu.NotSimulated, match="gl.atomic_add"):
        with gluon_cpu.launches_simulated():
            counts[(2,)](torch.zeros(2, dtype=torch.int32))


# ------------------------------------------------------------------- chapter 10's ws_compression

COMPRESSION = ROOT / "solutions" / "ws_compression.py"


def _compression(path, seed, order):
    module = _module(path, f"compression_{path.parent.name}")
    gen = torch.Generator().manual_seed(0)
    B, U, M, Ku, Kc, N = 12, 3, 130, 72, 136, 96  # edge tiles in M, K tails, a user tile per candidate
    w_u, w_c = torch.randn(M, Ku, generator=gen).bfloat16(), torch.randn(M, Kc, generator=gen).bfloat16()
    e_user, e_cand = torch.randn(U, Ku, N, generator=gen).bfloat16(), torch.randn(B, Kc, N, generator=gen).bfloat16()
    user_of = torch.randint(0, U, (B,), generator=gen)
    out = torch.full((B, M, N), float("nan"), dtype=torch.bfloat16)
    with gluon_cpu.launches_simulated(seed=seed, event_weight=ORDERS[order]):
        module.ws_compression(w_u, w_c, e_user, e_cand, user_of, out, sms=3)
    # the kernels' own roundings: the user GEMM's output in bfloat16, then the sum
    user_out = torch.einsum("mk,ukn->umn", w_u.float(), e_user.float()).bfloat16()
    ref = (torch.einsum("mk,bkn->bmn", w_c.float(), e_cand.float()) + user_out.float()[user_of]).bfloat16()
    return ((out.double() - ref.double()).abs() / (ref.double().abs() + 1)).max().item()


@pytest.mark.parametrize("order", sorted(ORDERS))
@pytest.mark.parametrize("path", [COMPRESSION, GOOD / "ch10_ws_tile_serpentine" / "ws_compression.py"])
def test_ws_compression_and_a_right_alternative_run_right(path, order):
    """Both kernels (the cooperative user GEMM, the ping-pong candidate GEMM with three partitions and
    the user tile's copy found through gl.load) give the result."""
    assert _compression(path, seed=0, order=order) < 2**-7


@pytest.mark.parametrize(
    "folder, caught",
    [
        ("ch10_ws_copy_bytes_twice", "byte(s) still to come"),  # hangs on the H200
        ("ch10_ws_copy_no_expect", "no mbarrier.expect announced"),
    ],
)
def test_ws_compression_protocol_mistakes_are_named(folder, caught):
    with pytest.raises(
        (gluon_cpu.ProtocolError, gluon_cpu.Deadlock), match=caught.replace("(", r"\(").replace(")", r"\)")
    ):
        _compression(WRONG / folder / "ws_compression.py", seed=0, order="random")


@pytest.mark.parametrize("folder", ["ch10_ws_copy_first_user", "ch10_ws_user_by_candidate", "ch10_ws_no_user"])
def test_ws_compression_wrong_values_show(folder):
    assert _compression(WRONG / folder / "ws_compression.py", seed=0, order="late") > 0.5


# ------------------------------------------------------------------- against the H200's own outputs

H200_OUTPUTS = ROOT / "results" / "gluon_cpu_h200"


def _gpu_cases():
    import json

    report = json.loads((H200_OUTPUTS / "outputs.json").read_text())
    return sorted(report["cases"].items())


@pytest.mark.parametrize("name, row", _gpu_cases(), ids=[name for name, _ in _gpu_cases()])
def test_the_simulator_gives_what_the_h200_gave(name, row):
    """scripts/gluon_gpu_outputs.py ran each kernel on an H200 (results/gluon_cpu_h200, with its GPU,
    versions and date) on inputs any machine makes again from a seed. The simulator's output, under
    random and late orders of the events, matches it to bfloat16's rounding: the GPU and this CPU add
    the K products in different orders, so a few elements in 10,000 round the other way."""
    script = _module(ROOT / "scripts" / "gluon_gpu_outputs.py", "gluon_gpu_outputs")
    path, kind, shape, programs = script.CASES[name]
    assert [row["file"], list(shape), programs] == [path, row["shape"], row["programs"]]
    saved = torch.load(H200_OUTPUTS / "outputs.pt")
    expected = saved[row.get("gpu_output_same_as", name)]
    module = _module(ROOT / path, "h200_case")
    tensors = script.inputs(kind, tuple(shape))
    assert script.input_sum(tensors) == pytest.approx(row["input_sum"], rel=1e-12)  # the same inputs as there
    for weight in ORDERS.values():
        tensors = script.inputs(kind, tuple(shape))
        with gluon_cpu.launches_simulated(seed=3, event_weight=weight):
            got = script.run(module, kind, tensors, programs)
        assert not got.isnan().any()
        assert script.difference(got, expected) < 2**-7  # bfloat16's rounding, as the other tests
        assert (got == expected).double().mean() > 0.999  # on the H200: 0.99974 to 0.99989 equal


# ------------------------------------------------------------- two partitions writing one slot


def _two_writers():
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import mbarrier

    @gluon.jit
    def _first(smem, bar, ORDERED: gl.constexpr):
        layout: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [4, 1], [1, 0])
        smem.store(gl.full([16, 16], 1.0, gl.float32, layout))
        if ORDERED:
            mbarrier.arrive(bar, count=1)  # after the write: whoever waits on bar sees it

    @gluon.jit
    def _second(smem, bar, ORDERED: gl.constexpr):
        layout: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [4, 1], [1, 0])
        if ORDERED:
            mbarrier.wait(bar, 0)
        smem.store(gl.full([16, 16], 2.0, gl.float32, layout))

    @gluon.jit
    def two_writers(out_ptr, ORDERED: gl.constexpr):
        smem = gl.allocate_shared_memory(gl.float32, [16, 16], gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
        bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        mbarrier.init(bar, count=1)
        gl.warp_specialize([(_first, (smem, bar, ORDERED)), (_second, (smem, bar, ORDERED))], [1], [40])
        mbarrier.invalidate(bar)

    return two_writers


@pytest.mark.parametrize("seed", range(4))
def test_two_partitions_writing_one_slot_in_no_order_is_named(seed):
    kernel = _two_writers()
    with pytest.raises(gluon_cpu.ProtocolError, match="two partitions write one slot in no order") as caught:
        with gluon_cpu.launches_simulated(seed=seed):
            kernel[(1,)](torch.zeros(1), ORDERED=False)
    said = str(caught.value)
    assert "_first (default partition)" in said and "_second (worker partition 1)" in said, said
    with gluon_cpu.launches_simulated(seed=seed):  # a barrier orders them: no finding, in any order
        kernel[(1,)](torch.zeros(1), ORDERED=True)


def test_elementwise_and_reduction_ops_a_variant_may_use():
    """convert_layout (layouts are carried), where, exp, sqrt, abs, expand_dims, sum and max: a learner's
    epilogue written with them runs, and gives torch's values."""
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl

    @gluon.jit
    def epilogue(x_ptr, out_ptr, row_ptr):
        layout: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [4, 1], [1, 0])
        other: gl.constexpr = gl.BlockedLayout([1, 1], [32, 1], [1, 4], [0, 1])
        rows = gl.expand_dims(gl.arange(0, 8, layout=gl.SliceLayout(1, layout)), 1)
        cols = gl.expand_dims(gl.arange(0, 16, layout=gl.SliceLayout(0, layout)), 0)
        x = gl.load(x_ptr + rows * 16 + cols)
        y = gl.where(x > 0, gl.exp(x), gl.sqrt(gl.abs(x)))
        y = gl.where((rows == 3) | ~(cols != 5), 1.0 / y, y)  # ==, != and ~, a number over a tensor
        y = gl.convert_layout(y, other)
        gl.store(out_ptr + rows * 16 + cols, gl.convert_layout(y, layout))
        gl.store(row_ptr + gl.arange(0, 8, layout=gl.SliceLayout(1, layout)), gl.sum(y, axis=1) + gl.max(y, axis=1))

    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(0))
    out, row = torch.empty(8, 16), torch.empty(8)
    with gluon_cpu.launches_simulated():
        epilogue[(1,)](x, out, row)
    y = torch.where(x > 0, x.exp(), x.abs().sqrt())
    rows, cols = torch.arange(8)[:, None], torch.arange(16)[None, :]
    y = torch.where((rows == 3) | (cols == 5), 1.0 / y, y)
    assert torch.allclose(out, y) and torch.allclose(row, y.sum(1) + y.amax(1))


def test_a_pointer_argument_has_its_gluon_dtype(tmp_path):
    """``o_ptr.dtype.element_ty`` (what a pointer points to, as Gluon code writes a store's cast) runs in the
    simulator as on a GPU: a correct kernel that casts so was failed with an AttributeError."""
    source = tmp_path / "cast_store.py"
    source.write_text(
        "from triton.experimental import gluon\n"
        "from triton.experimental.gluon import language as gl\n\n\n"
        "@gluon.jit\n"
        "def twice(x_ptr, o_ptr, n, BLOCK: gl.constexpr):\n"
        "    layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])\n"
        "    offs = gl.arange(0, BLOCK, layout=layout)\n"
        "    x = gl.load(x_ptr + offs, mask=offs < n)\n"
        "    gl.store(o_ptr + offs, (x * 2).to(o_ptr.dtype.element_ty), mask=offs < n)\n"
    )
    module = _module(source, "cast_store")
    x = torch.randn(100)
    out = torch.empty(100, dtype=torch.float16)
    with gluon_cpu.launches_simulated(seed=0):
        module.twice[(1,)](x, out, 100, BLOCK=128, num_warps=4)
    assert torch.equal(out, (x * 2).half())


def test_a_kernels_integer_division_rounds_toward_zero_as_on_the_gpu():
    """Gluon's // and % on integers are arith.divsi and arith.remsi (C's rule, toward zero), not Python's floor:
    the simulator's scalars and tensors do the same, so a phase or an index written with Python's rule in mind
    is wrong here as on the GPU. Floats keep floor division."""
    import torch

    from course_lib.gluon_cpu import language as L

    assert (L.Scalar(-1) // 2, L.Scalar(-3) % 2, L.Scalar(7) // -2, L.Scalar(7) % -2) == (0, -1, -3, 1)
    assert (5 // L.Scalar(-2), -5 % L.Scalar(3), L.Scalar(6) // 3, L.Scalar(7) % 3) == (-2, -2, 2, 1)
    assert isinstance(L.Scalar(-1) // 2, L.Scalar)
    ints = L.Value(torch.tensor([-3, -1, 1, 3], dtype=torch.int32))
    assert (ints // 2).data.tolist() == [-1, 0, 0, 1] and (ints % 2).data.tolist() == [-1, -1, 1, 1]
    assert (-7 // L.Value(torch.tensor([2], dtype=torch.int32))).data.tolist() == [-3]
    floats = L.Value(torch.tensor([-3.0, 3.0]))
    assert (floats // 2).data.tolist() == [-2.0, 1.0]
