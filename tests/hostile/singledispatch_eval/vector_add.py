"""Hostile: functools.singledispatch resolves a string annotation with eval when a function is
registered; the string runs code (here it asks the interpreter for the reference solution's path).
Stopped by the pre-check (singledispatch, string annotations); past it, the sandbox has no
solutions/."""

import functools


@functools.singledispatch
def door(x):
    return x


def handler(
    x: "__import__('runpy').run_path(__import__('os').path.join(__import__('os').path.dirname("  # noqa: F821
    "__import__('os').path.dirname(__import__('course_lib').__file__)), 'solutions', "
    "'vector_add.py'))['vector_add']",
):
    return x


door.register(handler)
vector_add = door.registry[object]
