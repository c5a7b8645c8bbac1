"""Tensors in a shared-memory file: how a case's inputs reach the submission's process, and how its
outputs come back, with nothing pickled.

The protected process packs every tensor's whole storage into one file (so a view that starts one
element into its buffer, or rows of a wider matrix, keep their geometry), and describes each tensor
in plain JSON: region, dtype, size, stride, offset. The worker maps the same file and rebuilds the
same views; what its kernels store lands in the file, where the protected process reads it.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from pathlib import Path

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


def _map(path: str, nbytes: int) -> torch.Tensor:
    return torch.from_file(path, shared=True, size=nbytes, dtype=torch.uint8)


def _view(base: torch.Tensor, region: tuple[int, int], meta: dict) -> torch.Tensor:
    offset, nbytes = region
    dtype = DTYPES[meta["dtype"]]
    itemsize = torch.empty((), dtype=dtype).element_size()
    typed = base[offset : offset + nbytes].view(dtype)
    return typed.as_strided(meta["size"], meta["stride"], offset // itemsize + meta["offset"])


class SharedCase:
    """The protected side: ``with SharedCase(tensors) as shared: shared.tensors[name] ...``.

    ``tensors`` maps names to CPU tensors (views of any layout). ``shared.tensors`` holds the same
    names as views of the shared file, with the same values; ``shared.message`` describes them."""

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
        self.path = os.path.join(_folder(), f"course-case-{uuid.uuid4().hex}")
        self.nbytes = max(end, ALIGN)
        with open(self.path, "wb") as f:
            f.truncate(self.nbytes)
        self.base = _map(self.path, self.nbytes)
        for (offset, nbytes), whole in zip(regions, sources):
            self.base[offset : offset + nbytes].copy_(whole.view(torch.uint8).reshape(-1)[:nbytes])
        self.tensors = {name: _view(self.base, regions[m["region"]], m) for name, m in metas.items()}
        self.message = {"path": self.path, "nbytes": self.nbytes, "regions": regions, "tensors": metas}

    def close(self) -> None:
        try:
            os.unlink(self.path)
        except OSError:
            pass

    def __enter__(self) -> SharedCase:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class MappedCase:
    """The worker's side of a SharedCase: the same views over the same file, on ``device``.

    On a GPU each region is copied to the device and back (``copy_back``), whole, so that stores past
    an output and changes to an input reach the protected process too."""

    def __init__(self, message: dict, device: str = "cpu"):
        self.base = _map(message["path"], message["nbytes"])
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


def tensor_from_bytes(meta: dict, data: bytes) -> torch.Tensor:
    """A returned tensor, rebuilt from its plain description and raw bytes; ValueError when they disagree."""
    dtype = DTYPES.get(meta.get("dtype"))
    shape = meta.get("size")
    if dtype is None or not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
        raise ValueError(f"not a tensor description: {meta!r}")
    numel = 1
    for s in shape:
        numel *= s
    itemsize = torch.empty((), dtype=dtype).element_size()
    if len(data) != numel * itemsize:
        raise ValueError(f"{len(data)} bytes for {numel} elements of {dtype}")
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(data), dtype=dtype).reshape(shape)


def cleanup_stale(max_age_s: float = 3600) -> None:
    """Remove case files left by a protected process that was killed (older than ``max_age_s``)."""
    import time

    now = time.time()
    for path in Path(_folder()).glob("course-case-*"):
        try:
            if now - path.stat().st_mtime > max_age_s:
                path.unlink()
        except OSError:
            pass
