"""Wrong on purpose: torch.add into the output, no kernel."""

import torch


def vector_add(x, y, out):
    torch.add(x, y, out=out)
    return out
