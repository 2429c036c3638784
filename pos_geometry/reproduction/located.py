"""The reproduction's view of a model's table: found (and loaded), or named as missing with the command that
would fetch it. Above :mod:`pos_geometry.loading`, which it calls, and :mod:`pos_geometry.sources.locations`,
whose places it searches.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pos_geometry._device import Device
from pos_geometry.embedding import PositionalEmbedding
from pos_geometry.errors import NotCachedError
from pos_geometry.loading import load
from pos_geometry.registry import get_spec
from pos_geometry.sources.locations import fetch_command, find_local_table, table_locations

__all__ = ["Located", "locate"]


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
    device: Device = "cpu",
    n_positions: int | None = None,
) -> Located:
    """Find ``name``'s positional table: a given path, then everywhere :func:`pos_geometry.load`
    looks (the caches, ``data/tables``, the real tables; the hub only when ``online``), then the real
    table in ``data_dir``. Rotary rows are computed (``n_positions`` rows). Errors other than
    "not cached" propagate: a broken file is never silently skipped.
    """
    spec = get_spec(name)
    given = (paths or {}).get(spec.name)
    if given is not None:
        table = load(f"{spec.name}={given}", revision=revision, device=device)
        return Located(spec.name, table, f"{given} (given with --model)")
    if spec.kind == "rotary":
        table = load(spec.name, revision=revision, device=device, n_positions=n_positions)
        return Located(spec.name, table, "computed from the model table's config fields (no download)")
    try:
        table = load(spec.name, revision=revision, device=device, offline=not online)
        return Located(spec.name, table, table.provenance.source)
    except NotCachedError:
        pass
    local = find_local_table(spec, revision, data_dir=data_dir) if data_dir is not None else None
    if local is not None:
        table = load(f"{spec.name}={local.path}", revision=revision, device=device)
        return Located(spec.name, table, table.provenance.source)
    looked = ", ".join(loc.label for loc in table_locations(spec, revision, data_dir=data_dir))
    return Located(spec.name, None, f"not found in {looked}", fetch_command(spec, revision))
