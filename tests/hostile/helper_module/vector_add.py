"""Hostile: the work is in a helper module beside the task file, imported by name (the task's folder
used to be on sys.path). Stopped by the pre-check (no such module); past it, the grader imports a
private copy of this one file, with no folder on sys.path: there is no helper to find."""

from helper_solution import vector_add  # noqa: F401
