"""``.npy`` and ``.npz`` files, read through a :class:`ByteSource` without pickle.

A ``.npy`` file is ``\\x93NUMPY`` + version + a length-prefixed Python-literal header
(parsed by numpy's own safe header readers) + the raw array. Only the header and the
array bytes are read; object arrays are refused (the equivalent of ``allow_pickle=False``).
A ``.npz`` is a ZIP of ``.npy`` members; stored members are read in place by range,
deflated ones (``np.savez_compressed``) are inflated in memory.
"""

from __future__ import annotations

import io
import math
import struct
import zlib

import numpy as np
import torch

from pos_geometry._describe import describe
from pos_geometry._limits import check_elements, check_inflate
from pos_geometry.errors import CheckpointFormatError
from pos_geometry.sources._zip import (
    SliceSource,
    ZipEntry,
    check_member,
    member_offset,
    read_directory,
    read_member,
)
from pos_geometry.sources.byte_source import ByteSource, BytesSource, read_into

__all__ = ["NPY_MAGIC", "npy_header", "read_npy", "npz_members", "npz_member_header", "read_npz_member"]

NPY_MAGIC = b"\x93NUMPY"
_MAX_HEADER = 1 << 20
_FIX = "Re-download the file or re-save it with numpy.save."


def npy_header(src: ByteSource) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """``(shape, fortran_order, dtype, data offset)`` of a ``.npy`` source: only its header is read.

    Raises:
        CheckpointFormatError: bad magic or version, malformed or oversized header, or an object or
            structured dtype.
    """
    if src.size < 12:
        raise CheckpointFormatError(
            f"{src.name!r} is truncated: {src.size} bytes cannot hold a .npy header. {_FIX}"
        )
    head = src.read(0, 8)
    if head[:6] != NPY_MAGIC or head[6:8] not in (b"\x01\x00", b"\x02\x00"):
        raise CheckpointFormatError(
            f"{src.name!r} is not a .npy file of format 1.0 or 2.0 (starts with {head[:8]!r}). {_FIX}"
        )
    v1 = head[6] == 1
    n_len = 2 if v1 else 4
    len_bytes = src.read(8, n_len)
    (hlen,) = struct.unpack("<H" if v1 else "<I", len_bytes)
    start = 8 + n_len + hlen
    if hlen > _MAX_HEADER or start > src.size:
        raise CheckpointFormatError(
            f"{src.name!r}: the .npy header claims {hlen} bytes ({src.size} in the file): truncated or corrupted. {_FIX}"
        )
    reader = np.lib.format.read_array_header_1_0 if v1 else np.lib.format.read_array_header_2_0
    try:
        shape, fortran, dtype = reader(
            io.BytesIO(len_bytes + src.read(8 + n_len, hlen)), max_header_size=_MAX_HEADER
        )
    except Exception as exc:  # numpy's literal-eval header parser raises several types on damaged input
        raise CheckpointFormatError(
            f"{src.name!r}: the .npy header is malformed ({exc!s:.200}). {_FIX}"
        ) from exc
    if not all(0 <= d <= 2**40 for d in shape):
        raise CheckpointFormatError(f"{src.name!r}: the .npy header gives shape {describe(shape)}. {_FIX}")
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None:
        raise CheckpointFormatError(
            f"{src.name!r} holds an array of dtype {dtype}, not a plain numeric array; object arrays would need "
            f"pickle and are refused. Save the table as a float array. {_FIX}"
        )
    return tuple(shape), bool(fortran), dtype, start


def read_npy(src: ByteSource) -> torch.Tensor:
    """The array in a ``.npy`` source as a CPU tensor (stored dtype, native byte order, C order).

    Raises:
        CheckpointFormatError: see :func:`npy_header`; also fewer data bytes than the header promises,
            or a dtype torch cannot hold.
    """
    shape, fortran, dtype, start = npy_header(src)
    nbytes = math.prod(shape) * dtype.itemsize
    check_elements(f"the array in {src.name!r}", shape, "Check the file's .npy header.")
    if start + nbytes > src.size:
        raise CheckpointFormatError(
            f"{src.name!r} is truncated: shape {shape} of {dtype} needs {nbytes} bytes after the header, "
            f"only {src.size - start} are there. {_FIX}"
        )
    raw = np.empty(nbytes, dtype=np.uint8)
    read_into(src, start, memoryview(raw))  # straight into the array's memory: no intermediate bytes
    arr = np.frombuffer(raw, dtype=dtype).reshape(shape, order="F" if fortran else "C")
    native = np.ascontiguousarray(arr, dtype=dtype.newbyteorder("="))
    try:
        return torch.from_numpy(native.copy() if not native.flags.writeable else native)
    except TypeError as exc:
        raise CheckpointFormatError(f"{src.name!r}: dtype {dtype} has no torch equivalent. {_FIX}") from exc


def npz_members(src: ByteSource) -> dict[str, ZipEntry]:
    """Array name (member name without ``.npy``) -> ZIP entry, for every ``.npy`` member."""
    return {n.removesuffix(".npy"): e for n, e in read_directory(src).items() if n.endswith(".npy")}


def read_npz_member(src: ByteSource, entry: ZipEntry) -> torch.Tensor:
    """One member of a ``.npz`` as a tensor: read in place when stored, inflated when compressed."""
    name = f"{src.name}::{entry.name}"
    if entry.method == 0:
        if entry.compressed_size != entry.size:
            raise CheckpointFormatError(f"{name!r}: stored member with mismatched sizes. {_FIX}")
        view = SliceSource(src, member_offset(src, entry), entry.size, name=name)
        return read_npy(view)
    check_inflate(f"the compressed member {name!r}", entry.size)
    return read_npy(BytesSource(read_member(src, entry, allow_deflate=True), name=name))


def npz_member_header(src: ByteSource, entry: ZipEntry) -> tuple[tuple[int, ...], np.dtype]:
    """``(shape, dtype)`` of one ``.npz`` member, from its ``.npy`` header only: a stored member's first
    bytes are read in place, a deflated one's are inflated up to the header's bound (never the whole member)."""
    name = f"{src.name}::{entry.name}"
    if entry.method == 0:
        check_member(src, entry, 0, entry.size)
        shape, _, dtype, _ = npy_header(SliceSource(src, member_offset(src, entry), entry.size, name=name))
        return shape, dtype
    check_member(src, entry, 0, entry.size, allow_deflate=True)
    packed = src.read(member_offset(src, entry), min(entry.compressed_size, _MAX_HEADER + 64))
    try:
        head = zlib.decompressobj(-15).decompress(packed, _MAX_HEADER + 16)
    except zlib.error as exc:
        raise CheckpointFormatError(f"{name!r} does not inflate ({exc}). {_FIX}") from exc
    shape, _, dtype, _ = npy_header(BytesSource(head, name=name))
    return shape, dtype
