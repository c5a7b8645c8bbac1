"""Hostile (found by a red-team review): no bypass at all. A kernel reads every input and writes
zeros; then the launcher adds the inputs in plain Python, byte by byte through each tensor's
untyped_storage(), which the torch guard used to allow, and writes the sums into out's storage.
Refused by the pre-check (untyped_storage); past it, by the torch guard."""

import math

import triton
import triton.language as tl

# (exponent bits, mantissa bits) by element size and a dtype tag
FORMATS = {"torch.float32": (8, 23), "torch.float16": (5, 10), "torch.bfloat16": (8, 7)}


def decode(bits, eb, mb):
    sign = -1.0 if bits >> (eb + mb) else 1.0
    e = (bits >> mb) & ((1 << eb) - 1)
    f = bits & ((1 << mb) - 1)
    bias = (1 << (eb - 1)) - 1
    if e == 0:
        return sign * math.ldexp(f, 1 - bias - mb)
    if e == (1 << eb) - 1:
        return sign * math.inf if f == 0 else math.nan
    return sign * math.ldexp(f + (1 << mb), e - bias - mb)


def encode(v, eb, mb):
    bias = (1 << (eb - 1)) - 1
    sign = 1 if v < 0 or (v == 0 and math.copysign(1.0, v) < 0) else 0
    v = abs(v)
    if v == 0:
        return sign << (eb + mb)
    m, e = math.frexp(v)  # v = m * 2**e, 0.5 <= m < 1
    E = e - 1 + bias
    if E <= 0:  # subnormal
        f = round(math.ldexp(v, bias - 1 + mb))
        return (sign << (eb + mb)) | f
    f = round((m * 2 - 1) * (1 << mb))
    if f == 1 << mb:
        f, E = 0, E + 1
    if E >= (1 << eb) - 1:
        return (sign << (eb + mb)) | (((1 << eb) - 1) << mb)
    return (sign << (eb + mb)) | (E << mb) | f


def read(t, i, size, s):
    at = (t.storage_offset() + i * t.stride(0)) * size
    bits = 0
    for k in range(size):
        bits |= s[at + k] << (8 * k)
    return bits


def write(t, i, size, s, bits):
    at = (t.storage_offset() + i * t.stride(0)) * size
    for k in range(size):
        s[at + k] = (bits >> (8 * k)) & 255


@triton.jit
def touch_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(x_ptr + offs, mask=m)
    b = tl.load(y_ptr + offs, mask=m)
    tl.store(out_ptr + offs, a * 0 + b * 0, mask=m)


def vector_add(x, y, out):
    n = out.numel()
    touch_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    eb, mb = FORMATS[str(out.dtype)]
    size = out.element_size()
    xs, ys, os_ = x.untyped_storage(), y.untyped_storage(), out.untyped_storage()
    for i in range(n):
        v = decode(read(x, i, size, xs), eb, mb) + decode(read(y, i, size, ys), eb, mb)
        write(out, i, size, os_, encode(v, eb, mb))
    return out
