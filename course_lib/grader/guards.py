"""The launcher torch guard: while a learner's launcher runs (outside kernel launches), torch may
allocate, make views and answer shape questions, nothing else. Fresh ``torch.empty`` outputs are
poisoned, so an element no kernel writes cannot pass by luck.

This runs in the submission's process, so it is a teacher, not a judge: it names the line that
computes with torch. What a launcher cannot hide from is checked elsewhere: the static pre-check
(``precheck``) rejects the switches that turn torch function modes off, and in the interpreter the
data-flow record (``course_lib.hooks.FlowRecord``) sees whether kernels read the inputs and wrote
the outputs.
"""

from __future__ import annotations

import os
import sys

from ..compare import poison
from ..hooks import called_from_launcher, current_watch


class TorchComputeInLauncher(Exception):
    """The launcher computed with torch instead of (or besides) launching a kernel."""


# Allocation, views and layout, shape and metadata queries: what a launcher may ask torch for.
ALLOWED_IN_LAUNCHER = frozenset(
    """
    empty empty_like empty_strided zeros zeros_like ones ones_like full full_like
    new_empty new_zeros new_ones new_full new_empty_strided
    view view_as reshape reshape_as flatten unflatten squeeze unsqueeze permute transpose t T mT
    expand expand_as as_strided narrow select __getitem__ unbind split chunk contiguous detach
    size stride numel nelement dim ndim shape dtype device is_contiguous data_ptr element_size
    itemsize nbytes storage_offset is_cuda is_cpu layout requires_grad is_leaf
    is_floating_point is_complex __len__ __hash__ _version grad_fn
    names ravel swapaxes swapdims movedim moveaxis broadcast_to diagonal tensor_split hsplit vsplit
    view_as_real view_as_complex get_device is_same_size dim_order is_set_to
    promote_types result_type can_cast is_grad_enabled _set_grad_enabled set_grad_enabled
    """.split()
)
_POISONED_ALLOCATIONS = frozenset("empty empty_like empty_strided new_empty new_empty_strided".split())
# Views that copy when the tensor's layout does not allow a view (a transpose made contiguous, the
# reshape of a strided tensor) or the index asks for a gather (x[list], x[mask]): a copy is a pass
# over memory that torch makes, not the kernel.
_VIEWS_UNLESS_COPIED = frozenset("contiguous reshape reshape_as flatten unflatten ravel __getitem__".split())
# Printing a tensor in the launcher works, but shows no values: text is a way to read the data on the
# host (and compute with it in Python) that no kernel sees. Print values from a notebook, or with
# tl.device_print inside the kernel.
_SHOWN_WITHOUT_VALUES = frozenset("__repr__ __str__ __format__".split())


def _described(t) -> str:
    return (
        f"tensor(shape={tuple(t.shape)}, dtype={t.dtype}, device={t.device}; values not shown in the grader's "
        "launcher: print them from a notebook, or with tl.device_print in the kernel)"
    )


def _copied(args, out) -> bool:
    """Whether ``out`` of a view-or-copy call holds other memory than its tensor argument."""
    import torch

    source = args[0] if args else None
    if type(source) is not torch.Tensor or type(out) is not torch.Tensor or source.numel() == 0:
        return False
    return out.untyped_storage().data_ptr() != source.untyped_storage().data_ptr()


def _plain_types() -> frozenset:
    """The exact types a launcher's torch call may take as arguments (containers are looked into)."""
    import numpy as np
    import torch

    return frozenset(
        {int, float, bool, complex, str, bytes, type(None), type(...), slice, torch.Tensor, torch.Size,
         torch.dtype, torch.device, torch.layout, torch.memory_format, tuple, list, dict}
        | set(np.sctypeDict.values())
    )  # fmt: skip


def _odd_arguments(args: tuple, kwargs: dict, plain: frozenset, atomic: frozenset) -> str | None:
    """``_odd_argument`` of a call's arguments, with a fast path for the common call whose arguments
    are all tensors, numbers, strings, dtypes or None."""
    for value in args:
        if type(value) not in atomic and (odd := _odd_argument(value, plain, 1)) is not None:
            return odd
    for key, value in kwargs.items():
        for item in (key, value):
            if type(item) not in atomic and (odd := _odd_argument(item, plain, 1)) is not None:
                return odd
    return None


def _odd_argument(value, plain: frozenset, depth: int = 0) -> str | None:
    """The first argument (looked into tuples, lists, dicts and slices) of a type other than the plain ones:
    its methods would run as learner code inside torch's own call, where the guard does not see."""
    kind = type(value)
    if kind not in plain:
        return f"`{kind.__name__}` object"
    if depth > 8:
        return "structure nested too deep"
    items = ()
    if kind is dict:
        items = (*value.keys(), *value.values())
    elif kind is slice:
        items = (value.start, value.stop, value.step)
    elif isinstance(value, (tuple, list)):  # tuple, list, torch.Size (the only tuple subclass allowed)
        items = value
    for item in items:
        odd = _odd_argument(item, plain, depth + 1)
        if odd is not None:
            return odd
    return None


_NAMES: dict = {}


