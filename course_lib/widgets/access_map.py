"""The access map: which program loaded or stored each element of a small tensor, drawn from the
interpreter's memory-access tap (CPU mode).

    amap = course_lib.widgets.access_map(lambda: add_kernel[(3,)](x, y, out, 70, BLOCK_SIZE=32), x=x, out=out)
    print(amap.text())            # per access: warps, sectors touched against the fewest possible
    display(amap.panel())         # the picture: one panel per (loads | stores, tensor)

Each element is a cell, coloured by the program that touched it (colours repeat every 10
programs). A 1-D tensor is drawn 32 elements to a row, so one row is one warp's worth; a 2-D tensor
as it is. Cells that only a masked-off lane pointed at are grey and hatched; masked-off lanes that
pointed outside the tensor are counted in the caption. Black lines are the edges of 32-byte sectors
(the memory unit a warp's request is served in), drawn where neighbouring elements sit in different
sectors, so a strided or transposed view shows its own sector pattern. Dots mark one warp: lanes
0-31 of program 0's first access, one element each, in the row-major order of the block. That is
the convention of ``course_lib.traffic.warp_sectors`` (and of the sector counts in the text). A
compiled kernel gives each thread several consecutive elements (Triton's blocked layout, e.g. 4
fp32 per thread, a 16-byte vector), so a real warp covers 32 x that many elements; the sectors the
block touches in all are the same either way.

Only in CPU mode: the picture needs the address of every lane, which only the interpreter sees. In
GPU mode ``access_map`` raises a RuntimeError saying to restart with COURSE_MODE=cpu (the notebooks
guard the call with ``runtime.is_cpu()``). matplotlib and ipywidgets are imported inside functions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import hooks, runtime, traffic
from ._common import _heading, _image, _pre

ROW = traffic.WARP  # a 1-D tensor is drawn this many elements to a row: one warp of one element per lane
MAX_ELEMENTS = 8192  # a bigger tensor makes cells too small to read
PALETTE = 10  # matplotlib's tab10: colours repeat every 10 programs


@dataclass
class Site:
    """One tl.load or tl.store (a source line) as it touched one tensor."""

    kind: str
    where: str  # kernel:line
    tensor: str
    requests: int = 0  # groups of 32 lanes with an active lane inside the tensor
    sectors: int = 0
    ideal: int = 0

    @property
    def per_request(self) -> float:
        return self.sectors / self.requests if self.requests else 0.0


@dataclass
class TensorAccess:
    """Every load (or every store) of one tensor, element by element (flat, row-major)."""

    kind: str
    tensor: str
    shape: tuple
    owner: np.ndarray  # program number that first touched each element; -1: none
    masked: np.ndarray  # a masked-off lane pointed at the element
    warp: np.ndarray  # the element is one of the 32 lanes of program 0's first access
    touches: np.ndarray  # how many active lanes touched each element
    masked_outside: int = 0  # masked-off lanes that pointed outside the tensor


@dataclass
class AccessMap:
    tensors: dict  # name -> (shape, strides, itemsize, sector id per element)
    accesses: list[TensorAccess] = field(default_factory=list)
    sites: list[Site] = field(default_factory=list)
    grid: list | None = None
    programs: int = 0

    def access(self, kind: str, tensor: str) -> TensorAccess | None:
        return next((a for a in self.accesses if a.kind == kind and a.tensor == tensor), None)

    def text(self) -> str:
        """Per access site: warps, sectors touched and the fewest possible; per tensor: coverage."""
        rows = [f"{'access':<7}{'tensor':<9}{'where':<26}{'warps':>7}{'sectors':>9}{'per warp':>10}{'fewest':>8}"]
        for s in self.sites:
            rows.append(
                f"{s.kind:<7}{s.tensor:<9}{s.where:<26}{s.requests:>7}{s.sectors:>9}{s.per_request:>10.2f}{s.ideal:>8}"
            )
        for a in self.accesses:
            n = a.owner.size
            touched = int((a.owner >= 0).sum())
            twice = int((a.touches > 1).sum())
            programs = len(set(a.owner[a.owner >= 0].tolist()))
            line = f"{a.kind}s of {a.tensor}: {touched} of {n} elements by {programs} programs"
            only_masked = int((a.masked & (a.owner < 0)).sum())
            if only_masked:
                line += f"; {only_masked} reached only by masked-off lanes"
            if a.masked_outside:
                line += f"; {a.masked_outside} masked-off lanes pointed outside {a.tensor}"
            if twice:
                line += f"; {twice} touched more than once"
            rows.append(line)
        rows.append(
            f"grid {tuple(self.grid) if self.grid else '?'}: {self.programs} programs. A warp here is 32 "
            "consecutive lanes of a block, one element each (course_lib.traffic's count); 'fewest' is the "
            "fewest 32-byte sectors that hold each warp's elements."
        )
        return "\n".join(rows)

    def figure(self):
        """One panel per tensor that was loaded, then one per tensor that was stored."""
        from matplotlib.figure import Figure

        panels = [a for kind in ("load", "store") for a in self.accesses if a.kind == kind]
        shapes = [_grid_shape(a.shape) for a in panels]
        width = 7.2
        heights = [max(0.9, min(6.0, width * r / max(c, 1))) + 0.6 for r, c in shapes]
        fig = Figure(figsize=(width, sum(heights) + 0.4))
        axes = fig.subplots(len(panels), 1, squeeze=False, gridspec_kw={"height_ratios": heights})[:, 0]
        for ax, a in zip(axes, panels):
            self._draw(ax, a)
        fig.tight_layout()
        return fig

    def _draw(self, ax, a: TensorAccess) -> None:
        import matplotlib as mpl
        from matplotlib.collections import LineCollection, PatchCollection
        from matplotlib.patches import Rectangle

        rows, cols = _grid_shape(a.shape)
        n = a.owner.size
        colours = mpl.colormaps["tab10"].colors
        rgb = np.ones((rows * cols, 3))
        seen = a.owner >= 0
        rgb[:n][seen] = np.asarray([colours[p % PALETTE] for p in a.owner[seen]]).reshape(-1, 3)
        greyed = a.masked & ~seen
        rgb[:n][greyed] = 0.85
        if rows * cols > n:
            rgb[n:] = 0.97  # past the end of a 1-D tensor drawn 32 to a row
        ax.imshow(rgb.reshape(rows, cols, 3), interpolation="nearest", aspect="equal")
        hatched = [Rectangle((i % cols - 0.5, i // cols - 0.5), 1, 1) for i in np.flatnonzero(greyed)]
        if hatched:
            ax.add_collection(PatchCollection(hatched, facecolor="none", edgecolor="0.45", hatch="///", linewidth=0))
        sector = np.full(rows * cols, -1, dtype=np.int64)
        sector[:n] = self.tensors[a.tensor][3]
        ax.add_collection(LineCollection(_sector_edges(sector.reshape(rows, cols)), colors="black", linewidths=1.2))
        lanes = np.flatnonzero(a.warp)
        if lanes.size:
            ax.scatter(lanes % cols, lanes // cols, s=6, c="black", marker="o")
        ax.set_xlim(-0.5, cols - 0.5)
        ax.set_ylim(rows - 0.5, -0.5)
        ax.set_xticks([])
        ax.set_yticks([])
        shape = "x".join(str(s) for s in a.shape)
        drawn = f", drawn {ROW} to a row" if len(a.shape) == 1 else ""
        note = [f"{a.kind}s of {a.tensor} ({shape}{drawn})"]
        site = [s for s in self.sites if s.kind == a.kind and s.tensor == a.tensor]
        if site:
            sectors, ideal = sum(s.sectors for s in site), sum(s.ideal for s in site)
            requests = sum(s.requests for s in site)
            note.append(f"{sectors / max(requests, 1):.1f} sectors per warp, fewest {ideal / max(requests, 1):.1f}")
        if a.masked_outside:
            note.append(f"{a.masked_outside} masked lanes outside")
        ax.set_title("; ".join(note), fontsize=9, loc="left")

    def panel(self):
        """The picture and the text in one ipywidgets box (a PNG, so it reads the same when saved)."""
        import ipywidgets as w

        caption = (
            "Colour: the program that touched the element (repeats every 10). Grey, hatched: only a masked-off "
            "lane pointed there. Black lines: 32-byte sector edges. Dots: lanes 0-31 of program 0's first "
            "access, one element each (a compiled kernel gives each thread several consecutive elements, so "
            "its warp covers more)."
        )
        return w.VBox([w.HTML(_heading("access map", caption)), _image(self.figure()), w.HTML(_pre(self.text()))])


def _grid_shape(shape: tuple) -> tuple[int, int]:
    if len(shape) == 1:
        return max(1, -(-shape[0] // ROW)), min(ROW, max(shape[0], 1))
    rows = int(np.prod(shape[:-1]))
    return rows, int(shape[-1])


def _sector_edges(sector: np.ndarray) -> list:
    """Cell edges between neighbours in different sectors, and around the drawn cells."""
    rows, cols = sector.shape
    segments = []
    for r, c in zip(*np.nonzero(sector[:, 1:] != sector[:, :-1])):
        segments.append([(c + 0.5, r - 0.5), (c + 0.5, r + 0.5)])
    for r, c in zip(*np.nonzero(sector[1:, :] != sector[:-1, :])):
        segments.append([(c - 0.5, r + 0.5), (c + 0.5, r + 0.5)])
    segments += [
        [(-0.5, -0.5), (cols - 0.5, -0.5)],
        [(-0.5, rows - 0.5), (cols - 0.5, rows - 0.5)],
        [(-0.5, -0.5), (-0.5, rows - 0.5)],
        [(cols - 0.5, -0.5), (cols - 0.5, rows - 0.5)],
    ]
    return segments


def _program() -> tuple[int, list[int] | None]:
    """The running program's number (x slowest, z fastest) and the grid, from the interpreter."""
    pid, grid = hooks.running_program()
    return (0 if pid is None else pid), grid


