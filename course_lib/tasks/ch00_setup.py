"""Chapter 00: the first check. One line of a copy kernel to write."""

from __future__ import annotations

import torch

from . import Case, SpeedTiers, TaskSpec, elementwise_cases, nbytes, output_like, random_tensor, register


def _inputs(case: Case, gen: torch.Generator) -> dict:
    return {"x": random_tensor(case, gen), "out": output_like(case, gen)}


def _reference(x: torch.Tensor) -> torch.Tensor:
    return x.clone()  # read N elements; write N elements


register(
    TaskSpec(
        name="vector_copy",
        speed=SpeedTiers(case=Case((64 * 2**20,), torch.float32, "timed")),
        chapter="00",
        title="Copy a vector (your first check)",
        entry="vector_copy",
        make_inputs=_inputs,
        reference=_reference,
        cases=lambda mode: elementwise_cases(mode, dtypes=(torch.float32, torch.float16)),
        bytes_moved=lambda case: nbytes(case, 2),
        flops=lambda case: 0,
        bench_cases=[Case((256 * 2**20,), torch.float32, "bench")],
        hints=[
            "The kernel already loads this program's block into `x`. What is left is to write it to "
            "the output at the same offsets.",
            "Use tl.store(pointer, value, mask=...). The pointers are out_ptr + offsets, and the same "
            "mask as the load keeps the last block inside the tensor.",
        ],
    )
)