def _short_name(func) -> str:
    """The torch function's short name (``empty_like``, ``data_ptr``), remembered per function: the
    guard runs on every torch call of a timed launcher, so it must cost little."""
    try:
        return _NAMES[func]
    except (KeyError, TypeError):
        pass
    from torch.overrides import resolve_name

    name = resolve_name(func) or getattr(func, "__name__", repr(func))
    if name.endswith(".__get__"):
        name = name[: -len(".__get__")]
    name = name.rsplit(".", 1)[-1]
    try:
        if len(_NAMES) < 4096:
            _NAMES[func] = name
    except TypeError:  # an unhashable callable: named each time
        pass
    return name


def _where_in(paths: tuple[str, ...]) -> str:
    """file:line of the innermost frame that belongs to one of ``paths`` (the learner's file)."""
    frame = sys._getframe(2)
    while frame is not None:
        filename = frame.f_code.co_filename
        if any(os.path.samefile(filename, p) for p in paths if os.path.exists(filename)):
            import linecache

            line = linecache.getline(filename, frame.f_lineno).strip()
            return f"{os.path.basename(filename)}:{frame.f_lineno}: {line}"
        frame = frame.f_back
    return "the launcher"


def launcher_torch_guard(
    allowed: frozenset[str] = ALLOWED_IN_LAUNCHER, learner_files: tuple[str, ...] = (), poison_allocations: bool = True
):
    """A torch function mode that raises TorchComputeInLauncher on any torch call outside ``allowed``.

    Calls Triton makes inside a launch (its own bookkeeping) pass through; calls made there by the
    learner's code (a heuristic, a hook, a kernel body the interpreter runs as Python) do not.
    ``poison_allocations``: what the launcher allocates is filled with NaN (a graded case: an output
    element no kernel wrote shows); off for timed calls, where the fill would be a pass over memory
    that the learner's launcher never asked for.
    """
    import torch
    from torch.overrides import TorchFunctionMode

    files = frozenset(learner_files)
    plain = _plain_types()
    atomic = plain - {tuple, list, dict, slice, torch.Size}

    class _Guard(TorchFunctionMode):
        # the first refusal, kept: a launcher that catches the error (try torch, fall back to a kernel)
        # is still told, and its call fails
        violation: str | None = None

        def _refuse(self, message: str):
            if self.violation is None:
                self.violation = message
            raise TorchComputeInLauncher(message)

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            w = current_watch()
            if w is not None and w.depth > 0 and not called_from_launcher(sys._getframe(1), files):
                return func(*args, **kwargs)
            name = _short_name(func)
            if name in _SHOWN_WITHOUT_VALUES and args and hasattr(args[0], "shape"):
                return _described(args[0])
            if name not in allowed and not (name == "type" and len(args) == 1 and not kwargs):  # x.type(): a string
                self._refuse(
                    f"the launcher called torch `{name}` ({_where_in(learner_files)}). A launcher may "
                    "allocate outputs, make views and read shapes; the computing belongs in the kernel."
                )
            odd = _odd_arguments(args, kwargs, plain, atomic)
            if odd is not None:
                self._refuse(
                    f"the launcher passed torch `{name}` a {odd} ({_where_in(learner_files)}). Torch calls "
                    "Python methods of such an object (__index__, __len__, __getitem__, ...) while it runs, out of "
                    "the grader's sight: pass plain ints, floats, tuples, slices, dtypes and tensors (int(n), "
                    "tuple(shape))."
                )
            out = func(*args, **kwargs)
            if poison_allocations and name in _POISONED_ALLOCATIONS and hasattr(out, "fill_"):
                poison(out)
            if name in _VIEWS_UNLESS_COPIED and _copied(args, out):
                what = "indexing" if name == "__getitem__" else f"`{name}`"
                self._refuse(
                    f"the launcher called torch {what} ({_where_in(learner_files)}) in a way that makes a copy, not "
                    "a view: a pass over memory that torch makes, not your kernel. Index with slices and integers "
                    "only, and read the tensor through its strides in the kernel (pass x.stride(0) and "
                    "x.stride(1))."
                )
            return out

    return _Guard()


def kernel_body_guard(learner_files: tuple[str, ...]):
    """A torch function mode for the threads in which course_lib.gluon_cpu runs a Gluon kernel's body as
    Python (CPU mode). The simulator's own torch calls (a load, a wgmma, a value's arithmetic) pass; a
    torch call made by the learner's code itself (a kernel body reaching a host tensor and multiplying
    it) raises TorchComputeInLauncher, and stays recorded (``violation``) even if the kernel catches it.
    The innermost frame that is either the learner's file or the simulator's decides."""
    from torch.overrides import TorchFunctionMode

    files = frozenset(learner_files)
    simulator = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "gluon_cpu") + os.sep

    class _KernelGuard(TorchFunctionMode):
        violation: str | None = None

        def refused(self) -> None:
            """Raise the first refusal again: a kernel that caught it still fails."""
            if self.violation is not None:
                raise TorchComputeInLauncher(self.violation)

        def __torch_function__(self, func, types, args=(), kwargs=None):
            frame = sys._getframe(1)
            while frame is not None:
                name = frame.f_code.co_filename
                if name.startswith(simulator):
                    break
                if name in files:
                    if self.violation is None:
                        self.violation = (
                            f"the kernel body called torch `{_short_name(func)}` ({_where_in(learner_files)}): in "
                            "CPU mode the course's simulator runs a Gluon kernel as Python, and a kernel computes "
                            "with Gluon's operations (gl.*, warpgroup_mma, ...) on what it loads, never with torch"
                        )
                    raise TorchComputeInLauncher(self.violation)
                frame = frame.f_back
            return func(*args, **(kwargs or {}))

    return _KernelGuard()
