"""The grader's static pre-check: every escape hatch it knows is rejected with its rule and line, and
every kernel and launcher written the ordinary way passes, the course's own task files included."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from course_lib.grader import precheck

ROOT = Path(__file__).resolve().parent.parent

# The tests/wrong folders whose submissions really use an escape hatch (or an import off the allow-list),
# with the rules that reject them; every other task file in the tree must pass.
REJECTED_WRONG = {
    "crash": {"import", "private-attribute"},  # import os; os._exit(1)
    "segfault": {"import", "escape-attribute"},  # import os, signal; os.kill(...)
    "import_error": {"import"},  # import triton_language_typo
}


def rules_and_lines(source: str) -> list[tuple[str, int]]:
    return [(f.rule, f.line) for f in precheck.check_source(textwrap.dedent(source))]


def task_files() -> list[Path]:
    globs = ["solutions/*.py", "exercises/*.py", "tests/good/**/*.py", "tests/wrong/**/*.py"]
    return sorted(path for pattern in globs for path in ROOT.glob(pattern))


def test_the_course_task_files_pass_and_exactly_the_known_wrong_ones_are_rejected():
    files = task_files()
    assert len(files) > 40 and any(p.parent.name == "solutions" for p in files)
    rejected = {}
    for path in files:
        if findings := precheck.check_file(path):
            # a wrong/ submission by its folder, anything else by its path, so that either shows up
            name = path.parent.name if path.parent.parent == ROOT / "tests/wrong" else str(path.relative_to(ROOT))
            rejected[name] = {f.rule for f in findings}
    assert rejected == REJECTED_WRONG


KERNEL_AND_LAUNCHER = '''
    """A realistic task file: kernels, an autotuned kernel, a gluon kernel and launchers."""

    from __future__ import annotations

    import functools
    import math
    from dataclasses import dataclass
    from typing import Optional

    import numpy as np
    import torch
    import triton
    import triton.language as tl
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.tools.tensor_descriptor import TensorDescriptor

    from course_lib.tuned import row_config


    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
        offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offsets < n_elements
        x = tl.load(x_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, x + tl.load(y_ptr + offsets, mask=mask), mask=mask)


    @triton.autotune(configs=[triton.Config({"BLOCK_SIZE": 1024}, num_warps=4)], key=["n_elements"])
    @triton.jit
    def tuned_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n_elements), mask=offsets < n_elements)


    @gluon.jit
    def gluon_kernel(x_ptr, BLOCK: gl.constexpr):
        pass


    @dataclass
    class Plan:
        block: int
        scale: Optional[float] = None

        def __post_init__(self):
            self.block = max(self.block, 1)


    @functools.lru_cache
    def plan(n_elements):
        return Plan(min(1024, triton.next_power_of_2(n_elements)), math.sqrt(2.0))


    def vector_add(x, y, out):
        assert x.stride(0) == 1 and x.data_ptr() != out.data_ptr() and isinstance(x, torch.Tensor)
        n_elements = out.numel()
        block = plan(n_elements).block
        scratch = torch.empty_like(out)
        add_kernel[(triton.cdiv(n_elements, block),)](x, y, scratch, n_elements, BLOCK_SIZE=block)
        grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)
        tuned_kernel[grid](scratch, out, n_elements)
        out.data = out.data  # an attribute of a tensor, not of a module
        rows, block_n, num_warps = row_config(len(x), x.element_size())
        print(np.float32(1.0), range(3), min(rows, 2), int(block_n), float(num_warps), tuple(x.shape))
        return out


    def softmax(input, out):  # a parameter named input is not the builtin
        with torch.no_grad(), torch.set_grad_enabled(False):
            return input, TensorDescriptor, __name__, __file__, __doc__


    if __name__ == "__main__":
        vector_add(torch.ones(4), torch.ones(4), torch.empty(4))
'''


def test_a_realistic_kernel_and_launcher_passes():
    assert precheck.check_source(textwrap.dedent(KERNEL_AND_LAUNCHER)) == []


@pytest.mark.parametrize(
    "source",
    [
        "import triton.language.extra.libdevice",
        "from triton import jit, cdiv",
        "from course_lib import tuned",
        "import course_lib.tuned as tuned",
        "from torch import nn\nimport torch.nn.functional as F",
        "from numpy import float32",
        "import itertools, typing",
        "def f():\n    global g\n    g = 1\n    def h():\n        nonlocal_free = g\n    return h",
        "class A:\n    def __init__(self):\n        self.x = 1\n",
        "async def g():\n    pass\n\nasync def f():\n    await g()\n\ndef gen():\n    yield 1",
        "def launch(x):\n    open = print\n    open(x)",  # a local open, not the builtin
        "def launch(input):\n    return lambda: input",
        # version gates ask a module whether it has a name, and get nothing of it
        "from triton.experimental.gluon.language.nvidia.hopper import tma\n"
        "load = tma.async_load if hasattr(tma, 'async_load') else tma.async_copy_global_to_shared",
        "import triton\n@triton.heuristics(values={'BLOCK': lambda args: 64})\n@triton.jit\ndef k(x, BLOCK):\n    pass",
        "class A:\n    @property\n    def x(self):\n        return 1\n\n"
        "    @x.setter\n    def x(self, v):\n        pass",
        "from __future__ import annotations\nimport torch\ndef f(x: torch.Tensor, n: int = 3) -> torch.Tensor:\n"
        "    return x",
        "def f(x):\n    match x:\n        case (1, 2):\n            return 1\n"
        "        case {'a': b}:\n            return b",
        "import torch\nprint(f'{torch.float16} {torch.finfo(torch.float16).max:.3e}')",
        "import torch\nn = torch.float16.itemsize\nok = isinstance(torch.empty(1), torch.Tensor)",
        "from dataclasses import dataclass, field\n@dataclass\nclass P:\n    x: int = field(default=1)",
        "import torch.nn.functional as F\ndef pad(w):\n    return F.pad(w, (0, 2))",
        "from triton.experimental.gluon.language.nvidia.hopper import mbarrier\nL = mbarrier.MBarrierLayout()",
        "from triton.tools.tensor_descriptor import TensorDescriptor\nmake = TensorDescriptor.from_tensor",
        "def f():\n    global G\n    G = 1\n\ndef g():\n    return G, __name__, print, len",  # defined globals
        # a name another Triton release has, behind a version gate (3.6 lacks tma.async_load)
        "from triton.experimental.gluon.language.nvidia.hopper import tma\n"
        "load = tma.no_such_copy if hasattr(tma, 'no_such_copy') else tma.async_copy_global_to_shared",
        "def f(x):\n    match x:\n        case int(n) | str(n):\n            return type(n)\n        case object():\n"
        "            return None",  # builtin class patterns, and type(x) with one argument
        # a decorator's arguments are read outside the kernel: a helper of the file's there is fine
        "import triton\ndef pick(args):\n    return 64\n@triton.heuristics(values={'B': pick})\n@triton.jit\n"
        "def k(x, B):\n    pass",
        # a self-test under the main guard never runs in the grader: what a launcher may not use is fine there
        "import torch\nif __name__ == '__main__':\n    torch.manual_seed(0)\n    import time\n"
        "    torch.testing.assert_close(torch.ones(2), torch.ones(2))",
        "import torch\nif '__main__' == __name__:\n    torch.manual_seed(0)",
        # an optional import with a fallback binds the name either way (both branches of an if too)
        "try:\n    from triton.tools.tensor_descriptor import TensorDescriptor\nexcept ImportError:\n"
        "    TensorDescriptor = None\ndef f():\n    return TensorDescriptor",
        "import triton\nif hasattr(triton, 'cdiv'):\n    from functools import partial\nelse:\n"
        "    from itertools import chain as partial\ndef f():\n    return partial",
        "try:\n    import numpy as np\nexcept ImportError:\n    raise\ndef f():\n    return np.float32",
        "class A:\n    def __init__(self):\n        self.v = 1\n\n    @property\n    def x(self):\n"
        "        return self.v\n\n    @x.setter\n    def x(self, v):\n        self.v = v",
        "from triton.language.extra.cuda import libdevice\nimport triton\n@triton.jit\ndef k(x):\n    libdevice.exp(x)",
        "__all__ = ['vector_add']",
    ],
)
def test_ordinary_code_passes(source):
    assert precheck.check_source(source) == []


@pytest.mark.parametrize(
    "source, expected",
    [
        # rule 1: the import allow-list
        ("import triton\nimport os", [("import", 2)]),
        ("import importlib", [("import", 1)]),
        ("from os import path, sep", [("import", 1)]),
        ("import torch\ndef f():\n    import ctypes\n", [("import", 3)]),
        ("from . import x", [("import", 1)]),
        ("from .. import x", [("import", 1)]),
        ("from torch import *", [("import", 1)]),
        ("import torch.overrides", [("import", 1)]),
        ("import torch._C", [("import", 1)]),
        ("from torch.utils import cpp_extension", [("import", 1)]),
        ("import torch.utils.cpp_extension", [("import", 1)]),
        ("import torch.library", [("import", 1)]),
        ("from torch import ops", [("import", 1)]),
        ("import torch.multiprocessing as mp", [("import", 1)]),
        ("from torch import jit", [("import", 1)]),
        ("import torch._dynamo", [("import", 1)]),
        ("import torch._inductor", [("import", 1)]),
        ("import numpy.ctypeslib", [("import", 1)]),
        ("from torch.overrides import TorchFunctionMode", [("import", 1), ("torch-mode", 1)]),
        ("from numpy import random", [("import", 1)]),
        ("from torch.serialization import pickle", [("import", 1)]),
        ("from typing import get_type_hints", [("import", 1)]),
        ("from functools import singledispatch", [("import", 1)]),
        ("from torch import load", [("import", 1)]),
        ("import triton.testing", [("import", 1)]),
        # rule 1: the course's own code, but course_lib.tuned and course_lib.barriers
        ("import course_lib", [("import", 1)]),
        ("from course_lib import grading", [("import", 1)]),
        ("import course_lib.grader", [("import", 1)]),
        ("import course_lib.compare as c", [("import", 1)]),
        ("import course_lib.tuned", [("import", 1)]),  # binds course_lib, the grader included
        # rule 2: every name reached from an import is on the allow-list
        ("import torch\ntorch.load('x.pt')", [("not-allowed", 2)]),
        ("import torch\ntorch.hub.load('.', 'm', source='local')", [("escape-attribute", 2)]),
        ("import torch\ntorch.serialization.pickle.loads(b'')", [("escape-attribute", 2)]),
        ("import typing\ntyping.get_type_hints(f)", [("not-allowed", 2)]),
        ("import typing\nop = typing.operator", [("not-allowed", 2)]),
        ("import functools\n@functools.singledispatch\ndef f(x):\n    pass", [("decorator", 2), ("not-allowed", 2)]),
        ("import numpy as np\nnp.load('x.npy', allow_pickle=True)", [("not-allowed", 2)]),
        ("import numpy as np\nnp.from_dlpack(x)", [("not-allowed", 2)]),
        ("import torch\nt = torch.from_numpy(a)", [("not-allowed", 2)]),
        ("import torch\nt = torch.from_file('/etc/passwd', True, 10)", [("escape-attribute", 2)]),
        ("import triton\ntriton.knobs.runtime.interpret = True", [("module-assignment", 2), ("escape-attribute", 2)]),
        ("import triton\nk = triton.knobs", [("escape-attribute", 2)]),
        ("import torch\ntorch.Tensor.numpy(x)", [("escape-attribute", 2)]),
        # rule 2: a module is never a value
        ("import torch\nf(torch)", [("module-value", 2)]),
        ("import torch\nF = torch.nn.functional", [("module-value", 2)]),
        ("import triton.language as tl\nx = [tl]", [("module-value", 2)]),
        # rule 3: private and dunder attributes
        ("x = ().__class__.__bases__", [("private-attribute", 1), ("private-attribute", 1)]),
        ("import torch\ntorch._C", [("private-attribute", 2)]),
        (
            "import triton.language as tl\ndef f(g):\n    return tl.core._x, g.__globals__",
            [("not-allowed", 3), ("private-attribute", 3)],
        ),
        ("def f(obj):\n    obj.__dict__['x'] = 1", [("private-attribute", 2)]),
        # rule 4: names that lead out whatever their base, and torch's modes
        ("import torch\ntorch.sys.modules['torch'] = None", [("module-assignment", 2), ("escape-attribute", 2)]),
        ("import torch\n\ntorch.os._exit(0)", [("escape-attribute", 3)]),
        ("import torch\ntorch.cuda.cudart()", [("escape-attribute", 2)]),
        ("import triton\ntriton.runtime.driver.active", [("escape-attribute", 2)]),
        ("import torch\nf = torch.compile(g)", [("escape-attribute", 2)]),
        ("import torch\n@torch.jit.script\ndef f(x):\n    return x", [("decorator", 2), ("not-allowed", 2)]),
        ("import torch as t\nf = t.jit", [("not-allowed", 2)]),
        ("import torch\ntorch.ops.aten.add", [("escape-attribute", 2)]),
        ("import torch\ntorch.library.impl", [("escape-attribute", 2)]),
        ("import torch\ntorch.overrides.TorchFunctionMode", [("escape-attribute", 2), ("torch-mode", 2)]),
        ("import torch\ntorch.DisableTorchFunctionSubclass", [("torch-mode", 2)]),
        ("def f(x):\n    return x.modules, x.subprocess, x.system, x.popen", [("escape-attribute", 2)] * 4),
        ("def f(x):\n    x.numpy().tofile('/tmp/x')", [("escape-attribute", 2)] * 2),
        ("def f(g):\n    return g.gi_frame.f_back.f_globals", [("escape-attribute", 2)] * 3),
        ("def f(s):\n    return s.untyped_storage().from_file('x', True, 8)", [("escape-attribute", 2)] * 2),
        (
            "class T:\n    def __torch_function__(cls, func, types, args=(), kwargs=None):\n        pass",
            [("torch-mode", 2)],
        ),
        ("class Mode(TorchDispatchMode):\n    pass", [("torch-mode", 1)]),
        # rule 5: builtins that open escape hatches, and dunder names
        ('x = getattr(torch, "sy" + "s")', [("builtin", 1)]),
        ('m = __import__("os")', [("builtin", 1)]),
        ('eval("1")', [("builtin", 1)]),
        ('def f():\n    open("x", "w")', [("builtin", 2)]),
        ("run = exec", [("builtin", 1)]),  # named, not called
        ("def f(x):\n    return vars(x), globals(), super()", [("builtin", 2)] * 3),
        # a module's or class's own name still reads the builtin until assigned; a default runs outside
        ("open = open", [("builtin", 1)]),
        ("class A:\n    open = 1\n    def f(self):\n        return open", [("builtin", 4)]),
        ("def f(open=open):\n    return open", [("builtin", 1)]),
        ("def f():\n    global open\n    return open", [("builtin", 3)]),
        ("xs = [input for input in [input]]", [("builtin", 1)]),  # said once for its line
        ("b = __builtins__", [("dunder-name", 1)]),
        ("__loader__.load_module('os')", [("dunder-name", 1)]),
        ("import torch as __builtins__", [("dunder-name", 1)]),
        ("from torch import nn as TorchFunctionish", [("torch-mode", 1)]),
        # rule 6: monkey-patching a module or anything reached from one
        ("import triton.language as tl\ntl.load = my_load", [("module-assignment", 2)]),
        ("import triton.language\ndel triton.language.store", [("module-assignment", 2)]),
        ("import torch\ntorch.add = lambda a, b: a", [("module-assignment", 2)]),
        ("import numpy as np\nnp.random.seed = None", [("module-assignment", 2), ("not-allowed", 2)]),
        ("from torch import nn\nnn.x = 1", [("module-assignment", 2)]),
        ("import torch\ntorch.x += 1", [("module-assignment", 2)]),
        ("import torch\nfor torch.x in []:\n    pass", [("module-assignment", 2)]),
        ("from course_lib.tuned import row_config\nrow_config.cache = {}", [("module-assignment", 2)]),
        # rule 7: decorators the grader does not know run code at import
        ("def deco(f):\n    return f\n@deco\ndef g():\n    pass", [("decorator", 3)]),
        ("import triton\n@triton.testing.do_bench\ndef g():\n    pass", [("decorator", 2), ("not-allowed", 2)]),
        # rule 8: match class patterns that read attributes by name; string annotations
        (
            "def f(fn):\n    match fn:\n        case object(__globals__=g):\n            return g",
            [("match-attribute", 3)],
        ),
        ("def f(x: 'eval(1)'):\n    pass", [("string-annotation", 1)]),
        ("from typing import List\ndef f() -> List['x']:\n    pass", [("string-annotation", 2)]),
        ("x: '__import__(1)' = 1", [("string-annotation", 1)]),
        # rule 9: an import that takes a watched builtin's name, in any scope, is refused where it is
        ("def unused():\n    from math import pi as exec\nexec('x')", [("builtin", 2), ("builtin", 3)]),
        ("from math import pi as eval\ndel eval\neval('1')", [("builtin", 1), ("builtin", 3)]),
        ("if False:\n    from math import e as getattr\ngetattr(x, 'numpy')", [("builtin", 2), ("builtin", 3)]),
        # rule 10: names the file never binds (Triton's interpreter puts inspect, np, ... among its globals)
        ("def f(x):\n    return dict(inspect.getmembers(inspect))", [("undefined-name", 2)]),
        ("def f(x):\n    return np.zeros(3), _interpreter", [("undefined-name", 2), ("undefined-name", 2)]),
        # what evaluates a string inside an allowed module is not allowed either
        ("import triton.language as tl\ntl.str_to_ty('fp32', None)", [("not-allowed", 2)]),
        # rule 11: classes from strings, metaclasses, hook methods, class patterns that read by position
        ('K = type("K", (), {"a": 1})', [("class-from-strings", 1)]),
        ("class M(type):\n    pass", [("metaclass", 1)]),
        ("class A(metaclass=M):\n    pass", [("metaclass", 1)]),
        ("class A:\n    def __getattr__(self, name):\n        return 1", [("hook-method", 2)]),
        (
            "class P:\n    pass\ndef f(x):\n    match x:\n        case P(y):\n            return y",
            [("match-attribute", 5)],
        ),
        # rule 12: a kernel's source must be read the same way by the grader and by Triton's interpreter, and a
        # kernel reads of the file's globals only kernels, constexprs and library names
        ("import triton\nSTASH = []\n@triton.jit\ndef k(x):\n    STASH.append(x)", [("kernel-global", 5)]),
        # an annotation makes no constexpr: the value stays a float, which Triton refuses to read in a kernel
        (
            "import triton\nimport triton.language as tl\nC: tl.constexpr = 1.5\n@triton.jit\ndef k(x):\n"
            "    tl.store(x, C)",
            [("kernel-global", 6)],
        ),
        ("import triton\ndef helper(v):\n    return v\n@triton.jit\ndef k(x):\n    helper(x)", [("kernel-global", 6)]),
        ("import triton\ndef k(x):\n    pass\nk = triton.jit(k)", [("jit-call", 4)]),
        ('import triton\n@triton.jit\ndef k(x):\n    """\ndef k(x):\n    """\n    pass', [("kernel-source", 5)]),
        # raw storage is a tensor's bytes outside every kernel's and the grader's sight
        ("def f(x):\n    return x.untyped_storage()[0]", [("escape-attribute", 2)]),
        # the main guard's body is skipped only where it cannot run: its else is checked, and a file that
        # binds __name__ (or puts more in the test) has its block checked too
        ("import torch\nif __name__ == '__main__':\n    pass\nelse:\n    torch.manual_seed(0)", [("not-allowed", 5)]),
        (
            "import torch\n__name__ = '__main__'\nif __name__ == '__main__':\n    torch.manual_seed(0)",
            [("dunder-name", 2), ("not-allowed", 4)],
        ),
        # ... however it is bound: a def, a class, an except-as; and a decorator .setter only of a property
        (
            "import torch\nclass P:\n    def setter(self, f):\n        return '__main__'\np = P()\n@p.setter\n"
            "def __name__():\n    pass\nif __name__ == '__main__':\n    torch.manual_seed(0)",
            [("decorator", 6), ("dunder-name", 7), ("not-allowed", 10)],
        ),
        ("class __name__:\n    pass", [("dunder-name", 1)]),
        ("try:\n    pass\nexcept Exception as __name__:\n    pass", [("dunder-name", 3)]),
        ("def __helper__():\n    pass", [("dunder-name", 1)]),
        ("import torch\nif __name__ == '__main__' or True:\n    torch.manual_seed(0)", [("not-allowed", 3)]),
        ("import torch\ndef f():\n    if __name__ == '__main__':\n        torch.manual_seed(0)", [("not-allowed", 4)]),
        # a name bound in one branch only, deleted, or only annotated is not bound: Triton's interpreter fills it
        (
            "try:\n    import numpy as np\nexcept ImportError:\n    pass\ndef f():\n    return np.float32",
            [("undefined-name", 6)],
        ),
        ("import numpy as np\ndel np\ndef f():\n    return np.float32", [("undefined-name", 4)]),
        (
            "try:\n    raise ValueError\nexcept ValueError as inspect:\n    inspect = 0\n"
            "def f():\n    return inspect.getmembers(f)",
            [("undefined-name", 6)],
        ),
        ("np: int\ndef f():\n    return np", [("undefined-name", 3)]),
        # the numeric conversions torch and Python call from C, where no guard sees
        ("class D:\n    def __index__(self):\n        return 0", [("hook-method", 2)]),
    ],
)
def test_escape_hatches_are_rejected_with_rule_and_line(source, expected):
    got = rules_and_lines(source)
    if not any(rule == "undefined-name" for rule, _ in expected):  # fragments read names defined elsewhere
        got = [(rule, line) for rule, line in got if rule != "undefined-name"]
    assert got == expected


def test_nothing_that_runs_strings_or_unpickles_is_on_the_allow_list(monkeypatch):
    assert precheck.never_allowed() == []
    assert precheck.audit() == []  # no allowed function's own source calls eval, exec, pickle.loads, ...
    monkeypatch.setattr(precheck, "NOT_ALLOWED", frozenset())
    assert "triton.language.str_to_ty calls eval()" in precheck.audit()  # the audit would see it
    for path in ("torch.load", "torch.hub", "typing.get_type_hints", "functools.singledispatch", "numpy.load"):
        assert precheck.resolve(path).problem, path


def test_a_file_nested_too_deeply_is_the_files_failure_not_the_graders(tmp_path):
    path = tmp_path / "vector_add.py"
    path.write_text("x = " + "+".join(["1"] * 5000) + "\n" + "y = " + "-(" * 700 + "1" + ")" * 700 + "\n")
    (finding,) = precheck.check_file(path)
    assert finding.rule == "unreadable" and "nests too deeply" in finding.message


def test_a_finding_names_the_line_and_tells_the_learner_what_is_allowed():
    source = '"""doc"""\n\nimport os\n\n\ndef vector_add(x, y, out):\n    os._exit(1)\n'
    findings = precheck.check_source(source)
    assert [(f.line, f.code) for f in findings] == [(3, "import os"), (7, "os._exit(1)")]
    assert "triton, torch" in findings[0].message and "course_lib.tuned" in findings[0].message
    assert "os._exit" in findings[1].message and "internals" in findings[1].message
    summary, details = precheck.describe(findings, "exercises/vector_add.py")
    assert summary == "the task file uses what the grader does not allow: vector_add.py line 3: import os"
    assert details[0] == "vector_add.py:3: import os" and details[2] == "vector_add.py:7: os._exit(1)"
    assert details[1].strip() == findings[0].message and len(details) == 4


def test_the_grader_import_message_says_so():
    (finding,) = precheck.check_source("from course_lib import grading")
    assert "may not import the course's grader" in finding.message


def test_a_multi_line_chain_is_reported_where_the_attribute_is():
    assert rules_and_lines("import torch\nx = (torch\n     .sys)") == [("escape-attribute", 3)]


def test_a_file_that_does_not_parse_is_left_to_the_grader(tmp_path):
    path = tmp_path / "vector_add.py"
    path.write_text("import os\ndef f(:\n", encoding="utf-8")
    assert precheck.check_file(path) == []
    with pytest.raises(SyntaxError):
        precheck.check_source(path.read_text(encoding="utf-8"))


def test_a_coding_cookie_does_not_hide_the_source(tmp_path):
    path = tmp_path / "vector_add.py"
    path.write_bytes(b"# -*- coding: latin-1 -*-\nname = '\xe9'\nimport os\n")
    assert [(f.rule, f.line) for f in precheck.check_file(path)] == [("import", 3)]


def test_the_allow_list():
    assert precheck.ALLOWED_IMPORTS >= {"triton", "torch", "math", "numpy", "course_lib.tuned"}
    assert not precheck.ALLOWED_IMPORTS & {"os", "sys", "course_lib", "importlib", "ctypes"}
    assert precheck.ALLOWED_PRIVATE_ATTRIBUTES == frozenset()


def test_a_file_too_deep_for_the_checker_is_its_failure_in_threads_side_by_side(monkeypatch):
    """The recursion limit is the process's: grading threads that check files side by side must not put
    it back under each other, and whatever CPython's compiler raises on a deep file (RecursionError,
    MemoryError, SystemError) is the file's failure, never the grader's."""
    import threading

    deep = (ROOT / "tests" / "hostile" / "deep_expression" / "vector_add.py").read_bytes()
    fine = (ROOT / "solutions" / "vector_add.py").read_bytes()
    seen, errors = [], []

    def check(data, n=4):
        for _ in range(n):
            try:
                seen.append((data is deep, [f.rule for f in precheck.check_bytes(data)]))
            except Exception as e:  # the grader's own failure
                errors.append(e)

    threads = [threading.Thread(target=check, args=(deep if i % 2 else fine,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert all(rules == (["unreadable"] if is_deep else []) for is_deep, rules in seen) and len(seen) == 24

    def compiler_out_of_depth(*args, **kwargs):
        raise SystemError("excessive stack use")

    monkeypatch.setattr(precheck, "compile", compiler_out_of_depth, raising=False)
    [finding] = precheck.check_bytes(fine)
    assert finding.rule == "unreadable" and "SystemError" in finding.message


def test_a_constexpr_global_may_carry_an_annotation():
    """`C: tl.constexpr = tl.constexpr(1.5)` is a constexpr value (every Triton from 3.6 on reads it in a kernel),
    so the pre-check takes it as it takes `C = tl.constexpr(1.5)`; with a plain value it is told the form."""
    kernel = "@triton.jit\ndef k(x):\n    tl.store(x, C)\n"
    head = "import triton\nimport triton.language as tl\n"
    assert precheck.check_source(head + "C: tl.constexpr = tl.constexpr(1.5)\n" + kernel) == []
    assert precheck.check_source(head + "C = tl.constexpr(1.5)\n" + kernel) == []
    [finding] = precheck.check_source(head + "C: tl.constexpr = 1.5\n" + kernel)
    assert "`C = tl.constexpr(...)`" in finding.message and "an annotation" in finding.message
