"""A static pre-check of a task file, run by the grader's parent process before any of the file runs.

A task file holds @triton.jit kernels and a launcher. The grader imports it in a sandboxed child
process and checks what the launcher writes, and some submissions try to fool that check instead of
passing it: end the process, patch torch or triton so a wrong answer looks right, switch on a torch
mode that rewrites operations, reach the interpreter's internals. This module parses the source with
`ast` (it never runs it) and rejects the known escape hatches, each with a message naming the line.

The isolation of the child process is the real defence; this check catches the obvious attempts
first, with a message a learner can act on rather than a crash or a puzzling verdict. It allow-lists
imports and deny-lists the rest, so a kernel and launcher written the ordinary way always pass.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import tokenize
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Finding:
    line: int  # 1-based line in the file
    code: str  # the offending source line, stripped
    rule: str  # import, private-attribute, escape-attribute, torch-mode, builtin, dunder-name, module-assignment
    message: str  # one sentence for the learner: what is not allowed, why, and what to do instead


# The order is the one the import message lists them in.
_ALLOWED_IN_ORDER = (
    "triton",
    "torch",
    "numpy",
    "math",
    "functools",
    "itertools",
    "typing",
    "dataclasses",
    "__future__",
    "course_lib.tuned",
    "course_lib.barriers",
)
# Top-level modules, with their submodules (less the escape hatches below), plus exactly course_lib.tuned
# (the launch configurations two solutions share) and course_lib.barriers (the operations chapter 09's
# ring yields; the grader replays what they did in its own process). The rest of course_lib is the grader.
ALLOWED_IMPORTS = frozenset(_ALLOWED_IN_ORDER)
_ALLOWED_TEXT = ", ".join(_ALLOWED_IN_ORDER[:-1]) + " and " + _ALLOWED_IN_ORDER[-1]
_COURSE_MODULES = tuple(name.split(".") for name in _ALLOWED_IN_ORDER if name.startswith("course_lib."))

# Private names a task file may one day need (say, one a Triton release makes the only way to do
# something); each would be reviewed and added here by name.
ALLOWED_PRIVATE_ATTRIBUTES = frozenset()

# Attribute names that lead out of the kernel and launcher whatever they are looked up on: torch,
# triton, numpy and the allowed stdlib modules re-export modules of their own (torch.sys, torch.os,
# dataclasses.inspect, numpy.ctypeslib), and torch's compilers and operator registry replace what
# an operation does. DisableTorchFunction and DisableTorchFunctionSubclass are caught by the
# torch-mode markers below, torch.jit by its own rule (triton.jit and gluon.jit are what kernels use).
ESCAPE_ATTRIBUTES = frozenset(
    {
        "sys",
        "os",
        "modules",
        "builtins",
        "ctypes",
        "ctypeslib",
        "subprocess",
        "signal",
        "threading",
        "multiprocessing",
        "importlib",
        "gc",
        "inspect",
        "system",
        "popen",
        "kill",
        "cudart",
        "cpp_extension",
        "library",
        "ops",
        "overrides",
        "compile",
        "driver",  # triton.runtime.driver: the active GPU driver, which can be swapped or made to load binaries
    }
)

# Torch function and dispatch modes intercept every torch operation, the grader's own checks included.
_TORCH_MODE_MARKERS = ("TorchFunction", "TorchDispatch", "torch_function", "torch_dispatch", "disable_torch")

# Builtins that open escape hatches, with why. A parameter or local variable of the same name (a
# launcher's input, say) is not the builtin and passes; a module-level or class-level one does not,
# since there the builtin is still what the name reads before the assignment (open = open).
_RUNS_HIDDEN_CODE = "it runs code the pre-check cannot read"
_BY_STRING = "it reaches names and attributes by string, out of the pre-check's sight; write obj.attr instead"
_INTERACTIVE = "it talks to the terminal or stops the interpreter, and the grader runs without one"
BANNED_BUILTINS = {
    "open": "it reads and writes files, and a task file computes only from the tensors it is given",
    "exec": _RUNS_HIDDEN_CODE,
    "eval": _RUNS_HIDDEN_CODE,
    "compile": _RUNS_HIDDEN_CODE,
    "__import__": "it imports modules past the import allow-list; use an import statement",
    "getattr": _BY_STRING,
    "setattr": _BY_STRING,
    "delattr": _BY_STRING,
    "globals": _BY_STRING,
    "locals": _BY_STRING,
    "vars": _BY_STRING,
    "breakpoint": _INTERACTIVE,
    "input": _INTERACTIVE,
    "exit": _INTERACTIVE,
    "quit": _INTERACTIVE,
    "help": _INTERACTIVE,
    "memoryview": "it reaches raw memory; a launcher passes tensors to its kernels instead",
    "super": "it reaches methods past their overrides, which a kernel and launcher never need",
}

# Module attributes a task file may read (`if __name__ == "__main__":`); every other `__name`
# (__builtins__, __loader__, __spec__) is a way into the interpreter.
ALLOWED_DUNDER_NAMES = frozenset({"__name__", "__file__", "__doc__"})

_INTERNALS = "private and dunder attributes reach the interpreter's internals; use the public API of torch and triton"
_ESCAPE = (
    "it leads out of the kernel and launcher to the interpreter, the operating system or torch's compilers "
    "(torch and triton re-export such modules); a launcher needs only tensors, triton and its kernels"
)
_TORCH_JIT = "TorchScript is not graded; kernels are Triton kernels, decorated with @triton.jit"
_TORCH_MODE = (
    "torch function and dispatch modes change what every torch operation does, the grader's checks included; "
    "compute with your kernels instead"
)
# Scopes nested in a function whose names are not the function's own.
_NESTED_SCOPES = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.Lambda,
    ast.ClassDef,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)


def _is_torch_mode(name: str) -> bool:
    return any(marker in name for marker in _TORCH_MODE_MARKERS)


def _attribute_problem(attr: str, base: str | None) -> tuple[str, str] | None:
    """(rule, reason) when attribute attr of base (a dotted module path, or None when unknown) is an escape hatch."""
    if _is_torch_mode(attr):
        return "torch-mode", _TORCH_MODE
    if attr == "jit" and base is not None and (base == "torch" or base.startswith("torch.")):
        return "escape-attribute", _TORCH_JIT
    if attr in ESCAPE_ATTRIBUTES:
        return "escape-attribute", _ESCAPE
    if attr.startswith("_") and attr not in ALLOWED_PRIVATE_ATTRIBUTES:
        return "private-attribute", _INTERNALS
    return None


def _import_problem(path: str) -> str | None:
    """The message when the dotted path (a module, or a name imported from one) may not be imported."""
    parts = path.split(".")
    if parts[0] == "course_lib":
        if parts[:2] not in [list(m) for m in _COURSE_MODULES]:
            return (
                f"{path} is the course's own code: a task file may not import the course's grader; "
                "from course_lib it may use only course_lib.tuned and course_lib.barriers "
                "(from course_lib.tuned import row_config)"
            )
    elif parts[0] not in ALLOWED_IMPORTS:
        if importlib.util.find_spec(parts[0]) is None:  # a top-level name: nothing of it runs here
            return f"there is no module named {parts[0]} (a typo?); a task file may import only {_ALLOWED_TEXT}"
        return (
            f"{parts[0]} is not an allowed import: a task file may import only {_ALLOWED_TEXT}; "
            "the grader runs your kernels and launcher, nothing else"
        )
    for i in range(1, len(parts)):
        problem = _attribute_problem(parts[i], ".".join(parts[:i]))
        if problem:
            return f"{path} is not an allowed import: {problem[1]}"
    return None


def _resolve(expr: ast.expr, modules: dict[str, str]) -> str | None:
    """The dotted path of a chain like tl.core.tensor rooted at an imported name, or None."""
    if isinstance(expr, ast.Name):
        return modules.get(expr.id)
    if isinstance(expr, ast.Attribute):
        base = _resolve(expr.value, modules)
        return f"{base}.{expr.attr}" if base else None
    return None


def _imported_names(tree: ast.Module) -> dict[str, str]:
    """Each name the file binds to a module or to something reached from one, with its dotted path."""
    modules = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                modules[alias.asname or top] = alias.name if alias.asname else top
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            for alias in node.names:
                if alias.name != "*":
                    modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    # Plain aliases (F = torch.nn.functional), in source order so an alias of an alias resolves.
    assigns = sorted((n for n in ast.walk(tree) if isinstance(n, ast.Assign)), key=lambda n: (n.lineno, n.col_offset))
    for node in assigns:
        path = _resolve(node.value, modules)
        if path:
            modules.update((target.id, path) for target in node.targets if isinstance(target, ast.Name))
    return modules


def _local_names(function: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    """The parameters and local variables of a function, less those it declares global or nonlocal."""
    names, declared = set(), set()
    pending = list(ast.iter_child_nodes(function))
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
        if not isinstance(node, _NESTED_SCOPES):
            pending.extend(ast.iter_child_nodes(node))
    return names - declared


def _root(expr: ast.expr) -> ast.expr:
    while isinstance(expr, (ast.Attribute, ast.Subscript)):
        expr = expr.value
    return expr


class _Checker(ast.NodeVisitor):
    def __init__(self, lines: list[str], modules: dict[str, str]):
        self.lines, self.modules = lines, modules
        self.found: list[tuple[int, int, Finding]] = []  # (line, column, finding), to sort in reading order
        self.functions: list[set[str]] = []  # the local names of each function the visit is inside

    def report(self, line: int, column: int, rule: str, message: str) -> None:
        self.found.append((line, column, Finding(line, self.lines[line - 1].strip(), rule, message)))

    def is_builtin(self, name: str) -> bool:
        # Only a function's locals hide a builtin for sure: reading one before it is assigned raises
        # UnboundLocalError rather than falling back to the builtin, as module and class names do.
        return not any(name in local for local in self.functions)

    def visit_function(self, node, outer: list[ast.AST | None], body: list[ast.AST]) -> None:
        """A def or lambda: outer (decorators, return annotation), defaults and annotations, then its body."""
        args = node.args
        params = [*args.posonlyargs, *args.args, *args.kwonlyargs, *filter(None, (args.vararg, args.kwarg))]
        # These run in the enclosing scope, where the parameters' names are not bound.
        outer = [*outer, *args.defaults, *args.kw_defaults, *(param.annotation for param in params)]
        for part in outer:
            if part is not None:
                self.visit(part)
        self.functions.append(_local_names(node))
        for param in params:
            self.check_binding(param.arg, param)
        for statement in body:
            self.visit(statement)
        self.functions.pop()

    def check_binding(self, name: str, node: ast.AST) -> None:
        """A function, class or parameter the file defines: __torch_function__ is a torch mode hook."""
        if _is_torch_mode(name):
            self.report(node.lineno, node.col_offset, "torch-mode", f"{name} is not allowed: {_TORCH_MODE}")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            problem = _import_problem(alias.name)
            if problem is None and alias.asname is None and alias.name.startswith("course_lib."):
                problem = (
                    f"import {alias.name} binds the whole course_lib package, the course's grader included; "
                    "write from course_lib.tuned import row_config"
                )
            if problem:
                self.report(node.lineno, node.col_offset, "import", problem)
            if alias.asname:
                self.check_name(alias.asname, node, load=False)
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            self.report(
                node.lineno,
                node.col_offset,
                "import",
                f"relative imports are not allowed: a task file is graded alone and may import only {_ALLOWED_TEXT}",
            )
        else:
            # Each name is checked with its module's path in front (torch.overrides, course_lib.grading),
            # which checks the module too; from course_lib import tuned is course_lib.tuned.
            for alias in node.names:
                if alias.name == "*":
                    problem = _import_problem(node.module) or (
                        f"from {node.module} import * binds names the pre-check cannot see; import the names you use"
                    )
                else:
                    problem = _import_problem(f"{node.module}.{alias.name}")
                if problem:
                    self.report(node.lineno, node.col_offset, "import", problem)
                if alias.asname:
                    self.check_name(alias.asname, node, load=False)
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        # Reported where the attribute's name is, the end of its chain, which may span lines.
        line, column = node.end_lineno, node.end_col_offset
        problem = _attribute_problem(node.attr, _resolve(node.value, self.modules))
        if problem:
            rule, reason = problem
            # The expression as written when it is short (torch.sys, ().__class__), else just the name.
            written = ast.unparse(node)
            self.report(
                line, column, rule, f"{written if len(written) <= 40 else '.' + node.attr} is not allowed: {reason}"
            )
        self.check_patch(node)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        self.check_patch(node)
        self.generic_visit(node)

    def check_patch(self, target: ast.Attribute | ast.Subscript) -> None:
        """Storing into or deleting from an imported module, or anything reached from one (tl.load = f)."""
        if isinstance(target.ctx, ast.Load):
            return
        root = _root(target)
        if isinstance(root, ast.Name) and root.id in self.modules:
            verb = "deleting" if isinstance(target.ctx, ast.Del) else "assigning to"
            self.report(
                target.lineno,
                target.col_offset,
                "module-assignment",
                f"{verb} {ast.unparse(target)} is monkey-patching a module: the grader uses torch, triton and "
                "the other modules to check your result, so a task file may not change them; "
                "keep your own values in your own variables",
            )

    def visit_Name(self, node: ast.Name) -> None:
        self.check_name(node.id, node, isinstance(node.ctx, ast.Load))
        self.generic_visit(node)

    def check_name(self, name: str, node: ast.AST, load: bool) -> None:
        """A name read or bound as a variable (an import's alias binds one: import torch as __builtins__)."""
        line, column = node.lineno, node.col_offset
        if _is_torch_mode(name):
            self.report(line, column, "torch-mode", f"{name} is not allowed: {_TORCH_MODE}")
        elif load and name in BANNED_BUILTINS and self.is_builtin(name):
            self.report(line, column, "builtin", f"the builtin {name} is not allowed: {BANNED_BUILTINS[name]}")
        elif name.startswith("__") and name not in ALLOWED_DUNDER_NAMES:
            self.report(
                line,
                column,
                "dunder-name",
                f"{name} is not allowed: names that start with two underscores reach the interpreter's internals; "
                "of them a task file may use only __name__, __file__ and __doc__",
            )

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.check_binding(node.name, node)
        self.visit_function(node, [*node.decorator_list, node.returns], node.body)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.visit_function(node, [], [node.body])

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.check_binding(node.name, node)
        self.generic_visit(node)


def check_source(text: str, filename: str = "<task file>") -> list[Finding]:
    """Every escape hatch in a task file's source, in reading order. Raises SyntaxError if it does not parse."""
    tree = ast.parse(text, filename)
    # Split where the parser counts lines (str.splitlines also splits at form feeds and the like).
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    checker = _Checker(lines, _imported_names(tree))
    checker.visit(tree)
    # A chain such as torch._C._x is reported once per offending name; a finding repeated word for word
    # on one line (from os import path, sep) is said once.
    return list(dict.fromkeys(finding for *_, finding in sorted(checker.found, key=lambda f: f[:2])))


def check_file(path) -> list[Finding]:
    """check_source of the file at path; [] for a file that does not parse, which the grader reports itself."""
    path = Path(path)
    data = path.read_bytes()
    try:
        # UTF-8 unless the file declares otherwise, as the import will read it: a coding cookie
        # must not hide the source from the check.
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return check_source(data.decode(encoding), str(path))
    except (SyntaxError, ValueError):  # a bad coding cookie, bytes that do not decode, null bytes
        return []


def describe(findings: list[Finding], filename) -> tuple[str, list[str]]:
    """(summary naming the first finding, detail lines: each finding's place and code, then its message)."""
    name = Path(filename).name
    first = findings[0]
    summary = f"the task file uses what the grader does not allow: {name} line {first.line}: {first.code}"
    details = [line for f in findings for line in (f"{name}:{f.line}: {f.code}", f"    {f.message}")]
    return summary, details
