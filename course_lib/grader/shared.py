"""Tensors in a shared-memory file: how a case's inputs reach the submission's process, and how its
outputs come back, with nothing pickled.

The protected process packs every tensor's whole storage into one file (so a view that starts one
element into its buffer, or rows of a wider matrix, keep their geometry), and describes each tensor
in plain JSON: region, dtype, size, stride, offset. The file has no name: its descriptor is passed
to the worker over their socket, and the worker maps it and rebuilds the same views; what its
kernels store lands in the file. The protected process reads it back into its own memory, with a
size check, and judges that copy.
"""

from __future__ import annotations

import os
import tempfile

import torch

ALIGN = 4096  # each storage starts on its own page, with a gap: a stray access lands in no tensor

DTYPES = {
    str(d).replace("torch.", ""): d
    for d in (
        torch.float64, torch.float32, torch.float16, torch.bfloat16,
        torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool,
    )
}  # fmt: skip


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _folder() -> str:
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()


def _view(base: torch.Tensor, region: tuple[int, int], meta: dict) -> torch.Tensor:
    offset, nbytes = region
    dtype = DTYPES[meta["dtype"]]
    itemsize = torch.empty((), dtype=dtype).element_size()
    typed = base[offset : offset + nbytes].view(dtype)
    return typed.as_strided(meta["size"], meta["stride"], offset // itemsize + meta["offset"])


_CHUNK = 1 << 30  # bytes a read or write call moves at most (Linux moves under 2 GiB a call)
_PREADV = hasattr(os, "preadv")


def _write_all(fd: int, data: torch.Tensor) -> None:
    """Write the uint8 tensor ``data`` at the file's start, from its own memory (no bytes copy)."""
    view = memoryview(data.numpy())
    done = 0
    while done < len(view):
        wrote = os.pwrite(fd, view[done : done + _CHUNK], done)
        if wrote <= 0:  # no progress (a full disk answers ENOSPC instead; this guards the loop)
            raise OSError(f"the case file took no bytes at offset {done} of {len(view)}")
        done += wrote


class CaseFileDamaged(Exception):
    """The case file came back shorter than it was written: the worker truncated it."""


class SharedCase:
    """The protected side: ``with SharedCase(tensors) as shared: shared.fd, shared.message``.

    ``tensors`` maps names to CPU tensors (views of any layout). They are written into a file that
    has no name (created unlinked, readable by this user only: no other process can open it, and no
    stale file is left behind), whose descriptor is handed to the worker. This process never maps
    the file: after the worker's reply, ``read_back()`` copies its bytes into private memory, with a
    size check, so a worker that truncates or rewrites the file can fail its case and nothing more.
    ``shared.tensors`` holds the same names as views of that private copy."""

    def __init__(self, tensors: dict[str, torch.Tensor]):
        storages: dict[int, int] = {}  # storage data_ptr -> region index
        regions: list[tuple[int, int]] = []
        sources: list[torch.Tensor] = []
        metas: dict[str, dict] = {}
        end = 0
        for name, t in tensors.items():
            key = t.untyped_storage().data_ptr()
            if key not in storages:
                nbytes = max(t.untyped_storage().nbytes(), 1)
                storages[key] = len(regions)
                regions.append((end, nbytes))
                whole = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage())
                sources.append(whole)
                end += -(-(nbytes + ALIGN) // ALIGN) * ALIGN
            metas[name] = {
                "region": storages[key],
                "dtype": dtype_name(t.dtype),
                "size": list(t.shape),
                "stride": list(t.stride()),
                "offset": t.storage_offset(),
            }
        self.nbytes = max(end, ALIGN)
        self.regions, self.metas = regions, metas
        self._file = tempfile.TemporaryFile(dir=_folder(), prefix="course-case-")  # 0600, unlinked
        self.fd = self._file.fileno()
        os.ftruncate(self.fd, self.nbytes)
        # the file's bytes are first laid out in private memory, which then holds the inputs as written
        # (``tensors``), and written from there in one pass: one copy each way, where bytes objects made
        # three (a timed case of 1 GB took 6-17 s on two cores, inside the GPU's shared hold)
        private = torch.empty(self.nbytes, dtype=torch.uint8)
        end = 0
        for (offset, nbytes), whole in zip(regions, sources):
            private[end:offset].zero_()  # the gaps between regions read as zeros, as the file's holes do
            data = whole.view(torch.uint8).reshape(-1)[:nbytes]  # an empty storage: a region of 1 byte, none
            private[offset : offset + data.numel()].copy_(data)
            end = offset + data.numel()
        private[end:].zero_()
        _write_all(self.fd, private)
        self.tensors = self._views(private)
        self.message = {"nbytes": self.nbytes, "regions": regions, "tensors": metas}

    def read_back(self) -> torch.Tensor:
        """The file's bytes now, copied into private memory; CaseFileDamaged if it is shorter."""
        buffer = torch.empty(self.nbytes, dtype=torch.uint8)
        view = memoryview(buffer.numpy())
        done = 0
        while done < self.nbytes:
            piece = view[done : done + min(self.nbytes - done, _CHUNK)]
            if _PREADV:  # straight into the buffer
                got = os.preadv(self.fd, [piece], done)
            else:  # pragma: no cover - no preadv (older macOS)
                chunk = os.pread(self.fd, len(piece), done)
                piece[: len(chunk)] = chunk
                got = len(chunk)
            if not got:
                raise CaseFileDamaged(f"the case file holds {done} of its {self.nbytes} bytes")
            done += got
        return buffer

    def _views(self, base: torch.Tensor) -> dict[str, torch.Tensor]:
        return {name: _view(base, self.regions[m["region"]], m) for name, m in self.metas.items()}

    def returned_views(self) -> dict[str, torch.Tensor]:
        """The tensors as the worker left them, read back into private memory (CaseFileDamaged)."""
        return self._views(self.read_back())

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> SharedCase:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class MappedCase:
    """The worker's side of a SharedCase: the same views over the same file (by its descriptor), on
    ``device``.

    On a GPU each region is copied to the device and back (``copy_back``), whole, so that stores past
    an output and changes to an input reach the protected process too."""

    def __init__(self, message: dict, fd: int, device: str = "cpu"):
        import mmap

        nbytes = int(message["nbytes"])
        self._map = mmap.mmap(fd, nbytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        os.close(fd)
        self.base = torch.frombuffer(self._map, dtype=torch.uint8)
        self.regions = [tuple(r) for r in message["regions"]]
        self.device = device
        if device == "cpu":
            self.on_device = None
            self.tensors = {
                name: _view(self.base, self.regions[m["region"]], m) for name, m in message["tensors"].items()
            }
            return
        self.on_device = [self.base[o : o + n].to(device) for o, n in self.regions]
        self.tensors = {}
        for name, m in message["tensors"].items():
            region = self.on_device[m["region"]]
            self.tensors[name] = _view(region, (0, region.numel()), m)

    def copy_back(self) -> None:
        if self.on_device is None:
            return
        for (o, n), region in zip(self.regions, self.on_device):
            self.base[o : o + n].copy_(region.cpu())


def tensor_from_bytes(meta: dict, data: bytes) -> tuple[torch.Tensor, torch.Tensor]:
    """A returned tensor, rebuilt here from its bytes: (the tensor, the bytes of its whole span).

    ``data`` holds the span of the tensor's storage from its first element to its last (for a 2-D
    tensor with unit column stride, to the end of its last row: the padding between and after rows
    included); ``meta`` its dtype, size and stride (``claims.returned`` checked their types). The
    tensor is a view of a private copy of those bytes: its values and its layout are what the bytes
    show, whatever the worker's object said of itself. ValueError when they disagree."""
    dtype = DTYPES.get(meta.get("dtype"))
    shape, stride = meta.get("size"), meta.get("stride")
    if dtype is None or not isinstance(shape, list) or not isinstance(stride, list) or len(shape) != len(stride):
        raise ValueError(f"not a tensor description: {meta!r:.200}")
    itemsize = torch.empty((), dtype=dtype).element_size()
    if len(data) % itemsize:
        raise ValueError(f"{len(data)} bytes are no whole number of {dtype} elements")
    numel = 1
    for s in shape:
        numel *= s
    if numel == 0:
        return torch.empty(shape, dtype=dtype), torch.empty(0, dtype=torch.uint8)
    extent = 1 + sum((s - 1) * st for s, st in zip(shape, stride))
    if extent * itemsize > len(data):
        raise ValueError(f"size {tuple(shape)} and strides {tuple(stride)} reach past the {len(data)} bytes sent")
    span = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    return span.view(dtype).as_strided(shape, stride, 0), span
