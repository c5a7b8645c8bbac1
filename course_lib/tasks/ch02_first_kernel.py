"""Chapter 02: the first kernels. Programs, blocks, offsets, masks and grids."""

from __future__ import annotations

import torch

from . import Case, SpeedTiers, TaskSpec, elementwise_cases, nbytes, output_like, random_tensor, register


def _add_inputs(case: Case, gen: torch.Generator) -> dict:
    return {"x": random_tensor(case, gen), "y": random_tensor(case, gen), "out": output_like(case, gen)}


def _add_reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + y  # read 2N elements; write N elements


register(
    TaskSpec(
        name="vector_add",
        speed=SpeedTiers(case=Case((64 * 2**20,), torch.float32, "timed")),
        chapter="02",
        title="Add two vectors, one block per program",
        entry="vector_add",
        make_inputs=_add_inputs,
        reference=_add_reference,
        cases=elementwise_cases,
        bytes_moved=lambda case: nbytes(case, 3),
        flops=lambda case: case.shape[0],
        bench_cases=[Case((256 * 2**20,), torch.float32, "bench")],
        hints=[
            "Each program handles BLOCK_SIZE elements. Program `pid = tl.program_id(axis=0)` starts at "
            "element pid * BLOCK_SIZE; `tl.arange(0, BLOCK_SIZE)` gives the positions inside the block.",
            "The last block runs past the end when n_elements is no multiple of BLOCK_SIZE. Build "
            "`mask = offsets < n_elements` and pass it to every tl.load and tl.store.",
            "In the launcher the grid is the number of programs: triton.cdiv(n_elements, BLOCK_SIZE). "
            "Launch with add_kernel[grid](x, y, out, n_elements, BLOCK_SIZE=...).",
        ],
    )
)


def scaled_add_inputs(case: Case, gen: torch.Generator) -> dict:
    alpha = float(torch.empty((), device=gen.device).uniform_(-2.0, 2.0, generator=gen))
    return {
        "alpha": alpha,
        "x": random_tensor(case, gen),
        "y": random_tensor(case, gen),
        "out": output_like(case, gen),
    }


def scaled_add_reference(alpha: float, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return alpha * x + y  # read 2N elements; write N elements


def _scaled_cases(mode: str) -> list[Case]:
    cases = elementwise_cases(mode)
    # Every length here is odd and every tensor starts one element into its buffer: no block size
    # divides them and no pointer is 16-byte aligned, which is what the exercise is about.
    for n, dt in ((1, torch.float32), (7, torch.float16), (1023, torch.float32), (65_537, torch.bfloat16)):
        cases.append(Case((n,), dt, "misaligned", misaligned=True))
    return cases


register(
    TaskSpec(
        name="scaled_add",
        speed=SpeedTiers(case=Case((64 * 2**20,), torch.float32, "timed")),
        chapter="02",
        title="alpha * x + y on lengths no block divides, from misaligned pointers",
        entry="scaled_add",
        make_inputs=scaled_add_inputs,
        reference=scaled_add_reference,
        cases=_scaled_cases,
        bytes_moved=lambda case: nbytes(case, 3),
        flops=lambda case: 2 * case.shape[0],
        bench_cases=[Case((256 * 2**20,), torch.float32, "bench")],
        hints=[
            "Start from your vector_add: the structure (program id, offsets, mask, grid) is the same; "
            "alpha is a plain scalar argument of the kernel.",
            "Compute in float32 whatever the input dtype: `x.to(tl.float32)`, then cast the result back "
            "with `.to(out_ptr.dtype.element_ty)` before the store. bf16 arithmetic loses too much.",
            "A misaligned pointer (x[1:]) is still a valid pointer: nothing in the kernel changes. If a "
            "case fails only when misaligned, look for an offset that assumes the tensor starts at 0.",
        ],
    )
)
