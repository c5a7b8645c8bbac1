# Exercise file for task `pad_k`: generated from solutions/pad_k.py by
# `python -m course_lib sync-exercises`. Replace each TODO stub with your code, then run
# `python -m course_lib check pad_k`. Your edits are never overwritten by sync-exercises.
"""The capstone, step 2: align. W_c = W[:, Ku:] copied so that its rows start on 16-byte boundaries.

W_c is a view of W (M, Ku + Kc): its rows are Ku + Kc elements apart and start Ku elements in. At the
published shape (Ku = 1178, Kc = 866, bf16) rows are 4088 bytes apart and the first starts 2356 bytes
in: no multiple of 16, so no 16-byte loads and no TMA (chapter 08). Even on its own, a row of 866 bf16
is 1732 bytes. A copy whose rows are Kp elements apart, Kp * itemsize a multiple of 16 (872 here,
1744 bytes), zeros between Kc and Kp, is what both need: chapter 08 measured the candidate GEMM at
1.23 ms with rows 866 apart and 0.39 ms at 872.

Plain PyTorch, no kernel: the grader checks the values, the strides, the alignment and the zeros.
"""

import torch


def pad_k(w_c):
    """An (M, Kc) tensor equal to w_c whose rows start on 16-byte boundaries: a view of one (M, Kp)
    allocation, Kp * w_c.element_size() a multiple of 16, its first row at a 16-byte boundary,
    columns Kc .. Kp - 1 zero. Any dtype; Kp = Kc when Kc's bytes are a multiple of 16 already."""
    # TODO: the padded width Kp: the fewest elements, at least Kc, that make a multiple of 16 bytes;
    # TODO: one zeroed (M, Kp) allocation; copy w_c into its first Kc columns; return that view.
    raise NotImplementedError("not implemented yet: pad_k in exercises/pad_k.py")


# --------------------------------------------------------------------------------------------------
# Given: how the grader calls pad_k (keep it as it is). The grader's own process makes each case's W
# and sends it as plain numbers; run_case rebuilds it here, on the CPU, passes its view W[:, ku:] to
# pad_k and sends back the result's dtype, shape, strides, alignment, whether it shares W's memory, and
# the bytes of its rows with what lies between them (the padding). The grader judges them.

_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def _tensor(data):
    return torch.tensor(data["values"], dtype=torch.float64).to(_DTYPES[data["dtype"]]).reshape(data["shape"])


def run_case(w, ku):
    w = _tensor(w)
    padded = pad_k(w[:, ku:])
    if not isinstance(padded, torch.Tensor):
        return ["not a tensor", str(type(padded))]
    room = padded.untyped_storage().nbytes() // padded.element_size() - padded.storage_offset()
    span = padded.stride(0) * padded.shape[0] if padded.dim() == 2 else padded.numel()
    rows = padded.as_strided((max(0, min(span, room)),), (1,))  # the rows and the padding between them
    data = rows.detach().to("cpu").contiguous().view(torch.uint8).numpy().tobytes()
    shares = padded.untyped_storage().data_ptr() == w.untyped_storage().data_ptr()
    return [str(padded.dtype), list(padded.shape), list(padded.stride()), padded.data_ptr() % 16, shares, data.hex()]
