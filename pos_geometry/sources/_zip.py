"""A minimal, bounded ZIP reader over a :class:`ByteSource` (for PyTorch checkpoints and ``.npz``).

Reads the end-of-central-directory record (and the zip64 one that ``torch.save`` always
writes), the central directory, and then only the member byte ranges asked for. Every
offset and size is checked against the file before it is used, so a corrupted or hostile
archive yields a :class:`CheckpointFormatError`, never a huge or out-of-bounds read.
``zipfile`` is not used because it reads through a file object without such bounds and
cannot hand out a slice of a member without reading from its start.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

from pos_geometry.errors import CheckpointFormatError
from pos_geometry.sources.byte_source import ByteSource, read_into

__all__ = [
    "ZipEntry",
    "read_directory",
    "member_offset",
    "check_member",
    "read_member",
    "read_member_into",
    "SliceSource",
    "MAX_DIRECTORY_BYTES",
]

MAX_DIRECTORY_BYTES = 64 * 1024 * 1024
_EOCD = struct.Struct("<4s4H2IH")  # 22 bytes
_LOC64 = struct.Struct("<4sIQI")  # 20 bytes
_EOCD64 = struct.Struct("<4sQ2H2I4Q")  # 56 bytes
_CENTRAL = struct.Struct("<4s6H3I5H2I")  # 46 bytes
_LOCAL = struct.Struct("<4s5H3I2H")  # 30 bytes
_FIX = "Re-download the file (or re-save it with torch.save)."


@dataclass(frozen=True)
class ZipEntry:
    """One member of the archive, from the central directory."""

    name: str
    header_offset: int
    compressed_size: int
    size: int
    method: int  # 0 stored, 8 deflate


def _bad(src: ByteSource, what: str) -> CheckpointFormatError:
    return CheckpointFormatError(f"{src.name!r} is not a readable ZIP archive: {what}. {_FIX}")


def _find_eocd(src: ByteSource) -> tuple[int, tuple]:
    if src.size < _EOCD.size:
        raise CheckpointFormatError(
            f"{src.name!r} is truncated: {src.size} bytes cannot hold a ZIP end-of-central-directory record. {_FIX}"
        )
    tail_len = min(src.size, _EOCD.size + 0xFFFF)
    tail = src.read(src.size - _EOCD.size, _EOCD.size)  # no archive comment: the common case, 22 bytes
    if tail[:4] == b"PK\x05\x06" and tail[-2:] == b"\0\0":
        return src.size - _EOCD.size, _EOCD.unpack(tail)
    tail = src.read(src.size - tail_len, tail_len)
    pos = tail.rfind(b"PK\x05\x06")
    while pos >= 0:
        fields = _EOCD.unpack_from(tail, pos) if pos + _EOCD.size <= len(tail) else None
        if fields is not None and pos + _EOCD.size + fields[-1] == len(tail):
            return src.size - tail_len + pos, fields
        pos = tail.rfind(b"PK\x05\x06", 0, pos)
    raise CheckpointFormatError(
        f"{src.name!r} is truncated or not a ZIP archive: no end-of-central-directory record in its "
        f"last {tail_len} bytes. {_FIX}"
    )


def _directory_extent(src: ByteSource) -> tuple[int, int, int]:
    """``(number of entries, directory offset, directory size)``, zip64-aware and bounds-checked."""
    eocd_pos, (_, disk, cd_disk, _n_here, n, cd_size, cd_offset, _clen) = _find_eocd(src)
    limit = eocd_pos
    if eocd_pos >= _LOC64.size:
        sig, _, eocd64_pos, _ = _LOC64.unpack(src.read(eocd_pos - _LOC64.size, _LOC64.size))
        if sig == b"PK\x06\x07":
            limit = eocd_pos - _LOC64.size
            if eocd64_pos + _EOCD64.size > limit:
                raise _bad(src, f"the zip64 locator points to offset {eocd64_pos}, outside the file")
            fields = _EOCD64.unpack(src.read(eocd64_pos, _EOCD64.size))
            if fields[0] != b"PK\x06\x06":
                raise _bad(src, f"no zip64 end-of-central-directory record at offset {eocd64_pos}")
            disk, cd_disk, n, cd_size, cd_offset = fields[4], fields[5], fields[7], fields[8], fields[9]
            limit = eocd64_pos
        elif 0xFFFFFFFF in (cd_size, cd_offset) or n == 0xFFFF:
            raise _bad(src, "the directory needs zip64 fields but the zip64 record is missing (truncated?)")
    if disk != 0 or cd_disk != 0:
        raise _bad(src, f"it is a multi-disk archive (disk {disk}, directory on disk {cd_disk})")
    if cd_offset + cd_size > limit:
        raise _bad(src, f"the central directory ({cd_size} bytes at offset {cd_offset}) runs past its end")
    if cd_size > MAX_DIRECTORY_BYTES or n * _CENTRAL.size > cd_size:
        raise _bad(src, f"the central directory claims {n} entries in {cd_size} bytes")
    return n, cd_offset, cd_size


def _zip64_extra(extra: bytes, usize: int, csize: int, offset: int) -> tuple[int, int, int]:
    pos = 0
    while pos + 4 <= len(extra):
        tag, length = struct.unpack_from("<2H", extra, pos)
        body = extra[pos + 4 : pos + 4 + length]
        if tag == 1:
            values = [usize, csize, offset]
            i = 0
            for j, v in enumerate(values):
                if v == 0xFFFFFFFF:
                    if i + 8 > len(body):
                        raise ValueError("zip64 extra field too short")
                    (values[j],) = struct.unpack_from("<Q", body, i)
                    i += 8
            return values[0], values[1], values[2]
        pos += 4 + length
    return usize, csize, offset


def read_directory(src: ByteSource) -> dict[str, ZipEntry]:
    """Member name -> :class:`ZipEntry`, from the central directory (reads EOCD + directory only)."""
    n, cd_offset, cd_size = _directory_extent(src)
    cd = src.read(cd_offset, cd_size)
    entries: dict[str, ZipEntry] = {}
    pos = 0
    for i in range(n):
        if pos + _CENTRAL.size > len(cd) or cd[pos : pos + 4] != b"PK\x01\x02":
            raise _bad(src, f"central-directory entry {i} of {n} at offset {cd_offset + pos} is damaged")
        f = _CENTRAL.unpack_from(cd, pos)
        flags, method, csize, usize, nlen, xlen, clen, offset = (
            f[3],
            f[4],
            f[8],
            f[9],
            f[10],
            f[11],
            f[12],
            f[16],
        )
        end = pos + _CENTRAL.size + nlen + xlen + clen
        if end > len(cd):
            raise _bad(src, f"central-directory entry {i} runs past the directory")
        raw_name = cd[pos + _CENTRAL.size : pos + _CENTRAL.size + nlen]
        try:
            name = raw_name.decode("utf-8" if flags & 0x800 else "cp437")
            extra = cd[pos + _CENTRAL.size + nlen : pos + _CENTRAL.size + nlen + xlen]
            usize, csize, offset = _zip64_extra(extra, usize, csize, offset)
        except (UnicodeDecodeError, ValueError) as exc:
            raise _bad(src, f"central-directory entry {i} ({raw_name[:60]!r}) is damaged: {exc}") from exc
        if flags & 0x1:
            raise _bad(src, f"member {name!r} is encrypted")
        if name in entries:
            raise _bad(src, f"member {name!r} appears twice")
        if offset + _LOCAL.size + csize > src.size:
            raise _bad(src, f"member {name!r} ({csize} bytes at offset {offset}) lies outside the file")
        entries[name] = ZipEntry(name, offset, csize, usize, method)
        pos = end
    return entries


def member_offset(src: ByteSource, entry: ZipEntry) -> int:
    """Absolute file offset of ``entry``'s data (reads its 30-byte local header)."""
    f = _LOCAL.unpack(src.read(entry.header_offset, _LOCAL.size))
    start = entry.header_offset + _LOCAL.size + f[9] + f[10]
    if f[0] != b"PK\x03\x04" or start + entry.compressed_size > src.size:
        raise _bad(src, f"the local header of {entry.name!r} at offset {entry.header_offset} is damaged")
    return start


