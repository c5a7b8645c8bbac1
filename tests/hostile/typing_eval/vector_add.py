"""Hostile: the ten-line file with no kernel. typing.get_type_hints evaluates a string annotation,
which imports the course's own reference solution from solutions/ and hands the grader its
launcher. Stopped by the pre-check (get_type_hints, string annotations); past it, the sandbox has no
solutions/ to load."""

import typing

SOLUTION = (
    "(lambda os, util: (lambda spec: (lambda m: (spec.loader.exec_module(m), m)[1])(util.module_from_spec(spec)))("
    "util.spec_from_file_location('s', os.path.join(os.path.dirname(os.path.dirname("
    "__import__('course_lib').__file__)), 'solutions', 'vector_add.py'))))"
    "(__import__('os'), __import__('importlib.util').util)"
)


def door(x: SOLUTION):  # noqa: F821
    pass


door.__annotations__ = {"x": SOLUTION}
vector_add = typing.get_type_hints(door)["x"].vector_add
