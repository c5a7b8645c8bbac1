"""Hostile: a match statement's class pattern reads a function's __globals__ by keyword, a string to
a checker that looks for attribute names; from there the builtins, __import__, and the reference
solution. Stopped by the pre-check (class patterns with keyword attributes); past it, the sandbox has
no solutions/."""


def probe():
    pass


match probe:
    case object(__globals__={"__builtins__": found}):
        imp = found["__import__"] if isinstance(found, dict) else found.__import__
        path = imp("os").path
        where = path.join(path.dirname(path.dirname(imp("course_lib").__file__)), "solutions", "vector_add.py")
        vector_add = imp("runpy").run_path(where)["vector_add"]
