"""Hostile (found by a red-team review): triton.language.str_to_ty evaluates the part of a descriptor
type's name after its brackets with eval; it once came with the rest of triton.language on the
allow-list. Here it loads the reference solution. Refused by name; past the pre-check, the sandbox
has no solutions/."""

import builtins

import triton.language as tl

CODE = (
    "__import__('builtins').__dict__.__setitem__('solution', __import__('runpy').run_path(__import__('os').path.join("
    "__import__('os').path.dirname(__import__('os').path.dirname(__import__('course_lib').__file__)), "
    "'solutions', 'vector_add.py')))"
)
try:
    tl.str_to_ty(f"tensordesc<fp32[16],{CODE}>", None)
except Exception:  # noqa: BLE001 (the type itself is nonsense; the eval has run by then)
    if not hasattr(builtins, "solution"):
        raise
vector_add = builtins.solution["vector_add"]
