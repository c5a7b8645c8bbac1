"""The capstone, step 2: align. W_c = W[:, Ku:] copied so that its rows start on 16-byte boundaries.

W_c is a view of W (M, Ku + Kc): its rows are Ku + Kc elements apart and start Ku elements in. At the
published shape (Ku = 1178, Kc = 866, bf16) rows are 4088 bytes apart and the first starts 2356 bytes
in: no multiple of 16, so no 16-byte loads and no TMA (chapter 08). Even on its own, a row of 866 bf16
is 1732 bytes. A copy whose rows are Kp elements apart, Kp * itemsize a multiple of 16 (872 here,
1744 bytes), zeros between Kc and Kp, is what both need. Chapter 08 measured the two steps apart on
the candidate GEMM: the same pointer kernel took 1.22 ms with rows 866 apart and 0.65 ms at 872 (the
padding's part), and a TMA kernel on the padded rows 0.39 ms (the kernel's part).

Plain PyTorch, no kernel: the grader checks the values, the strides, the alignment and the zeros.
"""

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
    padded = torch.zeros(M, Kp, dtype=w_c.dtype, device=w_c.device)  # (M, Kp): zeros between Kc and Kp
    padded[:, :Kc] = w_c
    return padded[:, :Kc]  # (M, Kc), strides (Kp, 1)
    # END SOLUTION
