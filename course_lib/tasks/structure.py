"""Checks on compiled code: how wide each global access of a kernel is, and through which argument.

A task's probe runs the learner's launcher in the worker while ``recording_launches`` keeps each
launch's arguments, compiles the last launch for sm_90 exactly as it was specialized
(``compilation.compile_for_args``: no GPU needed) and reads the PTX. Each global access becomes a
plain fact, judged in the grader's process:

* ``ld.global`` / ``st.global``: bytes per thread per instruction (``.v4.b32`` is 4 x 32 bits = 16
  bytes, ``.b16`` is 2); the spelling varies between Triton versions (``ld.global.L1::evict_last.v4.b32``,
  ``ld.global.nc.v2.b32``), so only the vector count and the bit width are read;
* ``cp.async`` (pipelined loads into shared memory): bytes per copy, the number after the addresses;
* ``cp.async.bulk.tensor``: a TMA copy of a whole block, through a tensor descriptor.

Each access is traced back through the PTX registers to the kernel parameter it addresses, and the
parameter to the tensor the launcher passed, so a fact reads "16-byte loads from x".
"""

from __future__ import annotations

import re
from contextlib import contextmanager

from .. import compilation, hooks

# --------------------------------------------------------------------------------------------------
# launches, as they were made


@contextmanager
def recording_launches():
    """``with recording_launches() as launches: launcher(...)``: (kernel, args, kwargs) of each launch."""
    launches: list = []

    def listen(fn_obj, args, kwargs):
        launches.append((fn_obj, tuple(args), dict(kwargs)))

    hooks.launch_listeners.append(listen)
    try:
        yield launches
    finally:
        hooks.launch_listeners.remove(listen)


def compile_launch(fn_obj, args, kwargs):
    """Compile a recorded launch for sm_90 as Triton specialized it; returns (compiled, specialization)."""
    fn = compilation.python_function(fn_obj)
    import inspect

    params = list(inspect.signature(fn).parameters)
    kernel_kwargs = {k: v for k, v in kwargs.items() if k in params}
    options = {k: kwargs[k] for k in ("num_warps", "num_stages") if kwargs.get(k) is not None}
    spec = compilation.specialization(fn_obj, *args, **kernel_kwargs)
    compiled = compilation.compile_for_args(fn_obj, *args, **kernel_kwargs, **options)
    return compiled, spec


# --------------------------------------------------------------------------------------------------
# reading PTX


_REGISTER = re.compile(r"%[a-z]+\d+")
_PARAM = re.compile(r"\b\w+_param_(\d+)\b")


def _operands(text: str) -> list[str]:
    """Split an instruction's operands on commas outside braces and brackets."""
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current.strip())
    return parts


def _instructions(ptx: str):
    """(opcode, operands, text) of each PTX instruction in a kernel's body; predicates, labels,
    comments and directives dropped."""
    body = ptx[ptx.find("{") + 1 :] if "{" in ptx else ptx
    kept = []
    depth = 0  # blocks opened inside the body: an inline-asm { ... } (a TMA wait loop) is no end
    for line in body.splitlines():
        line = line.split("//")[0].strip()
        if line == "{":
            depth += 1
            continue
        if line == "}":
            if depth == 0:  # the end of the kernel; debug sections follow
                break
            depth -= 1
            continue
        line = re.sub(r"^\$[\w.]+:", "", line).strip()  # a label: $L__BB0_2:
        if line and not line.startswith("."):  # .reg, .loc, .shared: directives, one a line
            kept.append(line)
    for raw in " ".join(kept).split(";"):
        text = re.sub(r"^@!?%p\d+\s+", "", raw.strip())
        if not text or text.startswith((".", "{", "}")):
            continue
        opcode, _, rest = text.partition(" ")
        yield opcode, _operands(rest), text


def _param_index_to_name(spec: list[compilation.ArgSpec]) -> dict[int, str]:
    """PTX parameter number -> kernel argument name. Constexprs have no parameter; a host tensor
    descriptor of rank r takes 1 + 2r (the 128-byte TMA descriptor, then its shape and strides)."""
    table, index = {}, 0
    for arg in spec:
        if arg.type == "constexpr":
            continue
        width = 1
        if arg.type.startswith("tensordesc"):
            rank = arg.type.count(",") + 1
            width = 1 + 2 * rank
        for k in range(width):
            table[index + k] = arg.name
        index += width
    return table


