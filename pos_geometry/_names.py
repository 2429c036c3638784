"""Names that reach the file system: revisions and repo-relative file names, validated before any path is built.

A revision (``main``, ``v1.0``, ``checkpoint-400``, ``refs/pr/1``, a commit hash) and a file name inside a repo
(``model.safetensors``, ``onnx/model.onnx``) are joined under a cache folder by pos_geometry and by
huggingface_hub (``refs/<revision>``, ``snapshots/<commit>/<file>``). Both are checked here against git's
rules for reference names, so ``../../outside`` can never name a path outside the cache; and
:func:`inside` checks a built path against its root after resolving links.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from pos_geometry._describe import printable
from pos_geometry.errors import InvalidArgumentError

__all__ = ["MAX_NAME", "check_file_name", "check_revision_name", "inside"]

MAX_NAME = 255
_BAD_CHARS = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")


def _parts_ok(name: str) -> bool:
    parts = name.split("/")
    return all(
        p and p not in (".", "..") and not p.startswith(".") and not p.endswith(".lock") for p in parts
    )


def check_revision_name(revision: object) -> str:
    """``revision`` if it is a valid git reference name or commit hash, else :class:`InvalidArgumentError`.

    The rule (git's ``check-ref-format``, which the Hub applies): a non-empty string of at most 255
    characters, components separated by ``/`` (``refs/pr/1``), none empty, none ``.``/``..`` or starting
    with ``.``, none ending in ``.lock``; no space, control character, ``~ ^ : ? * [ \\``, ``@{`` or ``..``.
    """
    if not isinstance(revision, str) or not revision:
        raise InvalidArgumentError(
            f"revision must be a non-empty string (a branch, tag, commit hash or checkpoint name); got {revision!r}."
        )
    bad = (
        len(revision) > MAX_NAME
        or _BAD_CHARS.search(revision) is not None
        or ".." in revision
        or "@{" in revision
        or revision.startswith(("/", "-"))
        or not _parts_ok(revision)
    )
    if bad:
        raise InvalidArgumentError(
            f"revision {printable(revision, 80)!r} is not a valid git reference name: it must be a branch, tag, "
            "commit hash or checkpoint name of at most 255 characters, with '/'-separated parts that are not "
            "empty, '.' or '..' and no spaces, control characters or any of ~ ^ : ? * [ \\. Pass the revision "
            "as the hub lists it (e.g. 'main', 'checkpoint-400', 'refs/pr/1')."
        )
    return revision


def check_file_name(name: object, *, what: str = "file name") -> str:
    """``name`` if it is a relative file path inside a repo (``/``-separated, no empty, ``.`` or ``..`` part,
    no backslash or control character, at most 1000 characters), else :class:`InvalidArgumentError`."""
    ok = (
        isinstance(name, str)
        and 0 < len(name) <= 1000
        and not name.startswith("/")
        and "\\" not in name
        and re.search(r"[\x00-\x1f\x7f]", name) is None
        and all(p not in ("", ".", "..") for p in name.split("/"))
    )
    if not ok:
        shown = printable(name, 80) if isinstance(name, str) else type(name).__name__
        raise InvalidArgumentError(
            f"{what} {shown!r} is not a relative path inside a repo ('/'-separated parts, none empty, '.' or '..', "
            "no backslash or control character). A hub that answers such a name is not trusted; check HF_ENDPOINT."
        )
    return name


def inside(path: Path, root: Path) -> Path:
    """``path`` if, with every link resolved, it lies inside ``root`` (resolved too); else
    :class:`InvalidArgumentError` (a name or a planted link that would lead outside the cache)."""
    real_root = Path(os.path.realpath(root))
    real = Path(os.path.realpath(path))
    if real != real_root and real_root not in real.parents:
        raise InvalidArgumentError(
            f"{str(path)!r} resolves to {str(real)!r}, outside {str(real_root)!r}: a name or a link inside the "
            "cache leads out of it. Remove the link, or clear the cache entry."
        )
    return path
