"""Wrong on purpose: the launcher launches nothing and writes nothing."""


def vector_add(x, y, out):
    return out
