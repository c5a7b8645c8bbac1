"""Wrong on purpose: imports a module that does not exist."""

import triton
import triton_language_typo as tl


def vector_add(x, y, out):
    return out
