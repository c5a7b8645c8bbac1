"""The helper the hostile vector_add.py imports: it computes the answer with torch."""


def vector_add(x, y, out):
    out.copy_(x + y)
    return out
