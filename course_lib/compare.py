"""Compare a kernel's output with the reference and say plainly what is wrong.

The one notion of "correct" in the course: the grader and the benchmarks both judge an output here.
It also owns the poison, the marked NaN an output is filled with before a launch, so that "never
written" and "computed as NaN" can be told apart. It imports nothing of the course but the runtime.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Tolerance:
    rtol: float  # elementwise: |got - ref| <= atol + rtol * |ref|
    atol: float
    norm: float  # ||got - ref|| / ||ref|| over the whole output


# The poison is a NaN with a payload of its own, so "never written" (these bits still there) and
# "computed as NaN" (a GPU or numpy makes a canonical NaN, other bits) can be told apart.
_POISON_BITS = {
    "float32": (0x7FB0DEAD, torch.int32),
    "float16": (0x7DAD, torch.int16),
    "bfloat16": (0x7FAD, torch.int16),
}


def _poison_value(bits: int) -> int:
    return bits - (1 << 32 if bits >= 1 << 31 else 0)


def poison(t: torch.Tensor) -> None:
    """Fill a fresh output with a value no correct kernel leaves there (a marked NaN for floats)."""
    with torch.no_grad():
        name = str(t.dtype).replace("torch.", "")
        if name in _POISON_BITS:
            bits, int_type = _POISON_BITS[name]
            # a same-size dtype view works for strided views too (rows of a wider matrix)
            t.view(int_type).fill_(_poison_value(bits))
        elif t.dtype.is_floating_point or t.dtype.is_complex:
            t.fill_(float("nan"))
        elif t.dtype == torch.bool:
            return
        else:
            t.fill_(torch.iinfo(t.dtype).min)


def still_poisoned(t: torch.Tensor) -> torch.Tensor:
    """Boolean tensor: which elements of ``t`` still hold the poison (were never written)."""
    name = str(t.dtype).replace("torch.", "")
    if name in _POISON_BITS:
        bits, int_type = _POISON_BITS[name]
        return t.contiguous().view(int_type) == _poison_value(bits)
    if t.dtype.is_floating_point:
        return torch.isnan(t)
    if t.dtype == torch.bool:
        return torch.zeros_like(t)
    return t == torch.iinfo(t.dtype).min


def close_enough(got: torch.Tensor, expected: torch.Tensor, tol: Tolerance) -> bool:
    """The verdict alone, without the report (benchmarks check their output with it)."""
    return compare(got, expected, tol, poisoned=False).ok


@dataclass
class Verdict:
    ok: bool
    finding: str  # one line: what the comparison found
    details: list[str]  # the report, line by line
    # the comparison's guess at why, where its figures suggest one ("precision too low"): apart from the
    # finding, so that a task's diagnosis, which names the mistake, can leave it out
    cause: str = ""

    @property
    def summary(self) -> str:
        """The finding and the guess at its cause, in one line."""
        return f"{self.finding}: {self.cause}" if self.cause else self.finding


def _fmt(v: float) -> str:
    if v != v:
        return "nan"
    return f"{v:.6g}"


def count_of(n: int, one: str, many: str) -> str:
    """'1 element was', '3 elements were': a count with its noun (and verb) agreeing."""
    return f"{n} {one if n == 1 else many}"


def _of(k: int, n: int, verb: str) -> str:
    """'3 of 1000 elements are', and for a one-element output '1 of 1 element is' (``verb``: are, differ)."""
    if n == 1:
        return f"{k} of 1 element {'is' if verb == 'are' else verb + 's'}"
    return f"{k} of {n} elements {verb}"


def _index(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    idx = []
    for s in reversed(shape):
        idx.append(flat % s if s else 0)
        flat //= s if s else 1
    return tuple(reversed(idx))


def compare(got: torch.Tensor, expected: torch.Tensor, tol: Tolerance, poisoned: bool = True) -> Verdict:
    """``expected`` is the float64 reference; ``got`` the kernel's output (any float dtype).

    With ``poisoned``, the output was filled with the grader's marked NaN before the launch, so
    elements still holding it were never written; other NaNs were computed."""
    where = expected.device  # on a GPU for the benchmarks' large outputs, on the CPU for the grader
    unwritten = (
        still_poisoned(got.detach().to(where)).reshape(-1)
        if poisoned
        else torch.zeros(got.numel(), dtype=torch.bool, device=where)
    )
    g = got.detach().to(where, torch.float64).reshape(-1)
    e = expected.detach().to(where, torch.float64).reshape(-1)
    shape = tuple(got.shape)
    n = g.numel()
    if n == 0:
        return Verdict(True, "matches the reference (both empty)", [])
    nan = torch.isnan(g)
    same_inf = torch.isinf(g) & (g == e)  # an infinity the reference has too, same sign
    inf = torch.isinf(g) & ~same_inf
    finite = ~(nan | torch.isinf(g) | torch.isinf(e))
    diff = torch.where(finite, (g - e).abs(), torch.zeros_like(g))
    bad = ~(diff <= tol.atol + tol.rtol * e.abs()) & finite
    bad |= nan | inf | (torch.isinf(e) & ~same_inf)  # NaN never passes
    ref_norm = e[finite].norm().item() if finite.any() else 0.0
    err_norm = (g[finite] - e[finite]).norm().item() if finite.any() else 0.0
    rel_norm = err_norm / ref_norm if ref_norm > 0 else err_norm
    # the norm's limit is relative to the reference's norm, taken as at least atol on every element: on
    # an output of values near zero (GELU's far tail, 8e-16 at a (1, 1) case) a float32 kernel's error of
    # 4e-17 is 6% of the reference, and nothing at all on the scale the tolerance calls zero
    norm_ok = err_norm <= tol.norm * max(ref_norm, tol.atol * int(finite.sum()) ** 0.5)
    n_bad = int(bad.sum())
    max_err = diff.max().item()
    if n_bad == 0 and norm_ok:
        return Verdict(True, "matches the reference", [f"max abs error {_fmt(max_err)}"])

    details = []
    n_nan = int(nan.sum())
    n_unwritten = int(unwritten.sum())
    n_computed_nan = n_nan - n_unwritten
    if n_bad:
        details.append(f"{_of(n_bad, n, 'differ')} from the reference ({100.0 * n_bad / n:.3g}%).")
    if n_unwritten:
        first = _index(int(torch.nonzero(unwritten)[0]), shape)
        details.append(
            f"{count_of(n_unwritten, 'element was', 'elements were')} never written (they still hold the NaN the "
            "grader put there "
            f"before the launch); the first at index {first}."
        )
    if n_computed_nan:
        first = _index(int(torch.nonzero(nan & ~unwritten)[0]), shape)
        details.append(
            f"{count_of(n_computed_nan, 'element is', 'elements are')} NaN computed by the kernel; the first at index "
            f"{first}."
        )
    inf_vs_finite = int((torch.isinf(g) & ~torch.isinf(e)).sum())
    if inf_vs_finite:
        details.append(f"{count_of(inf_vs_finite, 'element is', 'elements are')} inf where the reference is finite.")
    if int(inf.sum()) > inf_vs_finite:
        details.append(
            f"{count_of(int(inf.sum()) - inf_vs_finite, 'element is', 'elements are')} infinite with the other "
            "sign than the reference."
        )
    if finite.any():
        worst = int(torch.argmax(torch.where(finite, diff, torch.zeros_like(diff))))
        details.append(
            f"max abs error {_fmt(diff[worst].item())} at index {_index(worst, shape)}; "
            f"relative-norm error {_fmt(rel_norm)} (limit {tol.norm:g}); "
            f"elementwise limit {tol.atol:g} + {tol.rtol:g} * |expected|."
        )
    rows = torch.nonzero(bad).reshape(-1)[:8].tolist()
    if rows:
        details.append("first mismatches:")
        details.append(f"  {'index':<18}{'yours':>14}{'expected':>14}{'abs error':>14}")
        for r in rows:
            details.append(
                f"  {str(_index(r, shape)):<18}{_fmt(g[r].item()):>14}{_fmt(e[r].item()):>14}"
                f"{_fmt(diff[r].item() if finite[r] else abs(g[r].item() - e[r].item())):>14}"
            )
    cause = ""
    if n_unwritten == n:
        finding = "no element of the output was written (all still NaN)"
    elif n_unwritten:
        finding = f"{n_unwritten} of {n} output elements were never written (still NaN)"
        pattern = unwritten_pattern(unwritten, shape)
        if pattern:
            finding += f": {pattern}"
    elif n_computed_nan:
        finding = (
            f"{_of(n_computed_nan, n, 'are')} NaN computed by the kernel (an overflow, inf - inf, 0/0?), "
            f"{n_bad} wrong in all"
        )
    elif n_bad == 0:
        finding = f"close elementwise but the relative-norm error {_fmt(rel_norm)} exceeds {tol.norm:g}"
        cause = "precision too low (is something computed in a lower precision?)"
    elif not int(inf.sum()) and rel_norm < max(100 * tol.norm, 1.6e-2):  # up to about bf16 rounding
        finding = f"{_of(n_bad, n, 'are')} off by more than the tolerance (max abs error {_fmt(max_err)})"
        cause = "precision too low, or a slightly wrong formula"
    elif int(inf.sum()) == n_bad:  # every wrong element is infinite: the finite error says nothing
        finding = f"{_of(n_bad, n, 'are')} wrong, every one of them infinite (a division by zero, or an overflow?)"
    elif int(inf.sum()):
        finding = (
            f"{_of(n_bad, n, 'are')} wrong, {int(inf.sum())} of them infinite "
            f"(max abs error of the finite ones {_fmt(max_err)})"
        )
    else:
        finding = f"{_of(n_bad, n, 'are')} wrong (max abs error {_fmt(max_err)})"
    return Verdict(False, finding, details, cause)


def unwritten_pattern(unwritten: torch.Tensor, shape: tuple[int, ...]) -> str | None:
    """Where the never-written elements are, when they form a shape that points at a cause: the end
    of a vector, whole rows at the bottom of a matrix, or the same columns of every row."""
    u = unwritten.reshape(-1)
    if len(shape) == 1 or (len(shape) == 2 and shape[0] == 1):
        written = int((~u).sum())
        if written and bool((~u[:written]).all()):  # a written prefix, then nothing
            return (
                f"only elements 0 to {written - 1} were written: the grid, a mask or the offsets stop there, or "
                "every program writes that same range (is the program id part of the offsets?)"
            )
        return None
    if len(shape) != 2:
        return None
    rows, cols = shape
    u2 = u.reshape(rows, cols)
    whole_rows = u2.all(dim=1)
    if bool(whole_rows.any()) and bool((u2 == whole_rows[:, None]).all()):
        first = int(torch.nonzero(whole_rows)[0])
        if bool(whole_rows[first:].all()):
            return (
                f"rows {first} to {rows - 1} were never written at all: the grid does not reach them, or the "
                "program id does not become the right row position"
            )
        return f"{int(whole_rows.sum())} whole rows were never written, the first row {first}"
    same_cols = bool((u2 == u2[0:1]).all())
    if same_cols:
        missing = torch.nonzero(u2[0]).reshape(-1)
        first = int(missing[0])
        if missing.numel() == cols - first:
            return (
                f"in every row, columns {first} to {cols - 1} were never written: the programs for those "
                "columns never ran, or all wrote the first columns (how does the program id become a "
                "column position? On a 1-D grid, tl.program_id(1) is always 0)"
            )
        return f"the same {missing.numel()} columns of every row were never written, the first column {first}"
    return None
