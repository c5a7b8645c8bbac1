"""course_lib.compilation: specialization as the JIT computes it, compiling for sm_90 without a GPU,
reading the generated code, the compile cache, autotuners, and Inductor captures.

Compiles are real (Triton's compiler and ptxas run for an H100/H200 target) and take about 0.1 s
each once the first one in the process has loaded the compiler, so the tests share them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl
from conftest import ROOT

from course_lib import compilation, runtime

EXTRA = [p for p in os.environ.get("COURSE_EXTRA_TRITONS", "").split(":") if p]


@triton.jit
def _square(x):
    return x * x


@triton.jit
def square_kernel(
    x_ptr,  # pointer to x
    out_ptr,  # pointer to out
    n_elements,  # length of both
    BLOCK_SIZE: tl.constexpr,  # elements per program
):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, _square(x), mask=mask)  # a @triton.jit helper: interpreted in CPU mode


@triton.jit
def strided_kernel(
    x_ptr,  # pointer to x
    out_ptr,  # pointer to out
    n_elements,  # elements to copy
    stride,  # distance between elements of x
    BLOCK_SIZE: tl.constexpr,  # elements per program
):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets * stride, mask=mask), mask=mask)


@triton.jit(do_not_specialize=["n_elements"])
def unspecialized_kernel(
    x_ptr,  # pointer to x
    n_elements,  # never specialized: no recompiles when it changes
    BLOCK_SIZE: tl.constexpr,  # elements per program
):
    offsets = tl.arange(0, BLOCK_SIZE)
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n_elements), mask=offsets < n_elements)


BUFFER = torch.zeros(4097)  # (4097,) BUFFER[1:] starts 4 bytes past a 16-byte boundary
ALIGNED, MISALIGNED = BUFFER[:4096], BUFFER[1:]
OUT = torch.zeros(4096)


def by_name(spec):
    return {a.name: a for a in spec}


# --------------------------------------------------------------------------------------------------
# specialization


def test_specialization_marks_alignment_and_multiples_of_16():
    spec = by_name(compilation.specialization(square_kernel, ALIGNED, OUT, 4096, BLOCK_SIZE=1024))
    assert spec["x_ptr"] == compilation.ArgSpec("x_ptr", "*fp32", None, True)
    assert spec["n_elements"].type == "i32" and spec["n_elements"].divisible_by_16
    assert spec["BLOCK_SIZE"] == compilation.ArgSpec("BLOCK_SIZE", "constexpr", 1024)

    spec = by_name(compilation.specialization(square_kernel, MISALIGNED, OUT, 4095, BLOCK_SIZE=1024))
    assert not spec["x_ptr"].divisible_by_16
    assert spec["out_ptr"].divisible_by_16
    assert not spec["n_elements"].divisible_by_16


def test_specialization_makes_an_int_equal_to_1_a_constexpr():
    spec = by_name(compilation.specialization(strided_kernel, ALIGNED, OUT, 4096, 1, BLOCK_SIZE=1024))
    assert spec["stride"].type == "constexpr" and spec["stride"].value == 1
    assert "constexpr" in spec["stride"].describe()
    spec = by_name(compilation.specialization(strided_kernel, ALIGNED, OUT, 4096, 3, BLOCK_SIZE=1024))
    assert spec["stride"] == compilation.ArgSpec("stride", "i32", None, False)


def test_specialization_types_follow_the_values():
    half = torch.zeros(64, dtype=torch.float16)
    spec = by_name(compilation.specialization(square_kernel, half, half, 2**40, BLOCK_SIZE=64))
    assert spec["x_ptr"].type == "*fp16"
    assert spec["n_elements"].type == "i64"


def test_do_not_specialize_is_respected():
    spec = by_name(compilation.specialization(unspecialized_kernel, ALIGNED, 4096, BLOCK_SIZE=16))
    assert spec["n_elements"] == compilation.ArgSpec("n_elements", "i32", None, False)
    assert spec["x_ptr"].divisible_by_16


def test_equal_specializations_mean_one_compiled_kernel():
    keys = {
        tuple(compilation.specialization(square_kernel, ALIGNED, OUT, n, BLOCK_SIZE=1024))
        for n in range(2, 66)  # 4 multiples of 16 among them
    }
    assert len(keys) == 2


# --------------------------------------------------------------------------------------------------
# compiling for sm_90


@pytest.fixture(scope="module")
def compiled():
    """One compile per situation the tests look at."""
    return {
        "aligned": compilation.compile_for_args(square_kernel, ALIGNED, OUT, 4096, BLOCK_SIZE=1024),
        "misaligned": compilation.compile_for_args(square_kernel, MISALIGNED, OUT, 4096, BLOCK_SIZE=1024),
        "odd_length": compilation.compile_for_args(square_kernel, ALIGNED, OUT, 4095, BLOCK_SIZE=1024),
        "stride_1": compilation.compile_for_args(strided_kernel, ALIGNED, OUT, 4096, 1, BLOCK_SIZE=1024),
        "stride_3": compilation.compile_for_args(strided_kernel, ALIGNED, OUT, 4096, 3, BLOCK_SIZE=1024),
    }


def test_every_level_of_code_is_there(compiled):
    k = compiled["aligned"]
    for kind in compilation.IR_KINDS:
        assert compilation.asm(k, kind)
    assert isinstance(compilation.asm(k, "cubin"), bytes)
    assert "sm_90" in compilation.asm(k, "ptx")
    with pytest.raises(KeyError, match="it has: .*ptx"):
        compilation.asm(k, "sass9")


def test_divisibility_turns_scalar_loads_into_16_byte_loads(compiled):
    # 1024 fp32 per program over 4 warps of 32 threads: 8 elements per thread, two 16-byte loads
    assert compilation.load_widths(compilation.asm(compiled["aligned"])) == {16: 2}
    assert compilation.store_widths(compilation.asm(compiled["aligned"])) == {16: 2}
    # a misaligned x: its loads shrink to 4 bytes; out is still aligned, its stores stay wide
    assert compilation.load_widths(compilation.asm(compiled["misaligned"])) == {4: 8}
    assert compilation.store_widths(compilation.asm(compiled["misaligned"])) == {16: 2}
    # a length no multiple of 16: the mask could cut any group of 4, so every access is scalar
    assert compilation.load_widths(compilation.asm(compiled["odd_length"])) == {4: 8}


def test_the_hint_shows_in_ttir(compiled):
    aligned = compilation.lines_with(compilation.asm(compiled["aligned"], "ttir"), r"tt\.func")
    misaligned = compilation.lines_with(compilation.asm(compiled["misaligned"], "ttir"), r"tt\.func")
    assert aligned[0].count("tt.divisibility = 16") == 3  # x_ptr, out_ptr, n_elements
    assert misaligned[0].count("tt.divisibility = 16") == 2


def test_stride_equal_to_1_is_compiled_in(compiled):
    assert compilation.load_widths(compilation.asm(compiled["stride_1"])) == {16: 2}
    assert compilation.load_widths(compilation.asm(compiled["stride_3"])) == {4: 8}


def test_compile_for_takes_explicit_hints():
    signature = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n_elements": "i32"}
    wide = compilation.compile_for(square_kernel, signature, {"BLOCK_SIZE": 1024}, aligned=True)
    narrow = compilation.compile_for(square_kernel, signature, {"BLOCK_SIZE": 1024}, aligned=False)
    pointers_only = compilation.compile_for(
        square_kernel, signature, {"BLOCK_SIZE": 1024}, aligned=["x_ptr", "out_ptr"], num_warps=8
    )
    assert compilation.load_widths(compilation.asm(wide)) == {16: 2}
    assert compilation.load_widths(compilation.asm(narrow)) == {4: 8}
    assert compilation.load_widths(compilation.asm(pointers_only)) == {4: 4}  # 8 warps: 4 elements a thread
    assert pointers_only.metadata.num_warps == 8


def test_compile_for_names_what_is_wrong():
    with pytest.raises(ValueError, match="no argument y_ptr"):
        compilation.compile_for(square_kernel, {"y_ptr": "*fp32"}, {"BLOCK_SIZE": 16})
    with pytest.raises(ValueError, match="out_ptr, n_elements"):
        compilation.compile_for(square_kernel, {"x_ptr": "*fp32"}, {"BLOCK_SIZE": 16})
    signature = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n_elements": "fp32"}
    with pytest.raises(ValueError, match="not: n_elements"):
        compilation.compile_for(square_kernel, signature, {"BLOCK_SIZE": 16}, aligned=["n_elements"])


def test_kernels_still_launch_after_compiling(compiled):
    x = torch.randn(100, device=runtime.device())
    out = torch.empty(100, device=runtime.device())
    square_kernel[(1,)](x, out, 100, BLOCK_SIZE=128)
    assert torch.equal(out, x * x)


@triton.jit
def _row_max_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + tl.program_id(0) * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    tl.store(out_ptr + tl.program_id(0), tl.max(x, axis=0))


def test_kernels_with_triton_library_functions_compile_and_still_run():
    """tl.max is a @jit function of Triton's own, interpreted in CPU mode: compiling a
    kernel that calls it must hand the compiler JITFunctions, and leave the interpreter's in place."""
    x = torch.randn(3, 100, device=runtime.device())
    k = compilation.compile_for_args(_row_max_kernel, x, x, 100, BLOCK=128)
    assert "shfl.sync" in compilation.asm(k, "ptx")  # the reduction across lanes
    out = torch.empty(3, device=runtime.device())
    _row_max_kernel[(3,)](x, out, 100, BLOCK=128)
    assert torch.equal(out, x.max(dim=1).values)


