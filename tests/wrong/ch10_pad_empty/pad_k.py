"""Wrong on purpose: the padding is left as allocated. torch.empty gives whatever the memory held, so
columns Kc .. Kp - 1 hold garbage (zero only by luck, when the pages are fresh from the system)."""

import torch


def pad_k(w_c):
    """An (M, Kc) tensor equal to w_c whose rows start on 16-byte boundaries: a view of one (M, Kp)
    allocation, Kp * w_c.element_size() a multiple of 16, its first row at a 16-byte boundary,
    columns Kc .. Kp - 1 zero. Any dtype; Kp = Kc when Kc's bytes are a multiple of 16 already."""
    # BEGIN SOLUTION
    # TODO: the padded width Kp: the fewest elements, at least Kc, that make a multiple of 16 bytes;
    # TODO: one zeroed (M, Kp) allocation; copy w_c into its first Kc columns; return that view.
    M, Kc = w_c.shape
    per_16 = 16 // w_c.element_size()  # elements in 16 bytes: 8 for bf16 and fp16, 4 for fp32
    Kp = (Kc + per_16 - 1) // per_16 * per_16  # 866 -> 872 in bf16
    padded = torch.empty(M, Kp, dtype=w_c.dtype, device=w_c.device)  # (M, Kp)
    padded[:, :Kc] = w_c
    return padded[:, :Kc]  # (M, Kc), strides (Kp, 1)
    # END SOLUTION


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