def check_member(
    src: ByteSource, entry: ZipEntry, start: int, length: int, allow_deflate: bool = False
) -> None:
    """Raise :class:`CheckpointFormatError` unless ``[start, start + length)`` of ``entry`` can be read.

    The range must lie inside the member; a stored member's sizes must agree (so its declared
    size is bounded by the file); a compressed one is only accepted when ``allow_deflate`` and its
    declared size is within deflate's maximum ratio. Call it before allocating ``length`` bytes.
    """
    if start < 0 or length < 0 or start + length > entry.size:
        raise _bad(
            src, f"bytes [{start}, {start + length}) are outside member {entry.name!r} ({entry.size} bytes)"
        )
    if entry.method == 0:
        if entry.compressed_size != entry.size:
            raise _bad(src, f"stored member {entry.name!r} has sizes {entry.compressed_size} != {entry.size}")
        return
    if entry.method != 8 or not allow_deflate:
        raise CheckpointFormatError(
            f"{src.name!r}: member {entry.name!r} is compressed (ZIP method {entry.method}); PyTorch checkpoints "
            "store tensors uncompressed, so this file was rewritten by another tool. Re-save it with torch.save."
        )
    if entry.size > 1100 * entry.compressed_size + 1024:  # deflate cannot exceed ~1032:1
        raise _bad(
            src, f"member {entry.name!r} claims {entry.size} bytes from {entry.compressed_size} compressed"
        )