# --------------------------------------------------------------------------------------------------
# reading PTX


@pytest.mark.parametrize(
    ("line", "width"),
    [
        ("@%p1 ld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ];", 16),
        ("ld.global.b32 %r1, [%rd1];", 4),
        ("@%p2 ld.global.v2.b16 { %rs1, %rs2 }, [ %rd2 + 0 ];", 4),
        ("ld.global.nc.L1::evict_last.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ];", 16),
        ("ld.global.b8 %rs1, [%rd1];", 1),
        ("ld.global.v2.f64 {%fd1, %fd2}, [%rd1];", 16),
    ],
)
def test_load_widths_reads_each_form(line, width):
    assert compilation.load_widths(f"  {line}\n  st.global.b32 [%rd9], %r9;\n") == {width: 1}
    assert compilation.store_widths(line) == {}


def test_strip_locations(compiled):
    ttir = compilation.asm(compiled["aligned"], "ttir")
    assert "loc(" in ttir
    stripped = compilation.strip_locations(ttir)
    assert "loc(" not in stripped and "#loc" not in stripped
    assert stripped.count("\n") < ttir.count("\n")
    assert "tt.load" in stripped and "{tt.divisibility = 16 : i32}" in stripped


def test_lines_with_limits():
    text = "a ld.global.b32\nb\nc ld.global.v4.b32\n"
    assert compilation.lines_with(text, r"ld\.global") == ["a ld.global.b32", "c ld.global.v4.b32"]
    assert compilation.lines_with(text, r"ld\.global", limit=1) == ["a ld.global.b32"]