class _Listener:
    def __init__(self, tensors: dict):
        self.info = {}
        for name, t in tensors.items():
            addresses = hooks.element_addresses(t)  # (numel,) row-major
            order = np.argsort(addresses)
            self.info[name] = (addresses, order, addresses[order], t.element_size(), tuple(t.shape))
        self.map = AccessMap({})
        self.sites: dict[tuple, Site] = {}
        self.first_program: int | None = None

    def _entry(self, kind: str, name: str) -> TensorAccess:
        found = self.map.access(kind, name)
        if found is None:
            n = self.info[name][0].size
            found = TensorAccess(
                kind, name, self.info[name][4], np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=bool),
                np.zeros(n, dtype=bool), np.zeros(n, dtype=np.int64),
            )  # fmt: skip
            self.map.accesses.append(found)
        return found

    def __call__(self, kind, kernel, addresses, active, itemsize) -> None:
        kind = "load" if kind == "load" else "store"
        addr = np.asarray(addresses, dtype=np.uint64).reshape(-1)
        act = np.asarray(active, dtype=bool).reshape(-1)
        pid, grid = _program()
        if grid is not None:
            self.map.grid = grid
            self.map.programs = max(self.map.programs, pid + 1)
        if self.first_program is None:
            self.first_program = pid
        where = traffic._source_line(kernel)
        # the access belongs to the tensor most of its active lanes point into (masked-off lanes
        # of x's last block may well point into y, allocated next to it)
        best, best_count = None, (0, 0)
        for name, (_, order, sorted_addr, size, _) in self.info.items():
            if size != itemsize:
                continue
            pos = np.minimum(np.searchsorted(sorted_addr, addr), sorted_addr.size - 1)
            hit = sorted_addr[pos] == addr
            count = (int((hit & act).sum()), int((hit & ~act).sum()))
            if count > best_count:
                best, best_count = (name, order[pos], hit), count
        if best is None:
            return
        name, element, hit = best
        entry = self._entry(kind, name)
        live = hit & act
        fresh = element[live][entry.owner[element[live]] < 0]
        entry.owner[fresh] = pid
        np.add.at(entry.touches, element[live], 1)
        entry.masked[element[hit & ~act]] = True
        entry.masked_outside += int((~act & ~hit).sum())
        first_warp = live[: traffic.WARP]
        if pid == self.first_program and not entry.warp.any() and first_warp.any():
            entry.warp[element[: traffic.WARP][first_warp]] = True
        site = self.sites.get((kind, where, name))
        if site is None:
            site = self.sites[(kind, where, name)] = Site(kind, where, name)
            self.map.sites.append(site)
        requests, sectors, ideal = traffic.warp_sectors(addr, live, itemsize)
        site.requests += requests
        site.sectors += sectors
        site.ideal += ideal


