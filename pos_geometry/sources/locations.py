"""Where a model-table row's positional table can be found on this machine, without the network.

:func:`pos_geometry.load` looks, for a learned row of the model table, in this order and stops at
the first hit (offline, and before any request when online):

1. pos_geometry's cache (:mod:`~pos_geometry.sources.cache`, tensors fetched by range reads);
2. the Hugging Face cache (weight files downloaded by ``hf download`` or transformers);
3. the checkout's git-ignored ``data/tables/`` (``<name>.npy`` or ``<name>_<revision>.npy``, written
   by ``pos-geometry fetch MODEL --export``, with ``<stem>.provenance.json`` beside it), or
   ``$POS_GEOMETRY_TABLES``;
4. the real tables kept in ``../shared/data/real`` beside the checkout (or ``$POS_GEOMETRY_DATA``):
   GPT-2 small's ``wpe`` and GPT-1's ``positions_embed``, with ``<file>.source.txt`` provenance.

:func:`table_locations` reports every one of them for a row, found or not (``pos-geometry info``);
:func:`fetch_command` is the command that puts a missing table into the cache. Nothing is ever
substituted for a missing table.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from pos_geometry.errors import CheckpointFormatError, InvalidArgumentError
from pos_geometry.registry import ModelSpec, check_revision, find_spec, get_spec

if TYPE_CHECKING:
    pass

__all__ = [
    "DATA_ENV",
    "TABLES_ENV",
    "PROVENANCE_SUFFIX",
    "REAL_TABLES",
    "REAL_WEIGHTS",
    "find_real_weights",
    "CacheStatus",
    "Location",
    "LocalTable",
    "cache_status",
    "checkout_data",
    "checkout_root",
    "export_stem",
    "fetch_command",
    "find_data_dir",
    "find_local_table",
    "parse_named_path",
    "table_locations",
    "tables_dir",
]

DATA_ENV = "POS_GEOMETRY_DATA"
"""Environment variable naming the folder of real tables; when set, it replaces the search beside the checkout."""

TABLES_ENV = "POS_GEOMETRY_TABLES"
"""Environment variable naming the folder of exported tables; when set, it replaces ``<checkout>/data/tables``."""

REAL_TABLES: Mapping[str, str] = {
    "gpt2": "gpt2_small_wpe.npy",
    "openai-gpt": "gpt1_openai_positions_embed.npy",
}
REAL_WEIGHTS: Mapping[str, str] = {"gpt2": "gpt2_small_attention"}
"""Model-table name -> a folder of real weights beside :data:`REAL_TABLES` (its table, attention weights and
config, not the whole model), read by the functions that read weights as ``load`` reads the real tables."""
"""Model-table name -> file name of the real table in the data folder (``<file>.source.txt`` beside it)."""

PROVENANCE_SUFFIX = ".provenance.json"


# --- folders --------------------------------------------------------------------------------------
def _is_checkout(root: Path) -> bool:
    return (root / "pyproject.toml").is_file() and (root / "pos_geometry").is_dir()


def checkout_root() -> Path | None:
    """The repository checkout this package was imported from, else one containing the cwd, else None."""
    here = Path(__file__).resolve().parents[2]
    cwd = Path.cwd().resolve()
    return next((root for root in (here, cwd, *cwd.parents) if _is_checkout(root)), None)


def checkout_data(env: str, *parts: str) -> Path | None:
    """``$env`` when it is set, else ``<checkout>/data/<parts>``; None without a checkout (callers check that
    it exists: a folder or a file)."""
    if os.environ.get(env):
        return Path(os.environ[env]).expanduser()
    root = checkout_root()
    return root.joinpath("data", *parts) if root is not None else None


def _has_real_tables(folder: Path) -> bool:
    return folder.is_dir() and any((folder / name).is_file() for name in REAL_TABLES.values())


def find_data_dir(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """The folder holding the real tables, or None.

    ``explicit`` if given; else ``$POS_GEOMETRY_DATA`` if set (and only it); else
    ``<checkout>/../shared/data/real`` for the checkout this package was imported from, or one
    containing the current directory. A folder counts only when it holds one of :data:`REAL_TABLES`.
    """
    if explicit is not None:
        folder = Path(explicit).expanduser()
        return folder if _has_real_tables(folder) else None
    if os.environ.get(DATA_ENV):
        folder = Path(os.environ[DATA_ENV]).expanduser()
        return folder if _has_real_tables(folder) else None
    here = Path(__file__).resolve().parents[2]
    cwd = Path.cwd().resolve()
    roots = [root for root in (here, cwd, *cwd.parents) if _is_checkout(root)]
    return next(
        (
            r.parent / "shared" / "data" / "real"
            for r in roots
            if _has_real_tables(r.parent / "shared" / "data" / "real")
        ),
        None,
    )


def find_real_weights(spec: ModelSpec, revision: str | None = None) -> Path | None:
    """The real weights folder of ``spec`` (:data:`REAL_WEIGHTS`) in the data folder beside the checkout, at its
    default revision only; None when there is none."""
    name = REAL_WEIGHTS.get(spec.name)
    folder = find_data_dir()
    if name is None or folder is None or (revision is not None and revision != spec.default_revision):
        return None
    path = folder / name
    return path if (path / "config.json").is_file() else None


def find_real_model(file_name: str) -> Path | None:
    """``../shared/data/real_models/<file_name>`` beside the checkout holding the real tables (see
    :func:`find_data_dir`), or None when it is not there."""
    data = find_data_dir()
    path = data.parent / "real_models" / file_name if data is not None else None
    return path if path is not None and path.is_file() else None


def tables_dir() -> Path | None:
    """``$POS_GEOMETRY_TABLES``, else the checkout's ``data/tables`` (it may not exist yet), else None."""
    if os.environ.get(TABLES_ENV):
        return Path(os.environ[TABLES_ENV]).expanduser()
    root = checkout_root()
    return root / "data" / "tables" if root is not None else None