def accesses(ptx: str, spec: list[compilation.ArgSpec] | None = None) -> list[dict]:
    """Every global access in PTX: {"op": "load" | "store" | "cp.async" | "tma", "bytes": per thread
    and instruction (None for TMA), "argument": the kernel argument it addresses (or None), "line"}."""
    names = _param_index_to_name(spec or [])
    defs: dict[str, list[tuple[set[str], set[int]]]] = {}
    found = []
    for opcode, ops, text in _instructions(ptx):
        parts = opcode.split(".")
        kind = None
        if parts[0] in ("ld", "st") and "global" in parts:
            kind = "load" if parts[0] == "ld" else "store"
            address = next((o for o in ops if o.startswith("[")), "")
            size = compilation.access_bytes(parts)
        elif opcode.startswith("cp.async.bulk.tensor"):
            # the global side is the tensor map with its coordinates, [%rd, {...}]: second in a load (shared
            # memory first), first in a store
            kind, size = "tma", None
            address = next((o for o in ops if o.startswith("[") and "{" in o), "")
        elif opcode.startswith("cp.async") and "global" in parts and len(ops) >= 3:
            kind, address = "cp.async", ops[1]
            try:
                size = int(ops[2], 0)
            except ValueError:
                size = 0
        if kind is not None:
            found.append({"op": kind, "bytes": size, "registers": _REGISTER.findall(address), "line": text})
            if kind == "load":  # a load defines registers too: its values
                for reg in _REGISTER.findall(ops[0] if ops else ""):
                    defs.setdefault(reg, []).append((set(), set()))
            continue
        if not ops or parts[0] in ("st", "bar", "ret", "bra", "membar", "fence", "red"):
            continue
        targets = _REGISTER.findall(ops[0])
        sources = " ".join(ops[1:])
        regs = set(_REGISTER.findall(sources))
        params = {int(m) for m in _PARAM.findall(sources)}
        for reg in targets:
            defs.setdefault(reg, []).append((regs, params))
    for item in found:
        reached: set[int] = set()
        seen: set[str] = set()
        todo = list(item.pop("registers"))
        while todo:
            reg = todo.pop()
            if reg in seen:
                continue
            seen.add(reg)
            for regs, params in defs.get(reg, []):
                reached |= params
                todo.extend(regs - seen)
        pointers = [names[i] for i in sorted(reached) if i in names and _is_pointer_like(spec, names[i])]
        item["argument"] = pointers[0] if pointers else None
    return found


def _is_pointer_like(spec, name: str) -> bool:
    for arg in spec or []:
        if arg.name == name:
            return arg.type.startswith("*") or arg.type.startswith("tensordesc")
    return False


# --------------------------------------------------------------------------------------------------
# facts for a judge


def _tensor_of(value):
    base = getattr(value, "base", None)
    if base is not None and hasattr(value, "block_shape"):  # a host TensorDescriptor
        return base
    return value


def launch_facts(fn_obj, args, kwargs, roles: dict[str, object]) -> dict:
    """Plain facts about one recorded launch: its kernel, and each global access with its width and
    the role ("x", "out", ...) of the tensor it reads or writes. ``roles`` maps a role to the tensor
    the probe handed the launcher; an argument is matched to a role by its memory."""
    compiled, spec = compile_launch(fn_obj, args, kwargs)
    ptx = compilation.asm(compiled, "ptx")
    fn = compilation.python_function(fn_obj)
    import inspect

    params = list(inspect.signature(fn).parameters)
    values = dict(zip(params, args))
    values.update({k: v for k, v in kwargs.items() if k in params})

    def role_of(name):
        tensor = _tensor_of(values.get(name))
        if not hasattr(tensor, "data_ptr"):
            return None
        for role, t in roles.items():
            if tensor.data_ptr() == t.data_ptr() or _same_memory(tensor, t):
                return role
        return None

    found = accesses(ptx, spec)
    for item in found:
        item["role"] = role_of(item["argument"]) if item["argument"] else None
    return {
        "kernel": fn.__name__,
        "accesses": found,
        "tma": any(a["op"] == "tma" for a in found),
        "hints": alignment_hints(fn, params),
    }


def alignment_hints(fn, params: list[str]) -> list[dict]:
    """The kernel's tl.multiple_of calls, read from its source: what each hints, and whether that is a bare
    argument of the kernel (Triton attaches a hint only to a value computed in the kernel). Only ever
    used to choose which explanation a message gives, never for a verdict."""
    import ast
    import inspect
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "multiple_of":
            if node.args:
                first = node.args[0]
                found.append({"on": ast.unparse(first), "argument": isinstance(first, ast.Name) and first.id in params})
    return found


def _same_memory(a, b) -> bool:
    """Does tensor a start inside tensor b's memory (a view of it, e.g. b.view(...))?"""
    try:
        start, size = b.data_ptr(), b.untyped_storage().nbytes()
        base = b.untyped_storage().data_ptr()
        return base <= a.data_ptr() < base + size and start >= base
    except (RuntimeError, AttributeError):
        return False


def probe_launch(entry, inputs: dict, roles: tuple[str, ...]) -> dict:
    """Run ``entry(**inputs)`` once, recording its launches, and describe the last one (the one an
    autotuner keeps comes last). Plain data for a judge."""
    with recording_launches() as launches:
        entry(**inputs)
    if not launches:
        return {"launches": 0}
    facts = launch_facts(*launches[-1], roles={r: inputs[r] for r in roles})
    facts["launches"] = len(launches)
    return facts


# --------------------------------------------------------------------------------------------------
# judging


def widths(facts: dict, role: str, ops: tuple[str, ...]) -> dict:
    """{bytes: instructions} of the accesses to ``role`` of the given kinds ("tma" counted under 0)."""
    table: dict = {}
    for a in facts.get("accesses", []):
        if a.get("role") == role and a.get("op") in ops:
            key = a["bytes"] if a["bytes"] is not None else "TMA"
            table[key] = table.get(key, 0) + 1
    return table


def shown(table: dict) -> str:
    if not table:
        return "none"
    return ", ".join(f"{n} x {w}-byte" if w != "TMA" else f"{n} TMA block copies" for w, n in table.items())


def lines_for(facts: dict, role: str, limit: int = 4) -> list[str]:
    picked = [a["line"] for a in facts.get("accesses", []) if a.get("role") == role]
    more = f"  ... ({len(picked) - limit} more)" if len(picked) > limit else None
    return ["  " + line for line in picked[:limit]] + ([more] if more else [])
