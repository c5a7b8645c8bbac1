"""What a Gluon kernel's calls do on the CPU: values in torch, shared memory, mbarriers, TMA and wgmma.

Values are torch tensors (``Value``), computed in the dtype the kernel asks for; layouts are carried,
not simulated. Shared memory is a torch tensor per allocation, and ``.index(i)`` a view of one slot.
What is asynchronous on the GPU stays asynchronous here: a TMA copy writes its slot when its event
fires (the scheduler chooses when), a wgmma reads its operands from shared memory when it completes,
a TMA store reads shared memory when it is written out. Each mistake of the protocol that this
changes is named as it happens (``ProtocolError``), with the partition, the buffer, the slot and the
barrier's phase.
"""

from __future__ import annotations

import threading

import torch

from .scheduler import Event, Scheduler


class ProtocolError(Exception):
    """A mistake in the asynchronous protocol: the partition, the buffer, the slot, and what was in flight."""


class NotSimulated(Exception):
    """A Gluon call the CPU runtime does not implement."""


class KernelError(Exception):
    """The kernel does what compiled Gluon refuses too (a store of a number into shared memory, a wait on
    a barrier array not indexed, a load through something that is no pointer): a mistake, not a gap of
    the simulator."""


_TORCH = {
    "bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "fp64": torch.float64,
    "int8": torch.int8, "int16": torch.int16, "int32": torch.int32, "int64": torch.int64, "int1": torch.bool,
    "uint8": torch.uint8,
}  # fmt: skip


