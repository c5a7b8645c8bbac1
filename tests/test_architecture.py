"""The import graph of course_lib keeps the arrows of the layout going one way.

Every module under course_lib/ is parsed (not imported) and its imports of other course_lib modules
become edges: absolute (``import course_lib.x``, ``from course_lib.x import y``) and relative
(``from .x import y``, ``from .. import x``); ``from . import x`` where x is a submodule is an edge
to that submodule. An import inside a function (or under ``if __name__ == "__main__":``) is a
*lazy* edge: still a dependency, but it runs only when called. Imports under ``if TYPE_CHECKING:``
never run and are left out.

The rules are data (``RULES``, ``ALLOWED_LAZY_EDGES``): extend them there.
"""

from __future__ import annotations

import ast
import fnmatch
from collections import deque
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "course_lib"

# Lazy imports that may close a cycle, each with the reason it is tolerated. A cycle of
# module-level imports is never allowed. Allowing an edge (not a whole cycle) says exactly which
# import is tolerated: a new cycle through other imports still fails.
ALLOWED_LAZY_EDGES: dict[tuple[str, str], str] = {
    # ("course_lib.a", "course_lib.b"): "why a's lazy import of b may close a cycle",
}


@dataclass(frozen=True)
class Rule:
    """Modules matching ``importers`` must not import anything matching ``forbidden``.

    Patterns are module names; a trailing ``*`` also matches everything below (``course_lib.widgets*``:
    the module or the package and its submodules). Outside packages are matched by their import name.
    Checked: the importers' own imports (lazy ones too when ``lazy_too``), and what those load in
    turn through module-level imports (and the packages above them, whose ``__init__`` runs first).
    """

    name: str
    importers: tuple[str, ...]
    forbidden: tuple[str, ...]
    lazy_too: bool
    why: str


NOTEBOOK_PACKAGES = ("ipywidgets*", "IPython*", "jupyterlab*", "notebook*")

RULES = (
    Rule(
        "grader-imports-no-face",
        importers=("course_lib.grader*", "course_lib.grading"),
        forbidden=("course_lib.cli*", "course_lib.widgets*"),
        lazy_too=True,
        why="the grader is a library: the command line and the widgets call it, never the other way",
    ),
    Rule(
        "headless-modules-import-no-notebook",
        importers=(
            "course_lib.cli*",
            "course_lib.grader*",
            "course_lib.timing",
            "course_lib.bench",
            "course_lib.runtime",
        ),
        forbidden=NOTEBOOK_PACKAGES,
        lazy_too=False,
        why="the command line, the grader and the meters run headless (a terminal, CI, a GPU box)",
    ),
)


# --------------------------------------------------------------------------------------------------
# reading the graph


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # a course_lib module (the most specific one that exists) or an outside name
    internal: bool
    lazy: bool  # runs only when a function is called (or the module is run as a script)
    where: str  # "course_lib/bench.py:24"
    text: str  # the import statement, for messages


