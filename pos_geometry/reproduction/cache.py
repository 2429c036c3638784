"""The results cache of ``reproduce``: a reproduction run again with the same inputs is copied, not recomputed.

Its key is a SHA-256 over everything that decides the report: the pos_geometry version; the options
(figure formats, the device as resolved, how plotly.js is shipped); and every input as it is on disk, told by
``(path, size, modification time)`` of each file: the folder of real tables (all of it: the attention weights
of the look-back claim are there too), each ``--model NAME=PATH`` and ``--tokens`` checkpoint, and for each
model the reproduction reads, the places :func:`pos_geometry.load` looks for it (pos_geometry's and the HF
cache's folders, the exported tables). A run that may download (``--online``) is never cached: what the hub
holds is not known without asking it. A hit holds the reproduction's files as they were written
(``$POS_GEOMETRY_CACHE/reproductions/<key>/``: ``report.md``, ``report.json``, ``figures/`` and the summary
lines), stored whole or not at all.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["reproduction_key", "cached_reproduction", "store_reproduction", "SUMMARY"]

SUMMARY = "summary.txt"
"""The terminal summary kept beside a cached reproduction (not part of the reproduction folder)."""
_FILES = ("report.md", "report.json")


def _tree(path: Path) -> list[Any]:
    """``[relative path, size, mtime_ns]`` of every file under ``path`` (itself when it is a file), sorted; the
    file's own entry when it is one; ``["absent"]`` when it does not exist."""
    if path.is_file():
        st = path.stat()
        return [[path.name, st.st_size, st.st_mtime_ns]]
    if not path.is_dir():
        return ["absent"]
    out = []
    for p in sorted(path.rglob("*")):
        if p.is_file():
            st = p.stat()
            out.append([p.relative_to(path).as_posix(), st.st_size, st.st_mtime_ns])
    return out


def _model_places(names: Iterable[str], data_dir: Path | None) -> list[Any]:
    """For each model name: where :func:`pos_geometry.load` looks (label, where, found), and the files of its
    folders in pos_geometry's and the HF cache."""
    from pos_geometry.registry import get_spec
    from pos_geometry.sources.cache import cache_dir
    from pos_geometry.sources.hf_cache import hf_repo_dir
    from pos_geometry.sources.locations import table_locations

    out: list[Any] = []
    for name in names:
        spec = get_spec(name)
        places = [[loc.label, loc.where, loc.found] for loc in table_locations(spec, data_dir=data_dir)]
        # a rotary row's table is computed, but the atlas reads its query/key weights from these caches
        ours = cache_dir() / "hub" / spec.repo_id.replace("/", "--")
        out.append([name, places, _tree(ours), _tree(hf_repo_dir(spec.repo_id))])
    return out


def reproduction_key(
    *,
    names: Iterable[str],
    data_dir: Path | None,
    paths: Mapping[str, Path],
    tokens: Path | None,
    online: bool,
    formats: Iterable[str],
    device: Any,
    plotlyjs: str,
) -> str | None:
    """The results-cache key of a reproduction of ``names`` (see the module docstring); None when it cannot be
    told without running (``online``: the hub may hold something new)."""
    from pos_geometry._device import resolve_device
    from pos_geometry._version import __version__

    if online:
        return None
    payload = {
        "version": __version__,
        "options": {"formats": sorted(formats), "device": resolve_device(device).type, "plotlyjs": plotlyjs},
        "data_dir": [str(data_dir), _tree(data_dir)] if data_dir is not None else None,
        "paths": {name: [str(p), _tree(Path(p).expanduser())] for name, p in sorted(paths.items())},
        "tokens": [str(tokens), _tree(Path(tokens).expanduser())] if tokens is not None else None,
        "models": _model_places(names, data_dir),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def _entry(key: str) -> Path:
    from pos_geometry.sources.cache import cache_dir

    return cache_dir() / "reproductions" / key


def cached_reproduction(key: str | None, out: str | os.PathLike[str]) -> str | None:
    """Write the cached reproduction ``key`` into ``out`` (its reports and ``figures/``, replacing earlier ones);
    its summary lines, or None on a miss."""
    if key is None:
        return None
    entry = _entry(key)
    if not all((entry / name).is_file() for name in (*_FILES, SUMMARY)) or not (entry / "figures").is_dir():
        return None
    from pos_geometry._files import atomic_write

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    staged = out / f".figures.{uuid.uuid4().hex[:8]}.tmp"
    try:
        shutil.copytree(entry / "figures", staged)
        if (out / "figures").exists():
            shutil.rmtree(out / "figures")
        os.replace(staged, out / "figures")
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    for name in _FILES:
        atomic_write(out / name, (entry / name).read_bytes())
    return (entry / SUMMARY).read_text(encoding="utf-8")


def store_reproduction(key: str | None, out: str | os.PathLike[str], summary: str) -> None:
    """Keep the reproduction in ``out`` (with its ``summary`` lines) under ``key``: staged beside the entry and
    moved into place in one step, so a cut-off store leaves no entry; nothing when ``out`` holds no whole
    reproduction."""
    out = Path(out)
    if key is None or not all((out / name).is_file() for name in _FILES) or not (out / "figures").is_dir():
        return
    entry = _entry(key)
    entry.parent.mkdir(parents=True, exist_ok=True)
    staged = entry.parent / f".{key}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        staged.mkdir()
        for name in _FILES:
            shutil.copy2(out / name, staged / name)
        shutil.copytree(out / "figures", staged / "figures")
        (staged / SUMMARY).write_text(summary, encoding="utf-8")
        if entry.exists():
            shutil.rmtree(entry)
        os.replace(staged, entry)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
