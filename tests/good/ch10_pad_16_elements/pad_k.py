"""Right, another way: the padded width rounded up to a multiple of 16 elements (880 for 866 bf16,
more than the 872 that 16 bytes need) and made by torch.nn.functional.pad, which allocates, zeroes
and copies in one call. Only the bytes matter: this passes too."""

import torch


def pad_k(w_c):
    """An (M, Kc) tensor equal to w_c whose rows start on 16-byte boundaries: a view of one (M, Kp)
    allocation, Kp * w_c.element_size() a multiple of 16, its first row at a 16-byte boundary,
    columns Kc .. Kp - 1 zero. Any dtype; Kp = Kc when Kc's bytes are a multiple of 16 already."""
    # BEGIN SOLUTION
    # TODO: the padded width Kp: the fewest elements, at least Kc, that make a multiple of 16 bytes;
    # TODO: one zeroed (M, Kp) allocation; copy w_c into its first Kc columns; return that view.
    M, Kc = w_c.shape
    Kp = (Kc + 15) // 16 * 16  # a multiple of 16 elements: 32 or 64 bytes
    return torch.nn.functional.pad(w_c, (0, Kp - Kc))[:, :Kc]  # (M, Kc), strides (Kp, 1)
    # END SOLUTION