def torch_dtype(dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    name = getattr(dtype, "name", str(dtype))
    if name not in _TORCH:
        raise NotSimulated(f"dtype {name} is not simulated on the CPU")
    return _TORCH[name]


def triton_dtype(dtype: torch.dtype):
    import triton.language as tl

    names = {v: k for k, v in _TORCH.items()}
    return getattr(tl, {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp64": "float64"}.get(
        names[dtype], names[dtype]))  # fmt: skip


# ------------------------------------------------------------------------------------------ the program


TIMELINE_CAP = 100_000


class Program:
    """One program of the grid, run on the CPU: its ids, its scheduler, and what it allocated."""

    _local = threading.local()

    def __init__(self, pid: tuple, grid: tuple, scheduler: Scheduler):
        self.pid, self.grid, self.scheduler = pid, grid, scheduler
        self.allocations: list[SharedMemory] = []
        self.barriers: list[Barrier] = []
        self.unfenced: set = set()  # slots written from registers since the last fence_async_shared()
        self.copies_issued = 0  # TMA copies so far: each is a writer of its own in the clocks
        self.clocks: dict = {}  # partition id -> what it has seen (``clock_of``)
        self.writes: dict = {}  # slot key -> the last write into it (``_check_ordered_write``)
        # (partition id, slot key) -> the last wgmma of that partition that read the slot (``_check_read_done``)
        self.mma_reads: dict = {}
        self.mma_issued: dict = {}  # partition id -> its wgmmas in issue order, not yet seen complete
        # partition name -> [exp/exp2 evaluations while one of its own wgmmas was in flight, all of them]:
        # whether a warpgroup's softmax overlaps its own GEMMs (``exp_beside_mma``)
        self.exp_calls: dict = {}
        # partition name -> its barrier waits ("w", name), arrivals ("a", name) and exp/exp2 ("x", elements)
        # in program order (the first TIMELINE_CAP): whether a consumer's softmax runs inside its turn
        self.timeline: dict = {}
        self.mma_partitions: set = set()  # the partitions that issued a wgmma (all of them, uncapped)
        self.mma_flops: dict = {}  # partition name -> 2 M N K of every wgmma it issued: work done for nothing shows

    def note(self, kind: str, what: str | int = "") -> None:
        events = self.timeline.setdefault(self.partition_name(), [])
        if len(events) < TIMELINE_CAP:
            events.append((kind, what))

    @classmethod
    def now(cls) -> Program:
        program = getattr(cls._local, "program", None)
        if program is None:
            raise NotSimulated("a Gluon call outside a program run by course_lib.gluon_cpu")
        return program

    def partition_name(self) -> str:
        p = self.scheduler.current()
        return p.name if p is not None else "the program"


def exp_beside_mma(elements: int = 1) -> None:
    """Counts the elements of one exp or exp2 of the running partition, and whether one of its own wgmmas was
    in flight then (issued, and not yet seen complete by a warpgroup_mma_wait): a softmax overlapping a GEMM.
    Elements, not calls: a row's alpha is not worth a tile's probabilities."""
    program = getattr(Program._local, "program", None)
    if program is None:
        return
    me = program.scheduler.current()
    counts = program.exp_calls.setdefault(program.partition_name(), [0, 0])
    counts[0] += elements if program.mma_issued.get(id(me)) else 0
    counts[1] += elements
    program.note("x", elements)


def _bind_program(program: Program | None) -> None:
    Program._local.program = program


# ------------------------------------------------------------------------------------------------ values


class Value:
    """A tensor of the kernel (registers): a torch tensor, its layout carried along."""

    def __init__(self, data: torch.Tensor, layout=None):
        self.data, self.layout = data, layout

    @property
    def dtype(self):
        return triton_dtype(self.data.dtype)

    @property
    def shape(self):
        return list(self.data.shape)

    def to(self, dtype, **_):
        return Value(self.data.to(torch_dtype(dtype)), self.layout)

    def __repr__(self) -> str:
        return f"Value({tuple(self.data.shape)}, {self.data.dtype})"

    def __index__(self) -> int:
        if self.data.numel() != 1:
            raise KernelError(f"a tensor of shape {tuple(self.data.shape)} used as one number")
        return int(self.data.item())

    __int__ = __index__

    def __bool__(self) -> bool:
        return bool(self.data.item())

    __hash__ = object.__hash__  # __eq__ below is elementwise, as Gluon's

    def _op(self, other, fn, reverse=False):
        o = _value(other).data if isinstance(other, (Value, PendingMma)) else other
        if reverse and not isinstance(o, torch.Tensor):
            o = torch.tensor(o)  # a Python number: a weak type, the tensor's dtype wins as in Gluon
        result = fn(o, self.data) if reverse else fn(self.data, o)
        return Value(result, self.layout)

    def __eq__(self, o):
        return self._op(o, torch.eq)

    def __ne__(self, o):
        return self._op(o, torch.ne)

    def __rtruediv__(self, o):
        return self._op(o, torch.true_divide, True)

    def __rfloordiv__(self, o):
        return self._op(o, _tensor_div, True)

    def __rmod__(self, o):
        return self._op(o, _tensor_mod, True)

    def __xor__(self, o):
        return self._op(o, torch.bitwise_xor)

    def __lshift__(self, o):
        return self._op(o, torch.bitwise_left_shift)

    def __rshift__(self, o):
        return self._op(o, torch.bitwise_right_shift)

    def __invert__(self):
        return Value(~self.data, self.layout)

    def __add__(self, o):
        return self._op(o, torch.add)

    def __radd__(self, o):
        return self._op(o, torch.add, True)

    def __sub__(self, o):
        return self._op(o, torch.sub)

    def __rsub__(self, o):
        return self._op(o, torch.sub, True)

    def __mul__(self, o):
        return self._op(o, torch.mul)

    def __rmul__(self, o):
        return self._op(o, torch.mul, True)

    def __truediv__(self, o):
        return self._op(o, torch.true_divide)

    def __neg__(self):
        return Value(-self.data, self.layout)

    def __floordiv__(self, o):
        return self._op(o, _tensor_div)

    def __mod__(self, o):
        return self._op(o, _tensor_mod)

    def __and__(self, o):
        return self._op(o, torch.bitwise_and)

    def __or__(self, o):
        return self._op(o, torch.bitwise_or)

    def __lt__(self, o):
        return self._op(o, torch.lt)

    def __le__(self, o):
        return self._op(o, torch.le)

    def __gt__(self, o):
        return self._op(o, torch.gt)

    def __ge__(self, o):
        return self._op(o, torch.ge)

    def __getitem__(self, index):
        return Value(self.data[index], self.layout)


def _scalar_result(value):
    return Scalar(value) if type(value) is int else value


# A kernel's integer // and % are the GPU's: arith.divsi and arith.remsi, which round toward zero (C's rule), not
# Python's floor. (-1) // 2 is 0 there and (-1) % 2 is -1: a phase or an index written with Python's rule in mind
# (a negative count divided, a reversal by (-1 - i) % n) is right in Python and wrong on the GPU.
def _c_div(a, b):
    if not (_plain_int(a) and _plain_int(b)):
        return NotImplemented
    q = abs(int(a)) // abs(int(b))
    return q if (a >= 0) == (b >= 0) else -q


def _c_mod(a, b):
    q = _c_div(a, b)
    return NotImplemented if q is NotImplemented else int(a) - int(b) * q


def _plain_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _tensor_div(a, b):
    if _integer(a) and _integer(b):
        return torch.div(a, b, rounding_mode="trunc")
    return torch.floor_divide(a, b)


def _tensor_mod(a, b):
    if _integer(a) and _integer(b):
        return torch.fmod(a, b)  # the dividend's sign, as srem
    return torch.remainder(a, b)


def _integer(x) -> bool:
    if isinstance(x, torch.Tensor):
        return not x.dtype.is_floating_point and x.dtype != torch.bool
    return _plain_int(x)


class Scalar(int):
    """A scalar of the kernel (a program id, a loop counter, what they compute): an int that also has
    Gluon's ``.to(dtype)``. 32-bit wrap-around is not simulated."""

    def to(self, dtype, **_):
        t = torch_dtype(dtype)
        if t.is_floating_point:
            return Value(torch.tensor(float(self), dtype=t))
        return Scalar(int(self))

    def __add__(self, o):
        return _scalar_result(int.__add__(self, o))

    def __radd__(self, o):
        return _scalar_result(int.__radd__(self, o))

    def __sub__(self, o):
        return _scalar_result(int.__sub__(self, o))

    def __rsub__(self, o):
        return _scalar_result(int.__rsub__(self, o))

    def __mul__(self, o):
        return _scalar_result(int.__mul__(self, o))

    def __rmul__(self, o):
        return _scalar_result(int.__rmul__(self, o))

    def __floordiv__(self, o):
        return _scalar_result(_c_div(int(self), o))

    def __rfloordiv__(self, o):
        return _scalar_result(_c_div(o, int(self)))

    def __mod__(self, o):
        return _scalar_result(_c_mod(int(self), o))

    def __rmod__(self, o):
        return _scalar_result(_c_mod(o, int(self)))

    def __and__(self, o):
        return _scalar_result(int.__and__(self, o))

    def __xor__(self, o):
        return _scalar_result(int.__xor__(self, o))

    def __or__(self, o):
        return _scalar_result(int.__or__(self, o))


class Pointer:
    """A pointer argument of the kernel: its tensor, and an offset in elements (``ptr + i``)."""

    def __init__(self, tensor: torch.Tensor, offset=0):
        self.tensor, self.offset = tensor, offset

    @property
    def dtype(self):
        """The pointer's type, as Gluon gives it: ``ptr.dtype.element_ty`` is what it points to."""
        import triton.language as tl

        return tl.pointer_type(triton_dtype(self.tensor.dtype))

    def __add__(self, other):
        o = _value(other).data if isinstance(other, Value) else other
        return Pointer(self.tensor, self.offset + o)

    __radd__ = __add__

    def _where(self):
        flat = torch.as_strided(
            self.tensor, (self.tensor.untyped_storage().nbytes() // self.tensor.element_size(),), (1,), 0
        )
        offsets = torch.as_tensor(self.offset, dtype=torch.int64) + self.tensor.storage_offset()
        return flat, offsets


def _addressed(pointer, mask, what: str):
    """(the pointer's tensor as flat elements, the offsets, the lanes the mask keeps), every kept offset
    inside the tensor, else a ProtocolError naming the offsets."""
    if not isinstance(pointer, Pointer):
        raise KernelError(f"{what} of something that is not a pointer argument plus offsets")
    flat, offsets = pointer._where()
    keep = torch.ones_like(offsets, dtype=torch.bool) if mask is None else _value(mask).data.bool()
    bad = keep & ((offsets < 0) | (offsets >= flat.numel()))
    if bad.any():
        raise ProtocolError(
            f"{what} outside its tensor in {Program.now().partition_name()}: element offset(s) "
            f"{offsets[bad].flatten()[:6].tolist()} of a tensor of {flat.numel()} elements"
        )
    return flat, offsets, keep


def load(pointer, mask=None, other=None, **_):
    flat, offsets, keep = _addressed(pointer, mask, "gl.load")
    values = flat[offsets.clamp(0, max(flat.numel() - 1, 0))]
    if mask is not None:
        fill = 0 if other is None else (_value(other).data if isinstance(other, Value) else other)
        values = torch.where(keep, values, torch.as_tensor(fill, dtype=values.dtype))
    if values.dim() == 0 and not values.is_floating_point():
        return Scalar(int(values.item()))
    return Value(values.clone())


def store(pointer, value, mask=None, **_):
    flat, offsets, keep = _addressed(pointer, mask, "gl.store")
    data = _value(value).data if isinstance(value, (Value, PendingMma)) else torch.as_tensor(value)
    data = torch.broadcast_to(data, offsets.shape).to(flat.dtype)
    flat[offsets[keep]] = data[keep]


class PendingMma:
    """The accumulator of a wgmma still in flight: its value exists once the wgmma completes."""

    def __init__(self, op):
        self.op = op

    def value(self) -> Value:
        """A read of the accumulator in the kernel's own code: never right through this name. Before a wait
        saw the wgmma complete, its registers are not ready; after, only the value warpgroup_mma_wait
        returned is ordered after the wait (the name the wgmma returned may be read before it)."""
        if self.op.seen_at is None:
            raise ProtocolError(
                f"{self.op.partition} used the accumulator of {self.op.what} before waiting for it "
                "(warpgroup_mma_wait): on the GPU its registers are not ready"
            )
        raise ProtocolError(
            f"{self.op.partition} used the accumulator of {self.op.what} through the name the wgmma returned, "
            "not the value warpgroup_mma_wait returned: on the GPU only the wait's result is ordered after the "
            "wait, so list it in deps and use what comes back (acc = warpgroup_mma_wait(0, deps=(acc,)))"
        )

    def __getattr__(self, name):  # acc.to(...), acc.shape: a read of the accumulator
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.value(), name)

    def _read(self, *_):
        self.value()

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _read
    __neg__ = __lt__ = __le__ = __gt__ = __ge__ = _read


def _value(x) -> Value:
    if isinstance(x, PendingMma):
        return x.value()
    if isinstance(x, Value):
        return x
    raise KernelError(f"expected a tensor, got {type(x).__name__}")


# ---------------------------------------------------------------------------------------- shared memory


class SharedMemory:
    """An allocation of shared memory, or one slot of it (``index``)."""

    def __init__(self, data: torch.Tensor, layout, name: str, slot: tuple = (), root=None):
        self.data, self.layout, self.name, self.slot = data, layout, name, slot
        self.root = root if root is not None else self

    @property
    def dtype(self):
        return triton_dtype(self.data.dtype)

    @property
    def shape(self):
        return list(self.data.shape)

    @property
    def type(self):
        return self  # .type.shape, as Gluon's shared_memory_descriptor has

    def index(self, i):
        i = int(i)
        if not 0 <= i < self.data.shape[0]:
            raise ProtocolError(f"{self.where()}.index({i}) is outside its {self.data.shape[0]} slots")
        return SharedMemory(self.data[i], self.layout, self.name, (*self.slot, i), self.root)

    def reshape(self, shape):
        return SharedMemory(self.data.reshape([int(x) for x in shape]), self.layout, self.name, self.slot, self.root)

    def permute(self, order):
        return SharedMemory(self.data.permute([int(x) for x in order]), self.layout, self.name, self.slot, self.root)

    def where(self) -> str:
        return str(self.name) + "".join(f"[{i}]" for i in self.slot)

    def key(self) -> tuple:
        return (id(self.root), self.slot)

    def overlaps(self, other: SharedMemory) -> bool:
        if self.root is not other.root:
            return False
        n = min(len(self.slot), len(other.slot))
        return self.slot[:n] == other.slot[:n]

    def store(self, value) -> None:
        program = Program.now()
        _check_free(program, self, "a store from registers")
        me = id(program.scheduler.current())
        _check_ordered_write(program, self, me, tick(program), f"a store from registers by {program.partition_name()}")
        self.data.copy_(_value(value).data.to(self.data.dtype))
        _written_by_registers(program, self)

    def load(self, layout=None) -> Value:
        program = Program.now()
        _check_landed(program, self, "a load into registers")
        return Value(self.data.clone(), layout)


class _Name(str):
    """The name of an allocation: the kernel's own variable, found once the assignment has happened
    (in the frame that allocated it), else its number and shape."""

    def __new__(cls, fallback: str, frame, owner_ref):
        self = super().__new__(cls, fallback)
        self.fallback, self.frame, self.owner_ref, self.found = fallback, frame, owner_ref, None
        return self

    def __str__(self) -> str:
        if self.found is None and self.frame is not None:
            owner = self.owner_ref()
            for name, value in self.frame.f_locals.items():
                if value is owner:
                    self.found = name
                    break
        return self.found or self.fallback

    def __format__(self, spec):
        return format(str(self), spec)


def allocate_shared_memory(dtype, shape, layout, value=None):
    import sys
    import weakref

    program = Program.now()
    shape = [int(s) for s in shape]
    frame = sys._getframe(1)
    if type(layout).__name__ == "MBarrierLayout":
        barriers = Barriers(shape, f"barriers #{len(program.barriers) + 1}")
        barriers.name = _Name(barriers.name, frame, weakref.ref(barriers))
        for i, b in enumerate(barriers.items):
            b.name = _Indexed(barriers.name, i)
        program.barriers.append(barriers)
        return barriers
    name = f"shared memory #{len(program.allocations) + 1} ({' x '.join(map(str, shape))})"
    memory = SharedMemory(torch.zeros(shape, dtype=torch_dtype(dtype)), layout, name)
    memory.name = _Name(name, frame, weakref.ref(memory))
    program.allocations.append(memory)
    if value is not None:
        memory.store(value)
    return memory


# --------------------------------------------------------------------------------------------- mbarriers


class Barrier:
    """One mbarrier: the arrivals its phase waits for, the bytes expected (tx), and the phases completed."""

    def __init__(self, name: str):
        self.name = name
        self.count = None  # set by init
        self.pending = 0
        self.tx = 0
        self.completed = 0  # phases completed: the current phase's parity is completed & 1
        self.invalid = False
        self.copies: list = []  # TMA copies in flight that arrive here: (what, the phase they were issued in)
        # happens-before: what the arrivals of the current phase had seen (their partitions' clocks), and
        # what every completed phase had: a wait that passes sees the latter
        self.arrived_clock: dict = {}
        self.done_clock: dict = {}
        self.arrivers: dict = {}  # who arrived on it in the whole run, and how often: a deadlock's report says

    def index(self, i):
        raise ProtocolError(f"{self.name} is one barrier: it has no .index()")

    def _check(self, what: str) -> None:
        if self.count is None:
            raise ProtocolError(f"{what} on {self.name}, which was never initialized (mbarrier.init)")
        if self.invalid:
            raise ProtocolError(f"{what} on {self.name} after mbarrier.invalidate")

    def _maybe_complete(self) -> None:
        if self.pending == 0 and self.tx == 0:
            early = [what for what, phase in self.copies if phase == self.completed]
            if early:
                raise ProtocolError(
                    f"{self.name} completed its phase {self.completed} while {early[0]} on it was still in "
                    f"flight: its expect counted fewer bytes than the copies of this round bring (expect the "
                    "bytes of every tile the slot receives)"
                )
            self.completed += 1
            self.pending = self.count
            _join(self.done_clock, self.arrived_clock)
            self.arrived_clock = {}

    def arrive(self, count: int, who: str, clock: dict | None = None) -> None:
        self._check("an arrive")
        if count > self.pending:
            raise ProtocolError(
                f"{who} arrived {count} time(s) on {self.name}, whose phase {self.completed} waits for "
                f"{self.pending} more arrival(s) of {self.count}: more arrivals than the barrier counts (the "
                "next round's arrive or expect came before this round's phase completed: is a wait missing, or "
                "on the wrong phase, before the slot is used again?)"
            )
        self.pending -= count
        self.arrivers[who] = self.arrivers.get(who, 0) + count
        _join(self.arrived_clock, clock or {})
        self._maybe_complete()

    def expect(self, nbytes: int, who: str, clock: dict | None = None) -> None:
        self._check("an expect")
        self.tx += nbytes
        self.arrive(1, who, clock)

    def landed(self, nbytes: int, what: str, clock: dict | None = None) -> None:
        self._check(f"{what} landing")
        if nbytes > self.tx:
            if self.tx == 0 and self.pending == self.count:
                why = "no mbarrier.expect announced the bytes of this round on it (expect before the copies)"
            else:
                why = "its expect counted fewer bytes than the copies of this round bring"
            raise ProtocolError(
                f"{what} brought {nbytes} bytes to {self.name}, which expected {self.tx} more in phase "
                f"{self.completed}: {why}"
            )
        self.tx -= nbytes
        _join(self.arrived_clock, clock or {})
        self._maybe_complete()

    def passed(self, parity: int) -> bool:
        """mbarrier.wait(bar, parity) returns once the phase of that parity has completed: the current
        phase's parity differs from it."""
        return (self.completed & 1) != (int(parity) & 1)

    def state(self) -> str:
        """The phase and what it still waits for, and who has arrived on it in the run: a barrier nothing ever
        arrived on (a turn handed to the wrong warpgroup, an arrive on the wrong slot) says so."""
        if self.arrivers:
            by = ", ".join(f"{who} {n} time(s)" for who, n in self.arrivers.items())
            arrived = f"arrived on in this run by {by}"
        else:
            arrived = "nothing has arrived on it in this run: which partition's arrive was meant for it?"
        return (
            f"{self.completed} phase(s) completed, the current one's parity {self.completed & 1}, "
            f"{self.pending} of {self.count} arrival(s) and {self.tx} byte(s) still to come; {arrived}"
        )


class _Indexed:
    """barriers[i]'s name, read when a message is written (the allocation's name is found late)."""

    def __init__(self, base, i: int):
        self.base, self.i = base, i

    def __str__(self) -> str:
        return f"{self.base}[{self.i}]"

    __format__ = lambda self, spec: format(str(self), spec)  # noqa: E731


class Barriers:
    def __init__(self, shape, name: str):
        self.shape = shape
        self.items = [Barrier(f"{name}[{i}]") for i in range(shape[0])]
        self.name = name

    def index(self, i):
        return self.items[int(i)]


def _barrier(b) -> Barrier:
    if isinstance(b, Barriers) and len(b.items) == 1:
        return b.items[0]
    if not isinstance(b, Barrier):
        hint = ": index the barrier array first (.index(s))" if isinstance(b, Barriers) else ""
        raise KernelError(f"expected one mbarrier, got {getattr(b, 'name', type(b).__name__)}{hint}")
    return b


def mbarrier_init(bar, count):
    b = _barrier(bar)
    b.count, b.pending, b.tx, b.completed, b.invalid = int(count), int(count), 0, 0, False


def mbarrier_invalidate(bar):
    _barrier(bar).invalid = True


def mbarrier_expect(bar, nbytes=None, pred=True, **_):
    if not pred:
        return
    program = Program.now()
    _barrier(bar).expect(int(nbytes), program.partition_name(), tick(program))
    program.scheduler.point()


def mbarrier_arrive(bar, *, count=1, pred=True, **_):
    if not pred:
        return
    program = Program.now()
    b = _barrier(bar)
    b.arrive(int(count), program.partition_name(), tick(program))
    program.note("a", str(b.name))
    program.scheduler.point()


def mbarrier_wait(bar, phase, pred=True, deps=(), **_):
    if not pred:
        return
    program = Program.now()
    b = _barrier(bar)
    b._check("a wait")
    parity = int(phase) & 1
    program.scheduler.point(lambda: b.passed(parity), lambda: f"{b.name} for parity {parity} ({b.state()})")
    _join(clock_of(program), b.done_clock)  # what the completed phases' arrivals had seen, this partition sees
    program.note("w", str(b.name))


# ------------------------------------------------------------------------------------ TMA descriptors


class BlockType:
    def __init__(self, shape, dtype):
        self.shape, self.element_ty = [int(s) for s in shape], dtype
        self.nbytes = torch.tensor([], dtype=torch_dtype(dtype)).element_size()
        for s in self.shape:
            self.nbytes *= s


class Descriptor:
    """A host TensorDescriptor, as the kernel sees it."""

    def __init__(self, host):
        self.base = host.base
        self.shape = [int(s) for s in host.shape]
        self.strides = [int(s) for s in host.strides]
        self.block_shape = [int(s) for s in host.block_shape]
        self.layout = host.layout
        self.dtype = triton_dtype(self.base.dtype)
        self.block_type = BlockType(self.block_shape, self.dtype)
        self.nbytes_per_cta = self.block_type.nbytes

    def _region(self, coord):
        """(the block's slices into global memory, the block's slices that fall inside the tensor)."""
        coord = [int(c) for c in coord]
        outer, inner = [], []
        for c, size, extent in zip(coord, self.block_shape, self.shape):
            lo, hi = max(c, 0), min(c + size, extent)
            hi = max(hi, lo)
            outer.append(slice(lo, hi))
            inner.append(slice(lo - c, hi - c))
        return tuple(outer), tuple(inner)

    def view(self):
        return torch.as_strided(self.base, self.shape, self.strides)

    def read(self, coord) -> torch.Tensor:
        block = torch.zeros(self.block_shape, dtype=self.base.dtype)  # zero fill past the edges
        outer, inner = self._region(coord)
        block[inner] = self.view()[outer]
        return block

    def write(self, coord, block: torch.Tensor) -> None:
        outer, inner = self._region(coord)  # what falls past the edges is dropped
        self.view()[outer] = block[inner].to(self.base.dtype)


# ----------------------------------------------------------------------- asynchronous operations in flight


class _Op:
    def __init__(self, what: str, partition: str):
        self.what, self.partition, self.done, self.result = what, partition, False, None
        self.seen_at = None  # the issuer's clock count at the warpgroup_mma_wait that saw it complete


def _in_flight(program: Program) -> list:
    return [e for e in program.scheduler.events if not e.done]


def _check_landed(program: Program, memory: SharedMemory, reader: str) -> None:
    """A read of ``memory`` (a wgmma's operand, a load into registers, a TMA store's source) while a TMA
    copy into it is still in flight: the read sees the slot's old contents."""
    for e in _in_flight(program):
        target = getattr(e, "writes", None)
        if target is not None and target.overlaps(memory):
            raise ProtocolError(
                f"{reader} in {program.partition_name()} read {memory.where()} while {e.what} was still in "
                f"flight: wait on its barrier ({e.barrier.name}) for the phase of this round first"
            )


def _check_free(program: Program, memory: SharedMemory, writer: str) -> None:
    """A write into ``memory`` (a TMA copy, a store from registers) while an operation still reads it: a
    wgmma in flight, or a TMA store not yet waited on."""
    for e in _in_flight(program):
        for source in getattr(e, "reads", ()):
            if source.overlaps(memory):
                raise ProtocolError(
                    f"{writer} in {program.partition_name()} overwrites {memory.where()} while {e.what} still "
                    f"reads it: free a slot only after what reads it has completed (warpgroup_mma_wait, "
                    "tma.store_wait)"
                )
    _check_read_done(program, memory, writer)


def _check_read_done(program: Program, memory: SharedMemory, writer: str) -> None:
    """The same rule, whatever order the scheduler chose: a write into a slot that a wgmma read must be
    ordered after the wait that saw that wgmma complete (the reader waits, then arrives; the writer waits on
    that arrival). A slot freed between a wgmma's issue and its wait passes on most runs and fails on some;
    here it fails on every one."""
    me = program.scheduler.current()
    clock = clock_of(program, me)
    for (reader, key), op in program.mma_reads.items():
        if key[0] != memory.key()[0]:
            continue
        n = min(len(key[1]), len(memory.slot))
        if key[1][:n] != memory.slot[:n]:
            continue
        if op.seen_at is None or (reader != id(me) and clock.get(reader, 0) < op.seen_at):
            raise ProtocolError(
                f"{writer} in {program.partition_name()} overwrites {memory.where()}, which {op.what} reads, with "
                "nothing ordering the write after the warpgroup_mma_wait that saw that wgmma complete: the "
                "slot was freed (its barrier arrived on) before that wait, or never. Wait for the wgmma "
                "first (warpgroup_mma_wait), then arrive on the slot's empty barrier"
            )


# ------------------------------------------------------------- happens-before between the partitions
#
# Vector clocks: each partition counts its own barrier operations and shared-memory writes, and knows
# how far it has seen every other partition's count. An arrive (and an expect, and a TMA copy landing,
# with its issuer's clock at the issue) hands what the arriving partition has seen to the barrier; a
# wait that passes hands what the completed phases had seen to the waiter; a worker partition starts
# with what the program had seen, and the program sees every worker once gl.warp_specialize has
# joined them. A write is ordered after another partition's write when the writer has seen it.


def _join(into: dict, other: dict) -> None:
    for k, v in other.items():
        if v > into.get(k, 0):
            into[k] = v


def clock_of(program: Program, partition=None) -> dict:
    """The clock of ``partition`` (the running one by default): {partition id: count seen}."""
    partition = partition if partition is not None else program.scheduler.current()
    return program.clocks.setdefault(id(partition), {})


def tick(program: Program) -> dict:
    """Count one operation of the running partition; a snapshot of its clock after it."""
    me = program.scheduler.current()
    clock = clock_of(program, me)
    clock[id(me)] = clock.get(id(me), 0) + 1
    return dict(clock)


def started(program: Program, parent, child) -> None:
    """``child`` (a worker partition) starts having seen all that ``parent`` has."""
    _join(clock_of(program, child), clock_of(program, parent))


def joined(program: Program, into, partitions) -> None:
    """``into`` waited for ``partitions`` to end: it has seen all they had."""
    for p in partitions:
        _join(clock_of(program, into), clock_of(program, p))


def _check_ordered_write(program: Program, memory: SharedMemory, me, clock: dict, what: str, issuer=None) -> None:
    """The rule: two writers (partitions, or TMA copies) write one slot only in an order that a barrier
    gives them. ``me``: the writer's key in the clocks (a partition's id, or a copy's own key); ``issuer``:
    for a copy, the partition that issued it. Two copies issued by one partition are in their issue order
    (a slot refilled before its reader is done shows as a read of a copy in flight, or an overwrite under
    a wgmma); a partition's own store after its copy is not: it must wait on the copy's barrier."""
    writes = program.writes  # slot key -> (writer key, its count at the write, what, issuer)
    for key, (other, count, said, by) in writes.items():
        if other == me or key[0] != memory.key()[0] or (issuer is not None and by == issuer):
            continue
        n = min(len(key[1]), len(memory.slot))
        if key[1][:n] == memory.slot[:n] and clock.get(other, 0) < count:
            raise ProtocolError(
                f"{what} writes {memory.where()} with nothing ordering it after {said}, into the same slot: two "
                "partitions write one slot in no order (a barrier must order them: the first arrives after its "
                "write, or its copy lands on it, and the second waits on that barrier before its own)"
            )
    writes[memory.key()] = (me, clock.get(me, 0), what, issuer)


def _written_by_registers(program: Program, memory: SharedMemory) -> None:
    program.unfenced = program.unfenced | {memory.key()}


def tma_load(desc, coord, barrier, result, pred=True, **_):
    if not pred:
        return
    program = Program.now()
    b = _barrier(barrier)
    b._check("a TMA copy")
    who = program.partition_name()
    _check_free(program, result, f"a TMA copy of {_desc_name(desc)}")
    coord = [int(c) for c in coord]
    phase = f"for phase {b.completed} of {b.name}"
    what = f"the TMA copy of {_desc_name(desc)} at {coord} into {result.where()} (by {who}, {phase})"
    # the copy writes as a writer of its own, ordered after its issue; only a wait on its barrier (or
    # on one that an arrival made after such a wait) orders another write after the copy's
    program.copies_issued += 1
    copy = ("copy", program.copies_issued)
    written, issuer = {**tick(program), copy: 1}, id(program.scheduler.current())

    def land():
        _check_ordered_write(program, result, copy, written, what, issuer)
        result.data.copy_(desc.read(coord).to(result.data.dtype))
        b.copies.remove(mine)
        b.landed(desc.block_type.nbytes, what, written)

    mine = (what, b.completed)
    b.copies.append(mine)

    event = Event(what, land)
    event.writes, event.barrier = result, b
    program.scheduler.add(event)
    program.scheduler.point()


def _desc_name(desc) -> str:
    return f"a {' x '.join(map(str, desc.block_shape))} block"


def tma_store(desc, coord, src, **_):
    program = Program.now()
    who = program.partition_name()
    if src.key() in program.unfenced:
        raise ProtocolError(
            f"{who} issued a TMA store of {src.where()}, written from registers with no fence_async_shared() "
            "between: the TMA engine may read it before the writes are visible"
        )
    _check_landed(program, src, "a TMA store")
    coord = [int(c) for c in coord]
    what = f"the TMA store of {src.where()} at {coord} (by {who})"

    def write():  # shared memory is read when the store is carried out, as on the GPU
        desc.write(coord, src.data)

    event = Event(what, write, owner=who, lazy=True)
    event.reads, event.kind = (src,), "store"
    program.scheduler.add(event)
    program.scheduler.point()


def tma_store_wait(pendings, **_):
    program = Program.now()
    who = program.partition_name()
    mine = [e for e in _in_flight(program) if getattr(e, "kind", "") == "store" and e.owner == who]
    for e in mine[: max(0, len(mine) - int(pendings))]:
        program.scheduler.force(e)
    program.scheduler.point()


def fence_async_shared(**_):
    program = Program.now()
    program.unfenced = set()
    program.scheduler.point()


def warpgroup_mma(a, b, acc, *, use_acc=True, is_async=False, **_):
    program = Program.now()
    who = program.partition_name()
    operands = [x for x in (a, b) if isinstance(x, SharedMemory)]
    for x in operands:
        _check_landed(program, x, "a wgmma")
    op = _Op(f"the wgmma reading {' and '.join(x.where() for x in operands)} (by {who})", who)
    me = id(program.scheduler.current())
    for x in operands:  # the slots it reads, until a wait of this partition sees it complete
        program.mma_reads[(me, x.key())] = op
    program.mma_issued.setdefault(me, []).append(op)
    program.mma_partitions.add(who)
    (m, k), n = a.shape[-2:], b.shape[-1]
    program.mma_flops[who] = program.mma_flops.get(who, 0) + 2 * int(m) * int(n) * int(k)
    if is_async and not isinstance(a, SharedMemory):
        op.registers = a  # A from registers: they must stay alive until a wait sees this wgmma complete
    previous = [e for e in _in_flight(program) if getattr(e, "kind", "") == "mma" and e.owner == who]

    def complete():
        for e in previous:  # wgmma groups complete in order
            if not e.done:
                program.scheduler.force(e)
        lhs = a.data if isinstance(a, SharedMemory) else _value(a).data
        chained = acc.op.result if isinstance(acc, PendingMma) else _value(acc)  # the wgmma before, in order
        start = chained.data if use_acc else torch.zeros_like(chained.data)
        product = lhs.float() @ b.data.float()
        op.result = Value((start.float() + product).to(start.dtype), chained.layout if use_acc else None)
        op.done = True

    if not is_async:
        complete()
        program.mma_issued[me].remove(op)
        op.seen_at = tick(program)[me]  # a synchronous wgmma has completed when it returns
        program.scheduler.point()
        return op.result
    event = Event(op.what, complete, owner=who, lazy=True)
    event.reads, event.kind, event.op = tuple(operands), "mma", op
    program.scheduler.add(event)
    program.scheduler.point()
    return PendingMma(op)


def _dep_names(deps) -> list[str]:
    """A wait's deps as the learner would recognize them: a pending wgmma by what it computes."""
    return [getattr(getattr(d, "op", None), "what", None) or "a tensor" for d in deps or ()]


def warpgroup_mma_wait(num_outstanding=0, deps=None, **_):
    program = Program.now()
    who = program.partition_name()
    mine = [e for e in _in_flight(program) if getattr(e, "kind", "") == "mma" and e.owner == who]
    for e in mine[: max(0, len(mine) - int(num_outstanding))]:
        program.scheduler.force(e)
    issued = program.mma_issued.get(id(program.scheduler.current()), [])
    complete = issued[: max(0, len(issued) - int(num_outstanding))]  # this wait sees these complete
    for op in complete:
        registers = getattr(op, "registers", None)
        if registers is not None and not any(d is registers for d in deps or ()):
            alike = [d for d in deps or () if isinstance(d, Value) and isinstance(registers, Value)
                     and d is not registers and d.shape == registers.shape and d.dtype == registers.dtype]  # fmt: skip
            why = (
                " The deps hold a tensor of its shape and dtype, but not the one the wgmma reads: if that name "
                "was given a new value (the next tile's probabilities?) before this wait, keep the new one under "
                "another name until the wait; if the wgmma was given an expression (p.to(...)), name it first "
                "and pass that name to both."
                if alike
                else ""
            )
            named = any(isinstance(d, PendingMma) and d.op is op for d in deps or ())
            if not named and int(num_outstanding) == 0 and any(isinstance(d, PendingMma) for d in deps or ()):
                # the wait names another wgmma (the scores') and, with nothing left outstanding, completes this
                # one too: the mistake is the count, not the deps
                raise ProtocolError(
                    f"{who}'s warpgroup_mma_wait(num_outstanding=0, deps=({', '.join(_dep_names(deps))})) waits for "
                    f"every wgmma in flight, {op.what} too, which its deps do not name: was it meant to wait for "
                    f"the earlier wgmma alone? num_outstanding=1 leaves the last one issued ({op.what}) in flight, "
                    "running beside what comes next (the overlap inside a warpgroup); a wait of 0 here also takes "
                    "its register operand without keeping it alive."
                )
            raise ProtocolError(
                f"{who} waited for {op.what}, whose A operand comes from registers, without that tensor in the "
                f"deps of the wait that sees it complete (this warpgroup_mma_wait(num_outstanding="
                f"{int(num_outstanding)})): on the GPU nothing then keeps those registers from being reused while "
                f"the wgmma still reads them.{why} Keep it alive until that wait: warpgroup_mma_wait(0, deps=(acc, "
                "p))"
            )
    if complete:
        count = tick(program)[id(program.scheduler.current())]
        for op in complete:
            op.seen_at = count
        del issued[: len(complete)]
    program.scheduler.point()
    if deps is None:
        raise NotSimulated("warpgroup_mma_wait needs deps")
    # a wgmma this wait saw complete comes back as its value; one it left outstanding stays pending, even if
    # the simulator has already carried it out (on the GPU its registers are not ready)
    results = [d.op.result if isinstance(d, PendingMma) and d.op.seen_at is not None else d for d in deps]
    return results[0] if len(results) == 1 else tuple(results)
