"""Wrong on purpose: torch does the work in the launcher; no kernel at all."""


def vector_add(x, y, out):
    out.copy_(x + y)
    return out
