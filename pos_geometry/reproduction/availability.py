"""Which tables the reproduction can use here, and where each one comes from.

The reproduction runs offline on what is present: a path the user gave, the pos_geometry
and Hugging Face caches, and the real tables kept in ``../shared/data/real`` beside a
checkout of this repository. A model found nowhere is reported as missing with the
command that would fetch it; nothing is ever substituted for it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

from pos_geometry.embedding import PositionalEmbedding
from pos_geometry.errors import NotCachedError
from pos_geometry.loading import load
from pos_geometry.registry import ModelSpec, check_revision, get_spec
from pos_geometry.sources.cache import cache_dir, cached_ref, cached_table
from pos_geometry.sources.hf_cache import hf_cached_file, hf_cached_ref
from pos_geometry.sources.sharded import WEIGHT_FILES

__all__ = [
    "DATA_ENV",
    "REAL_TABLES",
    "CacheStatus",
    "Located",
    "cache_status",
    "fetch_command",
    "find_data_dir",
    "locate",
]

DATA_ENV = "POS_GEOMETRY_DATA"
"""Environment variable naming a folder of real tables (overrides the search beside the checkout)."""

REAL_TABLES: Mapping[str, str] = {
    "gpt2": "gpt2_small_wpe.npy",
    "openai-gpt": "gpt1_openai_positions_embed.npy",
}
"""Model-table name -> file name of the real table in the data folder (``<file>.source.txt`` beside it)."""


def _checkout_roots() -> list[Path]:
    """Folders that may be this repository's checkout: the package's parent, then the cwd and its parents."""
    here = Path(__file__).resolve().parents[2]
    cwd = Path.cwd().resolve()
    return [here, cwd, *cwd.parents]


def find_data_dir(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """The folder holding the real tables, or None.

    Order: ``explicit``; ``$POS_GEOMETRY_DATA``; ``<checkout>/../shared/data/real`` for the
    checkout this package was imported from, or one containing the current directory. A
    folder counts only when it holds at least one of :data:`REAL_TABLES`.
    """
    if explicit is not None:
        folder = Path(explicit).expanduser()
        return folder if _has_tables(folder) else None
    candidates: list[Path] = []
    if os.environ.get(DATA_ENV):
        candidates.append(Path(os.environ[DATA_ENV]).expanduser())
    for root in _checkout_roots():
        if (root / "pyproject.toml").is_file() and (root / "pos_geometry").is_dir():
            candidates.append(root.parent / "shared" / "data" / "real")
    return next((c for c in candidates if _has_tables(c)), None)


def _has_tables(folder: Path) -> bool:
    return folder.is_dir() and any((folder / name).is_file() for name in REAL_TABLES.values())


def fetch_command(spec: ModelSpec | str, revision: str | None = None) -> str:
    """The shell command that fetches (and caches) ``spec``'s positional table: only its bytes."""
    spec = get_spec(spec) if isinstance(spec, str) else spec
    rev = f" --revision {revision}" if revision and revision != spec.default_revision else ""
    return f"pos-geometry analyze {spec.name}{rev} --online"


@dataclass(frozen=True)
class CacheStatus:
    """What the local caches hold for one model and revision.

    ``computed``: the table is built from the model table (rotary rows): nothing to fetch.
    ``pos_geometry``: the cached tensor file, or None. ``hf``: the commit whose weight file
    sits in the Hugging Face cache, or None.
    """

    computed: bool
    pos_geometry: str | None = None
    hf: str | None = None

    @property
    def any(self) -> bool:
        return self.computed or self.pos_geometry is not None or self.hf is not None


def cache_status(spec: ModelSpec | str, revision: str | None = None) -> CacheStatus:
    """Whether ``spec``'s table at ``revision`` can be had without the network (reads no tensor data)."""
    spec = get_spec(spec) if isinstance(spec, str) else spec
    if spec.kind == "rotary":
        return CacheStatus(computed=True)
    rev = check_revision(spec, revision)
    ours = None
    commit = cached_ref(spec.repo_id, rev)
    if commit is not None and cached_table(spec.repo_id, commit, "position") is not None:
        ours = str(cache_dir() / "hub" / spec.repo_id.replace("/", "--") / commit)
    hf_commit = hf_cached_ref(spec.repo_id, rev)
    hf = None
    if hf_commit is not None and any(hf_cached_file(spec.repo_id, hf_commit, f) for f in WEIGHT_FILES):
        hf = hf_commit
    return CacheStatus(computed=False, pos_geometry=ours, hf=hf)


@dataclass(frozen=True)
class Located:
    """The outcome of looking for one model's table.

    ``table`` is the loaded table, or None when it is missing; ``where`` says where it came
    from (or where it was looked for); ``fetch`` is the command that would fetch a missing one.
    """

    name: str
    table: PositionalEmbedding | None
    where: str
    fetch: str | None = None

    @property
    def found(self) -> bool:
        return self.table is not None


def locate(
    name: str,
    *,
    revision: str | None = None,
    paths: Mapping[str, Path] | None = None,
    data_dir: Path | None = None,
    online: bool = False,
    device: str | torch.device = "cpu",
    n_positions: int | None = None,
) -> Located:
    """Find ``name``'s positional table: a given path, then the caches (or the hub when
    ``online``), then the real table in ``data_dir``. Rotary rows are computed (``n_positions``
    rows). Errors other than "not cached" propagate: a broken file is never silently skipped.
    """
    spec = get_spec(name)
    given = (paths or {}).get(spec.name)
    if given is not None:
        table = load(given, model_id=spec.name, revision=revision, device=device)
        return Located(spec.name, table, f"{given} (given with --model)")
    if spec.kind == "rotary":
        table = load(spec.name, revision=revision, device=device, n_positions=n_positions)
        return Located(spec.name, table, "computed from the model table's config fields (no download)")
    try:
        table = load(spec.name, revision=revision, device=device, offline=not online)
        return Located(spec.name, table, f"{spec.repo_id}@{table.provenance.commit} (local cache)")
    except NotCachedError:
        pass
    real = REAL_TABLES.get(spec.name)
    if (
        data_dir is not None
        and real is not None
        and (data_dir / real).is_file()
        and revision in (None, "main")
    ):
        path = data_dir / real
        table = load(path, model_id=spec.name, device=device)
        return Located(spec.name, table, f"{path} (real table; provenance in {path.name[:-4]}.source.txt)")
    looked = "the pos_geometry and HF caches" + (f", {data_dir}" if data_dir is not None else "")
    return Located(spec.name, None, f"not found in {looked}", fetch_command(spec, revision))