def _inflate(src: ByteSource, entry: ZipEntry) -> bytes:
    packed = src.read(member_offset(src, entry), entry.compressed_size)
    try:
        data = zlib.decompressobj(-15).decompress(packed, entry.size)
    except zlib.error as exc:
        raise _bad(src, f"member {entry.name!r} does not inflate: {exc}") from exc
    if len(data) != entry.size:
        raise _bad(src, f"member {entry.name!r} inflates to {len(data)} bytes, not the declared {entry.size}")
    return data


def read_member(
    src: ByteSource,
    entry: ZipEntry,
    start: int = 0,
    length: int | None = None,
    *,
    allow_deflate: bool = False,
) -> bytes:
    """Bytes ``[start, start + length)`` of a member's uncompressed content.

    Stored members are read by range (only those bytes); deflated ones only when
    ``allow_deflate`` (``.npz``), by inflating the whole member (bounded by its declared size).
    """
    length = entry.size - start if length is None else length
    check_member(src, entry, start, length, allow_deflate)
    if entry.method == 0:
        return src.read(member_offset(src, entry) + start, length)
    return _inflate(src, entry)[start : start + length]


def read_member_into(
    src: ByteSource, entry: ZipEntry, start: int, buffer: memoryview, *, allow_deflate: bool = False
) -> None:
    """Like :func:`read_member` for ``len(buffer)`` bytes from ``start``, written into ``buffer``.

    A stored member's bytes go straight from the source into ``buffer`` (no intermediate copy).
    """
    check_member(src, entry, start, buffer.nbytes, allow_deflate)
    if entry.method == 0:
        read_into(src, member_offset(src, entry) + start, buffer)
    else:
        buffer[:] = _inflate(src, entry)[start : start + buffer.nbytes]


@dataclass
class SliceSource:
    """A :class:`ByteSource` over ``[start, start + size)`` of another source (a stored ZIP member)."""

    parent: ByteSource
    start: int
    size: int
    name: str = ""
    bytes_read: int = field(default=0)

    def read(self, offset: int, length: int) -> bytes:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise CheckpointFormatError(
                f"{self.name!r} is truncated or corrupted: a read of {length} bytes at offset {offset} "
                f"goes past its end ({self.size} bytes). Re-download the file."
            )
        self.bytes_read += length
        return self.parent.read(self.start + offset, length)

    def readinto(self, offset: int, buffer: memoryview) -> None:
        length = buffer.nbytes
        if offset < 0 or offset + length > self.size:
            raise CheckpointFormatError(
                f"{self.name!r} is truncated or corrupted: a read of {length} bytes at offset {offset} "
                f"goes past its end ({self.size} bytes). Re-download the file."
            )
        self.bytes_read += length
        read_into(self.parent, self.start + offset, buffer)
