"""Hostile (found by a red-team review): an import in a function that is never called takes the name
exec, and the checker once let every use of an imported name pass; at module level exec is still the
builtin, and it runs code that loads the reference solution. Refused where the import is; past the
pre-check, the sandbox has no solutions/."""


def unused():
    from math import pi as exec  # noqa: F401


exec(  # noqa: S102
    "import os, runpy\n"
    "root = os.path.dirname(os.path.dirname(__import__('course_lib').__file__))\n"
    "vector_add = runpy.run_path(os.path.join(root, 'solutions', 'vector_add.py'))['vector_add']"
)