def access_map(launch, **tensors) -> AccessMap:
    """Run ``launch()`` (a call that launches Triton kernels) in the interpreter and map every load
    and store of the named tensors, element by element: ``access_map(lambda: k[grid](x, out), x=x, out=out)``.

    CPU mode only; each tensor may have up to MAX_ELEMENTS elements."""
    if not runtime.is_cpu():
        raise RuntimeError(
            "the access map needs CPU mode, where Triton's interpreter sees the address of every lane; a "
            "compiled kernel shows none. Restart the kernel with COURSE_MODE=cpu to draw it."
        )
    if not tensors:
        raise ValueError("name the tensors to map: access_map(launch, x=x, out=out)")
    for name, t in tensors.items():
        if t.numel() > MAX_ELEMENTS or t.dim() > 2 or t.numel() == 0:
            raise ValueError(
                f"`{name}` has shape {tuple(t.shape)}: the access map draws 1-D or 2-D tensors of 1 to "
                f"{MAX_ELEMENTS} elements; launch on a smaller one"
            )
    listener = _Listener(tensors)
    hooks.access_listeners.append(listener)
    try:
        launch()
    finally:
        hooks.access_listeners.remove(listener)
    amap = listener.map
    amap.tensors = {
        name: (tuple(t.shape), tuple(t.stride()), t.element_size(), _sectors(t)) for name, t in tensors.items()
    }
    return amap


def _sectors(t) -> np.ndarray:
    """The 32-byte sector of each element's first byte (row-major)."""
    return (hooks.element_addresses(t) // np.uint64(traffic.SECTOR)).astype(np.int64)