def export_stem(spec: ModelSpec, revision: str | None = None) -> str:
    """``<name>`` at the row's default revision, else ``<name>_<revision>`` (quoted to a safe file name)."""
    rev = check_revision(spec, revision)
    if rev == spec.default_revision:
        return spec.name
    return f"{spec.name}_{quote(rev, safe='-_.+')}"


# --- tables in local folders ----------------------------------------------------------------------
@dataclass(frozen=True)
class LocalTable:
    """A table file found in a local folder for one row and revision.

    ``path``: the ``.npy`` file; ``origin``: ``"data/tables"`` or ``"real tables"``; ``meta``: the
    provenance JSON beside an export (empty for a real table, whose provenance is ``<file>.source.txt``).
    """

    path: Path
    origin: str
    meta: Mapping[str, Any]


def _read_meta(path: Path) -> dict[str, Any]:
    meta_path = path.with_name(path.name[: -len(".npy")] + PROVENANCE_SUFFIX)
    if not meta_path.is_file():
        return {}
    from pos_geometry._json import loads

    fix = "Delete it and the table beside it, then export again with `pos-geometry fetch MODEL --export`."
    try:
        text = meta_path.read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:
        raise CheckpointFormatError(f"{str(meta_path)!r} cannot be read ({exc}). {fix}") from None
    meta = loads(text, repr(str(meta_path)), fix=fix)
    if not isinstance(meta, dict):
        raise CheckpointFormatError(f"{str(meta_path)!r} must hold a JSON object; got {type(meta).__name__}.")
    digest = meta.get("sha256")
    if isinstance(digest, str) and hashlib.sha256(path.read_bytes()).hexdigest() != digest:
        raise CheckpointFormatError(
            f"{str(path)!r} is not the table its provenance file {meta_path.name!r} describes (sha256 differs): one "
            "of them was replaced. Delete both and export again with `pos-geometry fetch MODEL --export`."
        )
    return meta


def find_local_table(
    spec: ModelSpec | str, revision: str | None = None, *, data_dir: str | os.PathLike[str] | None = None
) -> LocalTable | None:
    """The first of ``data/tables/<stem>.npy`` and the real table in the data folder that exists, or None.

    Rotary rows have no stored table: None. The real tables stand for the default revision only.
    """
    spec = get_spec(spec) if isinstance(spec, str) else spec
    if spec.kind != "learned":
        return None
    rev = check_revision(spec, revision)
    exported = tables_dir()
    if exported is not None:
        path = exported / f"{export_stem(spec, rev)}.npy"
        if path.is_file():
            return LocalTable(path, "data/tables", _read_meta(path))
    real = REAL_TABLES.get(spec.name)
    folder = find_data_dir(data_dir)
    if real is not None and folder is not None and rev == spec.default_revision and (folder / real).is_file():
        return LocalTable(folder / real, "real tables", {})
    return None


# --- what the caches hold ---------------------------------------------------------------------------
@dataclass(frozen=True)
class CacheStatus:
    """What the local caches hold for one model and revision.

    ``computed``: the table is built from the model table (rotary rows): nothing to fetch.
    ``pos_geometry``: the cached tensor's folder, or None. ``hf``: the commit whose weight file
    sits in the Hugging Face cache, or None.
    """

    computed: bool
    pos_geometry: str | None = None
    hf: str | None = None

    @property
    def any(self) -> bool:
        return self.computed or self.pos_geometry is not None or self.hf is not None


