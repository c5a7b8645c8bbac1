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
