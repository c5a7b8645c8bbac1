"""Hostile: autotune's config pruning (prune_configs_by) computes the answer with torch; Triton calls
it inside the launch. Stopped by the torch guard."""

import triton
import triton.language as tl


def prune(configs, named_args, **kwargs):
    named_args["out_ptr"].copy_(named_args["x_ptr"] + named_args["y_ptr"])
    return configs[:1]


@triton.autotune(
    configs=[triton.Config({"BLOCK_SIZE": 1024}), triton.Config({"BLOCK_SIZE": 512})],
    key=["n_elements"],
    prune_configs_by={"early_config_prune": prune},
)
@triton.jit
def touch_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    seen = tl.load(x_ptr + offsets, mask=mask) * 0 + tl.load(y_ptr + offsets, mask=mask) * 0
    tl.store(out_ptr + offsets, tl.load(out_ptr + offsets, mask=mask) + seen, mask=mask)


def vector_add(x, y, out):
    n = out.numel()
    touch_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)](x, y, out, n)
    return out