def cache_status(spec: ModelSpec | str, revision: str | None = None) -> CacheStatus:
    """Whether ``spec``'s table at ``revision`` is in either cache (reads no tensor data)."""
    from pos_geometry.sources.cache import cache_dir, cached_ref, cached_table
    from pos_geometry.sources.hf_cache import hf_cached_file, hf_cached_ref
    from pos_geometry.sources.sharded import ordered_weight_files

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
    files = ordered_weight_files(spec.weight_files)
    if hf_commit is not None and any(hf_cached_file(spec.repo_id, hf_commit, f) for f in files):
        hf = hf_commit
    return CacheStatus(computed=False, pos_geometry=ours, hf=hf)


def fetch_command(spec: ModelSpec | str, revision: str | None = None) -> str:
    """The shell command that fetches ``spec``'s positional table (only its bytes) into the cache."""
    spec = get_spec(spec) if isinstance(spec, str) else spec
    rev = f" --revision {revision}" if revision and revision != spec.default_revision else ""
    return f"pos-geometry fetch {spec.name}{rev}"


@dataclass(frozen=True)
class Location:
    """One place a table is looked for: ``label`` (what it is), ``where`` (the path or commit), ``found``."""

    label: str
    where: str
    found: bool


def table_locations(
    spec: ModelSpec | str, revision: str | None = None, *, data_dir: str | os.PathLike[str] | None = None
) -> tuple[Location, ...]:
    """Every place :func:`pos_geometry.load` looks for ``spec``'s table, in its order, found or not.

    A rotary row has one location: the model table itself (the table is computed, never fetched).
    """
    from pos_geometry.sources.cache import cache_dir
    from pos_geometry.sources.hf_cache import hf_repo_dir

    spec = get_spec(spec) if isinstance(spec, str) else spec
    if spec.kind == "rotary":
        return (Location("model table", "computed from the row's rotary config (no download)", True),)
    rev = check_revision(spec, revision)
    status = cache_status(spec, rev)
    ours = cache_dir() / "hub" / spec.repo_id.replace("/", "--")
    out = [
        Location("pos_geometry cache", status.pos_geometry or str(ours), status.pos_geometry is not None),
        Location(
            "HF cache",
            f"{hf_repo_dir(spec.repo_id)} (commit {status.hf[:12]})"
            if status.hf
            else str(hf_repo_dir(spec.repo_id)),
            status.hf is not None,
        ),
    ]
    exported = tables_dir()
    stem = export_stem(spec, rev)
    path = exported / f"{stem}.npy" if exported is not None else None
    out.append(
        Location(
            "data/tables",
            str(path) if path is not None else f"no checkout found (set ${TABLES_ENV})",
            path is not None and path.is_file(),
        )
    )
    real = REAL_TABLES.get(spec.name)
    if real is not None:
        folder = find_data_dir(data_dir)
        if folder is None:
            where = f"no folder of real tables (../shared/data/real beside the checkout, or ${DATA_ENV})"
        elif rev != spec.default_revision:
            where = f"{folder / real} (stands for revision {spec.default_revision!r} only)"
        else:
            where = str(folder / real)
        found = folder is not None and rev == spec.default_revision and (folder / real).is_file()
        out.append(Location("real tables", where, found))
    return tuple(out)


# --- NAME=PATH ------------------------------------------------------------------------------------
def parse_named_path(text: str, *, known: bool = False) -> tuple[str, Path] | None:
    """``"gpt2=../shared/data/real/gpt2_small_wpe.npy"`` -> ``("gpt2", Path(...))``; None without ``=``.

    NAME labels the table. A model-table name or alias is given as its canonical name (that row's
    metadata then applies); any other NAME is kept as written, a label only (``known=True`` refuses it
    with :class:`~pos_geometry.errors.UnknownModelError` and the closest names, for callers that need
    the row). NAME is a label, never a path: it may not contain path separators or ``..``. PATH must exist.
    """
    name, sep, path = text.partition("=")
    if not sep:
        return None
    name = name.strip()
    if not name or not path.strip():
        raise InvalidArgumentError(
            f"a local model is given as NAME=PATH (a name for it and a local checkpoint file or folder); got "
            f"{text!r}. Example: gpt2=../shared/data/real/gpt2_small_wpe.npy"
        )
    spec = get_spec(name) if known else find_spec(name)
    if spec is None and ("\\" in name or ".." in name or name.startswith(("/", "~")) or name.count("/") > 1):
        raise InvalidArgumentError(
            f"NAME in NAME=PATH is a label, not a path; got {name!r}. Use a plain name such as 'mine' or "
            "'gpt2-finetuned' (an 'org/name' id is fine)."
        )
    target = Path(path.strip()).expanduser()
    if not target.exists():
        raise InvalidArgumentError(
            f"{text!r}: {str(target)!r} does not exist; give an existing checkpoint file or folder after '='."
        )
    return (spec.name if spec is not None else name), target