# --------------------------------------------------------------------------------------------------
# the compile cache


@triton.jit
def reciprocal_kernel(x_ptr, out_ptr, RSQRT: tl.constexpr):
    offsets = tl.arange(0, 256)
    d = 1.0 + tl.abs(tl.load(x_ptr + offsets))
    if RSQRT:
        r = tl.math.rsqrt(d)
        t = r * r
    else:
        t = tl.fdiv(1.0, d)
    tl.store(out_ptr + offsets, t)


def test_sass_counts_what_ptx_hides():
    """One PTX division becomes a reciprocal with range checks; rsqrt squared is two instructions."""
    counts = {}
    for rsqrt in (False, True):
        k = compilation.compile_for(reciprocal_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32"}, {"RSQRT": rsqrt})
        text = compilation.sass(k)
        assert "MUFU.RSQ" in text if rsqrt else "MUFU.RCP" in text
        counts[rsqrt] = compilation.sass_opcodes(text)
    assert counts[False]["MUFU"] == counts[True]["MUFU"] == 2  # 256 elements, 128 threads: 2 each
    assert counts[False]["FSETP"] > counts[True]["FSETP"]  # the division's range checks
    assert sum(counts[False].values()) > sum(counts[True].values()) + 4


def test_sass_opcodes_reads_predicated_and_dotted_names():
    text = """
        /*0000*/                   LDC R1, c[0x0][0x28] ;                    /* 0x00000a00ff017b82 */
        /*0050*/              @!P1 FMUL R23, R23, 16777216 ;                 /* 0x4b80000017179820 */
        /*0060*/                   MUFU.RSQ R24, R24 ;                       /* 0x0000001800187308 */
        /*0070*/                   MUFU.EX2 R18, R18 ;                       /* 0x0000001200127308 */
        /*0080*/              @UP0 UIADD3 UR5, UR5, 0x1, URZ ;               /* 0x000000013f050890 */
        .L_x_0:
        /*0090*/                   NOP;                                      /* 0x0000000000007918 */
    """
    assert compilation.sass_opcodes(text) == {"LDC": 1, "FMUL": 1, "MUFU": 2, "UIADD3": 1, "NOP": 1}


def test_sass_needs_a_compiled_kernel():
    with pytest.raises(TypeError, match="no compiled kernel"):
        compilation.sass(object())


def test_cold_compile_fills_the_cache_and_warm_reads_it(tmp_path):
    before = compilation.cache_dir()
    timing = compilation.time_compile(
        lambda: compilation.compile_for_args(square_kernel, ALIGNED, OUT, 4096, BLOCK_SIZE=512)
    )
    assert compilation.cache_dir() == before  # the scratch folder was only in force inside
    assert timing.rewritten == []  # the warm compiles read the cache: they wrote nothing again
    assert timing.warm_s < timing.cold_s  # the best of three warm compiles: a busy moment is not all of it
    suffixes = {Path(name).suffix for name, _ in timing.files}
    assert {".ttir", ".ttgir", ".llir", ".ptx", ".cubin", ".json"} <= suffixes
    assert all(size > 0 for _, size in timing.files)
    assert "cold compile" in str(timing)


def test_time_compile_names_what_a_warm_compile_wrote_again():
    # a compile that misses the cache every time (a key that changes) writes its files again
    calls = []

    def compile_once():
        calls.append(1)
        return compilation.compile_for_args(square_kernel, ALIGNED, OUT, 4096, BLOCK_SIZE=64 << len(calls))

    timing = compilation.time_compile(compile_once)
    assert len(calls) == 1 + compilation.WARM_TRIES
    assert timing.rewritten  # new files for each new key, none of them the cold compile's


def test_using_cache_dir_with_a_given_folder(tmp_path):
    with compilation.using_cache_dir(tmp_path) as folder:
        assert folder == tmp_path and compilation.cache_dir() == tmp_path
        compilation.compile_for_args(square_kernel, ALIGNED, OUT, 4096, BLOCK_SIZE=256)
    names = [name for name, _ in compilation.cache_listing(tmp_path)]
    assert any(name.endswith("square_kernel.ptx") for name in names)


def test_jit_cache_keys_refuses_in_cpu_mode():
    if runtime.is_gpu():
        pytest.skip("CPU mode only")
    with pytest.raises(RuntimeError, match="no JIT cache"):
        compilation.jit_cache_keys(square_kernel)


# --------------------------------------------------------------------------------------------------
# autotuners


def test_autotuners_in_finds_them_under_heuristics():
    configs = [triton.Config({"BLOCK_SIZE": 16}), triton.Config({"BLOCK_SIZE": 32})]
    tuned = triton.autotune(configs=configs, key=["n_elements"])(unspecialized_kernel)
    wrapped = triton.heuristics({"BLOCK_SIZE": lambda args: 16})(unspecialized_kernel)
    both = triton.heuristics({})(tuned)
    found = compilation.autotuners_in({"tuned": tuned, "plain": unspecialized_kernel, "h": wrapped, "both": both})
    assert set(found) == {"tuned", "both"}
    assert found["both"] is tuned
    assert compilation.python_function(both) is compilation.python_function(unspecialized_kernel)
    assert compilation.describe_config(configs[1]) == "BLOCK_SIZE=32, num_warps=4, num_stages=3"


# --------------------------------------------------------------------------------------------------
# torch.compile captures

INDUCTOR_CODE = """
from torch._inductor.runtime import triton_helpers
triton_poi_fused_add_gelu_0 = async_compile.triton('triton_poi_fused_add_gelu_0', \'\'\'
import triton
@triton.jit
def triton_poi_fused_add_gelu_0(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
\'\'\', device_str='cuda')
"""


def test_triton_kernels_in_inductor_code():
    kernels = compilation.triton_kernels_in(INDUCTOR_CODE)
    assert list(kernels) == ["triton_poi_fused_add_gelu_0"]
    assert kernels["triton_poi_fused_add_gelu_0"].startswith("import triton")
    assert "xoffset = tl.program_id(0) * XBLOCK" in kernels["triton_poi_fused_add_gelu_0"]


def test_capture_needs_a_gpu():
    if runtime.is_gpu():
        pytest.skip("CPU mode only")
    with pytest.raises(RuntimeError, match="needs a GPU"):
        compilation.capture_inductor_code()


def test_recorded_capture_is_read_with_its_path(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_ROOT", str(tmp_path))
    assert compilation.recorded_inductor_capture() is None
    (tmp_path / "results").mkdir()
    record = {"meta": {"gpu": "NVIDIA H200"}, "code": INDUCTOR_CODE, "kernels": {}}
    (tmp_path / "results" / compilation.INDUCTOR_RECORD).write_text(json.dumps(record))
    got = compilation.recorded_inductor_capture()
    assert got["meta"]["gpu"] == "NVIDIA H200"
    assert got["path"] == f"results/{compilation.INDUCTOR_RECORD}"


def test_bias_gelu_is_gelu_of_the_sum():
    x, bias = torch.randn(3, 5), torch.randn(5)
    expected = torch.nn.functional.gelu(x + bias, approximate="tanh")
    assert torch.equal(compilation.bias_gelu(x, bias), expected)


@pytest.mark.skipif(not runtime.is_gpu(), reason="needs a GPU")
def test_capture_on_the_gpu(tmp_path):
    record = compilation.capture_inductor_code(tmp_path / "capture.json", shape=(256, 512))
    assert record["kernels"], record["code"][:2000]
    assert json.loads((tmp_path / "capture.json").read_text())["meta"]["gpu"] == runtime.gpu_info().name


# --------------------------------------------------------------------------------------------------
# every supported Triton version

VERSION_SCRIPT = """
import course_lib, torch, triton
import triton.language as tl
from course_lib import compilation as c

@triton.jit
def k(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2, mask=mask)

b = torch.zeros(4097)
for x, n in ((b[:4096], 4096), (b[1:], 4096), (b[:4096], 4095), (b[:4096], 1)):
    ptx = c.asm(c.compile_for_args(k, x, b[:4096], n, BLOCK_SIZE=1024))
    print(triton.__version__, sorted(c.load_widths(ptx).items()))
"""


@pytest.mark.skipif(not EXTRA, reason="COURSE_EXTRA_TRITONS not set (CI sets it)")
@pytest.mark.parametrize("triton_dir", EXTRA, ids=[Path(p).name for p in EXTRA])
def test_compiling_on_every_triton_version(triton_dir, tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([triton_dir, str(ROOT)]), COURSE_MODE="cpu")
    env["TRITON_CACHE_DIR"] = str(tmp_path / "cache")
    script = tmp_path / "compile_on_this_version.py"  # a file: Triton reads a kernel's source back
    script.write_text(VERSION_SCRIPT)
    run = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.strip().splitlines()
    version = Path(triton_dir).name.removeprefix("triton-")
    assert lines == [
        f"{version} [(16, 2)]",  # aligned pointer, length a multiple of 16
        f"{version} [(4, 8)]",  # misaligned pointer
        f"{version} [(4, 8)]",  # length 4095
        f"{version} [(4, 8)]",  # length 1: a constexpr, every lane but the first masked off
    ], run.stdout