def find_modules(root: Path, package: str = PACKAGE) -> dict[str, Path]:
    """Module name -> file for every .py file under root/package (packages named by their __init__)."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if "__pycache__" in parts:
            continue
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _is_main_guard(test: ast.expr) -> bool:
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    )


def _statements(tree: ast.Module):
    """(node, lazy) for every import statement that can run, with whether it runs only on a call."""
    stack = [(child, False) for child in reversed(tree.body)]
    while stack:
        node, lazy = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, lazy
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            children = [(c, lazy) for c in node.orelse]
        elif isinstance(node, ast.If) and _is_main_guard(node.test):
            children = [(c, True) for c in node.body] + [(c, lazy) for c in node.orelse]
        else:
            inner = lazy or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            children = [(c, inner) for c in ast.iter_child_nodes(node)]
        stack.extend(reversed(children))


def read_imports(root: Path, package: str = PACKAGE) -> list[Import]:
    modules = find_modules(root, package)

    def existing(name: str) -> str:
        """The most specific course_lib module that ``import name`` loads (name itself if none is on disk)."""
        parts = name.split(".")
        for n in range(len(parts), 0, -1):
            if ".".join(parts[:n]) in modules:
                return ".".join(parts[:n])
        return name

    found = []
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        source = path.read_text(encoding="utf-8")
        for node, lazy in _statements(ast.parse(source, filename=str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    here = module.split(".") if is_package else module.split(".")[:-1]
                    base_parts = here[: len(here) - (node.level - 1)]
                    base = ".".join(base_parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in modules else base)
            for target in targets:
                internal = target == package or target.startswith(package + ".")
                target = existing(target) if internal else target
                if target == module:
                    continue  # a package's __init__ taking names from itself
                where = f"{path.relative_to(root).as_posix()}:{node.lineno}"
                text = " ".join((ast.get_source_segment(source, node) or "").split())
                found.append(Import(module, target, internal, lazy, where, text))
    return found


@cache
def the_imports() -> tuple[Import, ...]:
    return tuple(read_imports(ROOT))


def graph(imports, lazy: bool, drop: frozenset = frozenset()) -> dict[str, dict[str, list[Import]]]:
    """source -> target -> the imports making that edge, among course_lib modules."""
    edges: dict[str, dict[str, list[Import]]] = {}
    for imp in imports:
        if imp.internal and (lazy or not imp.lazy) and (imp.source, imp.target) not in drop:
            edges.setdefault(imp.source, {}).setdefault(imp.target, []).append(imp)
    return edges


def cycles(edges: dict[str, dict[str, list[Import]]]) -> list[list[str]]:
    """The shortest cycle through each module that is on one, each once: [a, b, a]."""
    found = {}
    for start in sorted(edges):
        came_from = {}
        queue = deque([start])
        while queue:
            node = queue.popleft()
            if start in edges.get(node, {}):
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                ring = path[::-1]  # start ... node, and node imports start
                k = ring.index(min(ring))
                ring = ring[k:] + ring[:k]
                found.setdefault(tuple(ring), ring + [ring[0]])
                break
            for nxt in sorted(edges.get(node, {})):
                if nxt != start and nxt not in came_from:
                    came_from[nxt] = node
                    queue.append(nxt)
    return sorted(found.values(), key=lambda c: (len(c), c))


def describe_cycle(cycle: list[str], edges) -> str:
    lines = [" -> ".join(cycle)]
    for a, b in zip(cycle, cycle[1:]):
        for where, lazy, text in dict.fromkeys((imp.where, imp.lazy, imp.text) for imp in edges[a][b]):
            lines.append(f"    {where:<36} {'(lazy) ' if lazy else ''}{text}")
    return "\n".join(lines)


def matches(name: str, patterns) -> bool:
    for pattern in patterns:
        if pattern.endswith("*"):
            stem = pattern[:-1]
            if name == stem or name.startswith(stem + ".") or fnmatch.fnmatchcase(name, pattern):
                return True
        elif name == pattern:
            return True
    return False


def violations(rule: Rule, imports, modules) -> list[str]:
    """One line per forbidden import reached, with the chain that reaches it."""
    by_source: dict[str, list[Import]] = {}
    for imp in imports:
        by_source.setdefault(imp.source, []).append(imp)

    def parents(name: str) -> list[str]:
        parts = name.split(".")
        return [".".join(parts[:n]) for n in range(1, len(parts)) if ".".join(parts[:n]) in modules]

    found = []
    for importer in sorted(m for m in modules if matches(m, rule.importers)):
        # breadth first: the first hop at the levels the rule checks, then what loading each module
        # runs (its module-level imports, and the packages above it)
        chains = {importer: [importer]}
        queue = deque([importer])
        while queue:
            node = queue.popleft()
            first = node == importer
            hops = [(p, None) for p in parents(node) if p != importer]
            hops += [(imp.target, imp) for imp in by_source.get(node, []) if not imp.lazy or (first and rule.lazy_too)]
            for target, imp in hops:
                if imp is not None and matches(target, rule.forbidden):
                    chain = " -> ".join(chains[node] + [target])
                    found.append(f"{chain}   ({imp.where}: {'lazy: ' if imp.lazy else ''}{imp.text})")
                elif imp is None or imp.internal:
                    if target not in chains and target in modules:
                        chains[target] = chains[node] + [target]
                        queue.append(target)
    return sorted(set(found))


# --------------------------------------------------------------------------------------------------
# the tests


def test_no_cycle_among_module_level_imports():
    edges = graph(the_imports(), lazy=False)
    found = cycles(edges)
    report = "\n".join(describe_cycle(c, edges) for c in found)
    if found:
        print(f"module-level import cycles:\n{report}")
    assert not found, f"{len(found)} cycle(s) of module-level imports:\n{report}"


def test_no_cycle_counting_lazy_imports():
    allowed = frozenset(ALLOWED_LAZY_EDGES)
    edges = graph(the_imports(), lazy=True, drop=allowed)
    found = cycles(edges)
    report = "\n".join(describe_cycle(c, edges) for c in found)
    if found:
        print(f"import cycles, counting lazy imports:\n{report}")
    assert not found, (
        f"{len(found)} cycle(s) counting imports inside functions (break them, or add a lazy edge to "
        f"ALLOWED_LAZY_EDGES with the reason):\n{report}"
    )


def test_the_allowed_lazy_edges_still_exist_and_are_lazy():
    edges = graph(the_imports(), lazy=True)
    for (a, b), why in ALLOWED_LAZY_EDGES.items():
        assert why.strip(), f"{a} -> {b}: say why it is allowed"
        assert b in edges.get(a, {}), f"{a} -> {b} is allowed but imports no more: remove it from the list"
        eager = [imp.where for imp in edges[a][b] if not imp.lazy]
        assert not eager, f"{a} -> {b} is allowed as a lazy import, but is imported at module level at {eager}"


@pytest.mark.parametrize("rule", RULES, ids=[r.name for r in RULES])
def test_rule(rule):
    modules = set(find_modules(ROOT))
    assert any(matches(m, rule.importers) for m in modules), f"{rule.name}: no module matches {rule.importers}"
    found = violations(rule, the_imports(), modules)
    if found:
        print(f"{rule.name}:\n" + "\n".join(found))
    assert not found, f"{rule.why}; yet:\n" + "\n".join(found)


# the reader itself, on a made-up package: each form of import it must see


def test_the_reader_sees_every_form_of_import(tmp_path):
    files = {
        "__init__.py": "from . import a  # noqa\nfrom .b import thing\n",
        "a.py": "import course_lib.b\nfrom course_lib import sub\n\ndef f():\n    from .sub import deep\n",
        "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\nthing = 1\n",
        "sub/__init__.py": "from .. import b\nfrom . import deep, name_in_init\nfrom ..a import f\n",
        "sub/deep.py": "import ipywidgets\nif __name__ == '__main__':\n    import course_lib\n",
    }
    for name, text in files.items():
        path = tmp_path / PACKAGE / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    got = {(i.source, i.target, i.lazy) for i in read_imports(tmp_path)}
    c = PACKAGE
    assert got == {
        (c, f"{c}.a", False),
        (c, f"{c}.b", False),
        (f"{c}.a", f"{c}.b", False),
        (f"{c}.b", "typing", False),
        (f"{c}.a", f"{c}.sub", False),
        (f"{c}.a", f"{c}.sub.deep", True),
        (f"{c}.sub", f"{c}.b", False),
        (f"{c}.sub", f"{c}.sub.deep", False),
        (f"{c}.sub", f"{c}.a", False),
        (f"{c}.sub.deep", "ipywidgets", False),
        (f"{c}.sub.deep", c, True),
    }, sorted(got)
    imports = read_imports(tmp_path)
    assert cycles(graph(imports, lazy=False)) == [[f"{c}.a", f"{c}.sub", f"{c}.a"]]
    assert cycles(graph(imports, lazy=True)) == [[f"{c}.a", f"{c}.sub", f"{c}.a"], [c, f"{c}.a", f"{c}.sub.deep", c]]
    # a reaches ipywidgets through sub's module-level import of deep, and b through its package's
    # __init__ (which runs before b does); sub.deep's lazy import of course_lib is not followed
    rule = Rule("r", (f"{c}.a", f"{c}.b"), ("ipywidgets*",), lazy_too=False, why="")
    assert violations(rule, imports, set(find_modules(tmp_path))) == [
        f"{c}.a -> {c}.sub -> {c}.sub.deep -> ipywidgets   ({c}/sub/deep.py:1: import ipywidgets)",
        f"{c}.b -> {c} -> {c}.a -> {c}.sub -> {c}.sub.deep -> ipywidgets   ({c}/sub/deep.py:1: import ipywidgets)",
    ]
    modules = set(find_modules(tmp_path))
    lazy = Rule("r", (f"{c}.sub.deep",), (c,), lazy_too=True, why="")
    assert violations(lazy, imports, modules) == [f"{c}.sub.deep -> {c}   ({c}/sub/deep.py:3: lazy: import course_lib)"]
    assert violations(replace(lazy, lazy_too=False), imports, modules) == []
