"""A card folder holds one model's card, or none.

A card is written whole into a hidden temporary folder beside ``out`` (``.<name>.<pid>-<hex>.card``), then
swapped in with one atomic exchange of the two folders (``renameat2(RENAME_EXCHANGE)`` on Linux; elsewhere
two renames, between which ``out`` is briefly absent), and the old card is removed. A card killed while it
is written leaves ``out`` as it was; its temporary folder is removed by the next card written beside it.

One writer at a time: :func:`hold_card_folder` takes an advisory lock (``flock`` on ``.<name>.card-lock``
beside ``out``; the kernel drops it when the process dies), and a second writer on the same folder is
refused at once. ``out`` is checked before any work: a folder (or absent), holding nothing but an earlier
card's files, on a file system this process can write.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from pos_geometry.errors import InvalidArgumentError

__all__ = ["CARD_FILES", "check_card_folder", "check_output_folder", "hold_card_folder", "write_card_folder"]

CARD_FILES = frozenset({"index.html", "card.json", "card.md", "plotly.min.js", "card.png", "card.pdf"})
"""The files a card folder may hold: a folder holding anything else is not a card's, and is never replaced."""

_HELD: dict[Path, int] = {}  # folders whose lock this process holds: path -> lock file descriptor
_STALE = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)-[0-9a-f]{8}(-old)?\.card$")


def _shown(path: Path) -> str:
    from pos_geometry._describe import printable

    return repr(printable(os.fspath(path), 300))


def check_card_folder(out: str | os.PathLike[str]) -> Path:
    """``out`` as the card will be written (``~`` expanded), checked before any work.

    Raises:
        InvalidArgumentError: ``out`` is a file, holds files that are not a card's, or its parent cannot be
            created or written (a read-only file system, no permission).
    """
    return check_output_folder(
        out, CARD_FILES, "card", "a positional card's", "a card folder holds one card and is replaced whole"
    )


def check_output_folder(
    out: str | os.PathLike[str], allowed: frozenset[str], what: str, whose: str, holds: str
) -> Path:
    """``out`` (``~`` expanded) checked before any work as the folder of a ``what`` (``"card"``): a folder or
    absent, holding nothing but the ``allowed`` names (a folder of ``whose``; ``holds`` says what such a
    folder holds), whose parent this process can create and write.

    Raises:
        InvalidArgumentError: each rule broken, with the names found and the fix.
    """
    folder = Path(os.path.abspath(Path(out).expanduser()))
    if folder.exists() or folder.is_symlink():
        if folder.is_symlink() or not folder.is_dir():
            kind = "a symbolic link" if folder.is_symlink() else "a file"
            raise InvalidArgumentError(
                f"out must be a folder for the {what}; {_shown(folder)} is {kind}. Give a new or empty folder."
            )
        others = sorted(p.name for p in folder.iterdir() if p.name not in allowed)
        if others:
            listed = ", ".join(repr(n) for n in others[:5]) + (
                f" and {len(others) - 5} more" if len(others) > 5 else ""
            )
            raise InvalidArgumentError(
                f"out {_shown(folder)} holds files that are not {whose} ({listed}); {holds}. Give a new or empty "
                f"folder, or one holding an earlier {what}."
            )
    parent = folder.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        probe = parent / f".{folder.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.probe"
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        probe.unlink()
    except OSError as exc:
        raise InvalidArgumentError(
            f"out {_shown(folder)} cannot be written: {exc.strerror or exc} in {_shown(parent)}. Give a folder on "
            "a file system you can write."
        ) from None
    return folder


@contextlib.contextmanager
def hold_card_folder(out: str | os.PathLike[str]) -> Iterator[Path]:
    """Check ``out`` (:func:`check_card_folder`) and hold its writer's lock until the block ends; yields the
    checked path. Re-entrant within a process (a card saved inside the block does not lock again).

    Raises:
        InvalidArgumentError: as :func:`check_card_folder`, or another process is writing a card there.
    """
    folder = check_card_folder(out)
    if folder in _HELD:
        yield folder
        return
    import fcntl

    lock = folder.parent / f".{folder.name}.card-lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise InvalidArgumentError(
                f"another process is writing a card into {_shown(folder)}; one card folder has one writer. Wait "
                "for it to finish, or give another folder."
            ) from None
        raise
    _HELD[folder] = fd
    try:
        yield folder
    finally:
        del _HELD[folder]
        os.close(fd)  # releases the lock; the empty lock file stays (removing it would race a new writer)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux ``renameat2(RENAME_EXCHANGE)``); False where it is not supported."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), os.fspath(b))


def _remove_stale(folder: Path) -> None:
    """Remove the temporary card folders of writers of ``folder`` that no longer run."""
    from pos_geometry._files import _running

    for path in folder.parent.iterdir():
        match = _STALE.match(path.name)
        ours = match is not None and match["name"] == folder.name and path.is_dir() and not path.is_symlink()
        if ours and not _running(int(match["pid"])):
            shutil.rmtree(path, ignore_errors=True)


Writer = Callable[[Path], object]


def write_card_folder(out: str | os.PathLike[str], files: Mapping[str, bytes | str | Writer]) -> list[Path]:
    """Write ``files`` (name -> content, or a function that writes into the folder it is given) as the whole
    of the folder ``out``, replacing an earlier card there in one step; returns the final paths.

    Raises:
        InvalidArgumentError: as :func:`hold_card_folder`.
        OSError: a write failed; it names the file in ``out``, and ``out`` is left as it was.
    """
    from pos_geometry._files import atomic_write

    unknown = sorted(set(files) - CARD_FILES)
    if unknown:
        raise InvalidArgumentError(f"a card folder holds only {sorted(CARD_FILES)}; got {unknown}.")
    with hold_card_folder(out) as folder:
        _remove_stale(folder)
        tmp = folder.parent / f".{folder.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.card"
        try:
            tmp.mkdir()
            for name, content in files.items():
                try:
                    if callable(content):
                        content(tmp)
                    else:
                        atomic_write(tmp / name, content)
                except OSError as exc:
                    raise OSError(exc.errno, exc.strerror or str(exc), os.fspath(folder / name)) from None
            if folder.exists():
                if not _exchange(tmp, folder):
                    old = tmp.with_name(tmp.name[: -len(".card")] + "-old.card")
                    os.rename(folder, old)
                    os.rename(tmp, folder)
                    tmp = old
            else:
                os.rename(tmp, folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return [folder / name for name in files]
