"""The one atomic file writer: a file is either absent, the old version, or complete; never partial.

Every file the package writes (cached tensors and refs, exported tables, figures, reports,
``PositionalEmbedding.save``) goes through :func:`atomic_write`.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

__all__ = ["atomic_write", "atomic_writer", "cache_dir", "remove_stale_temporaries"]


def cache_dir() -> Path:
    """``$POS_GEOMETRY_CACHE``, else ``$XDG_CACHE_HOME/pos_geometry``, else ``~/.cache/pos_geometry``."""
    explicit = os.environ.get("POS_GEOMETRY_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "pos_geometry"


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """Yield a binary file to write ``path`` piece by piece (for data too large to hold in memory);
    on success it is fsynced and moved onto ``path`` with ``os.replace``; on any exception it is
    removed and ``path`` is left as it was. Same temporary name and permissions as :func:`atomic_write`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def atomic_write(path: str | os.PathLike[str], data: bytes | str) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder, fsync it, then ``os.replace``.

    The parent folder is created. The temporary file is named ``.<name>.<pid>-<random>.tmp`` (a
    leading dot: readers of a folder skip it) and is removed whatever happens, so an exception or a
    crash leaves ``path`` as it was. The file gets the usual permissions (``0o666`` less the umask).
    Text is written as UTF-8.
    """
    payload = data.encode("utf-8") if isinstance(data, str) else data
    with atomic_writer(path) as fh:
        fh.write(payload)
    return Path(path)


_TEMPORARY = re.compile(r"^\..+\.(\d+)-[0-9a-f]+\.tmp$")  # atomic_writer's names: .<name>.<pid>-<hex>.tmp


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # another user's process, or not ours to judge: keep its file
    return True


def remove_stale_temporaries(folder: str | os.PathLike[str]) -> int:
    """Remove the temporary files (``.<name>.<pid>-<hex>.tmp``) that a writer killed mid-write (SIGKILL,
    power loss: no ``finally`` ran) left in ``folder``: those whose process no longer runs on this machine.
    Returns how many were removed. The finished files beside them are never touched."""
    folder = Path(folder)
    removed = 0
    if not folder.is_dir():
        return 0
    for path in folder.iterdir():
        match = _TEMPORARY.match(path.name)
        if match and path.is_file() and not _running(int(match.group(1))):
            with contextlib.suppress(OSError):
                path.unlink()
                removed += 1
    return removed
