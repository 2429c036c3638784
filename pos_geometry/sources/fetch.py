"""``fetch_table``: put one model-table row's positional table into the cache, and optionally export it.

The table is read exactly as :func:`pos_geometry.load` reads it from the hub (the safetensors
header and the tensor's byte range, or one storage record of a ``.bin``; see
:mod:`~pos_geometry.sources.hub`) and stored in pos_geometry's cache, so ``load``, ``info`` and
``reproduce`` find it offline afterwards. With ``export=True`` it is also written to the
git-ignored ``data/tables/<name>[_<revision>].npy`` of the checkout (or ``$POS_GEOMETRY_TABLES``),
as stored (all stored rows; bfloat16 widened exactly to float32), with
``<stem>.provenance.json`` beside it. Both files go through the one atomic writer: a failed or
interrupted fetch leaves no file behind.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import io
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pos_geometry._files import atomic_write
from pos_geometry._version import __version__
from pos_geometry.errors import InvalidArgumentError, NotApplicableError
from pos_geometry.registry import check_revision, get_spec
from pos_geometry.sources.locations import PROVENANCE_SUFFIX, TABLES_ENV, export_stem, tables_dir

__all__ = ["FetchedTable", "fetch_table"]


@dataclass(frozen=True)
class FetchedTable:
    """What :func:`fetch_table` fetched and wrote.

    Attributes:
        name: the model-table name. revision: the revision asked for; commit: what it resolved to.
        tensor_key, file: the checkpoint key and the repo file the table was read from.
        shape: the stored table's shape ``(stored rows, d_model)``; ``row_offset`` leading rows of it
            are not positions (``load`` drops them). stored_dtype: its dtype in the checkpoint.
        origin: where the bytes came from this time: the hub endpoint, or a cache that already held it.
        exported: the ``.npy`` written with ``export=True`` (None otherwise); provenance_file: its JSON.
    """

    name: str
    repo_id: str
    revision: str
    commit: str
    tensor_key: str
    file: str
    shape: tuple[int, ...]
    row_offset: int
    stored_dtype: str
    origin: str
    exported: Path | None = None
    provenance_file: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["shape"] = list(self.shape)
        for key in ("exported", "provenance_file"):
            out[key] = str(out[key]) if out[key] is not None else None
        return out


def fetch_table(
    model: str, revision: str | None = None, *, export: bool = False, offline: bool | None = None
) -> FetchedTable:
    """Fetch ``model``'s positional table (only its bytes) into the cache; with ``export`` also write
    ``data/tables/<stem>.npy`` and ``<stem>.provenance.json``.

    ``model`` is a model-table name or alias (``pos-geometry models`` lists them). A table already in
    the pos_geometry or HF cache is not downloaded again. Rotary rows have no stored table:
    :class:`~pos_geometry.errors.NotApplicableError`. ``offline`` is as in :func:`pos_geometry.load`.
    """
    from pos_geometry.sources.hub import read_hub_tensor

    spec = get_spec(model)
    if spec.kind != "learned":
        raise NotApplicableError(
            f"{spec.name} is a rotary model: it has no learned positional table to fetch. Its exact rotary table is "
            f"built from the model table with no download: pos_geometry.load({spec.name!r})."
        )
    rev = check_revision(spec, revision)
    folder = tables_dir() if export else None
    if export and folder is None:
        raise InvalidArgumentError(
            "export=True writes to the checkout's data/tables/, but no checkout of pos_geometry was found (the "
            f"package is installed elsewhere and the current folder is not inside one). Set ${TABLES_ENV} to the "
            "folder to export to."
        )
    record, commit = read_hub_tensor(
        spec.repo_id,
        revision=rev,
        which="position",
        offline=offline,
        preferred=spec.position_key,
        files=spec.weight_files,
    )
    result = FetchedTable(
        name=spec.name,
        repo_id=spec.repo_id,
        revision=rev,
        commit=commit,
        tensor_key=record.key,
        file=record.file,
        shape=tuple(record.tensor.shape),
        row_offset=spec.row_offset,
        stored_dtype=record.dtype,
        origin=record.origin,
    )
    if folder is None:
        return result
    return _export(result, record.tensor, folder / export_stem(spec, rev))


def _export(result: FetchedTable, tensor, stem: Path) -> FetchedTable:
    """Write ``<stem>.npy`` then ``<stem>.provenance.json`` (which names the .npy's sha256), each atomically."""
    import numpy as np
    import torch

    array = (tensor.float() if tensor.dtype == torch.bfloat16 else tensor).numpy()
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(array), allow_pickle=False)
    data = buf.getvalue()
    npy = stem.with_name(stem.name + ".npy")
    meta_path = stem.with_name(stem.name + PROVENANCE_SUFFIX)
    done = FetchedTable(**{**result.__dict__, "exported": npy, "provenance_file": meta_path})
    meta = {
        **{k: v for k, v in done.to_dict().items() if k not in ("exported", "provenance_file", "origin")},
        "key": result.tensor_key,
        "saved_dtype": str(array.dtype),
        "sha256": hashlib.sha256(data).hexdigest(),
        "fetched": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "pos_geometry_version": __version__,
        "note": (
            "The stored table as read from the checkpoint (all stored rows; bfloat16 widened exactly to float32). "
            "pos_geometry.load drops the row_offset leading rows, which are not positions."
        ),
    }
    atomic_write(npy, data)
    atomic_write(meta_path, json.dumps(meta, indent=2) + "\n")
    return done
