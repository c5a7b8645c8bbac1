"""Wrong on purpose: no padding. w_c.contiguous() copies the rows next to each other, Kc elements
apart: 866 bf16 are 1732 bytes, no multiple of 16."""

import torch


def pad_k(w_c):
    """An (M, Kc) tensor equal to w_c whose rows start on 16-byte boundaries: a view of one (M, Kp)
    allocation, Kp * w_c.element_size() a multiple of 16, its first row at a 16-byte boundary,
    columns Kc .. Kp - 1 zero. Any dtype; Kp = Kc when Kc's bytes are a multiple of 16 already."""
    # BEGIN SOLUTION
    # TODO: the padded width Kp: the fewest elements, at least Kc, that make a multiple of 16 bytes;
    # TODO: one zeroed (M, Kp) allocation; copy w_c into its first Kc columns; return that view.
    return w_c.contiguous()  # (M, Kc), strides (Kc, 1)
    # END SOLUTION
