"""The frozen result of a sweep, and its tidy outputs (CSV, Parquet, JSON with provenance)."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pos_geometry._files import atomic_write
from pos_geometry._version import __version__
from pos_geometry.analysis._results import Result, to_jsonable
from pos_geometry.embedding import Provenance
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.sweeps.metrics import SweepConfig
from pos_geometry.sweeps.record import CheckpointRecord
from pos_geometry.sweeps.store import SweepStore

__all__ = ["OUTPUT_FILES", "SweepResult"]

OUTPUT_FILES = ("metrics.csv", "metrics.parquet", "sweep.json")
_INT_COLUMNS = (
    "step",
    "row_offset",
    "n_positions",
    "d_model",
    "helix_n_surrogates",
    "periodicity_n_significant",
    "n_layers",
    "n_heads",
    "n_kv_heads",
    "n_planes",
    "context_length",
    "critical_dimension",
    "top_plane",
)


def _require(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise InvalidArgumentError(
            f"the sweep's tidy table needs {module}, which is not installed: `pip install 'pos-geometry[sweep]'`. "
            "The records are in SweepResult.rows() and .to_json() without it."
        ) from None


@dataclass(frozen=True, eq=False, repr=False)
class SweepResult(Result):
    """Metrics over training: one :class:`~pos_geometry.sweeps.record.CheckpointRecord` per revision.

    ``model``: the model's name (model-table name or repo id); ``repo_id``; ``revisions``: the revisions
    asked for, in training order (``records`` follow it); ``config``: the analyses and their parameters;
    ``executor``: where the work ran; ``store``: the folder of per-checkpoint results (a re-run resumes
    from it); ``bytes_read``/``requests``: range-read traffic of this run (0 for resumed checkpoints);
    ``n_computed``/``n_resumed``: checkpoints analysed by this run / taken from the store.
    """

    model: str
    repo_id: str
    revisions: tuple[str, ...]
    records: tuple[CheckpointRecord, ...]
    config: SweepConfig
    executor: str
    store: str
    bytes_read: int
    requests: int
    n_computed: int
    n_resumed: int
    package_version: str = __version__

    @property
    def provenance(self) -> tuple[Provenance, ...]:
        """The provenance of every table that was analysed."""
        return tuple(r.provenance for r in self.records if r.provenance is not None)

    @property
    def ok(self) -> tuple[CheckpointRecord, ...]:
        return tuple(r for r in self.records if r.ok)

    @property
    def failures(self) -> tuple[CheckpointRecord, ...]:
        """Checkpoints that were skipped, each with its status and reason."""
        return tuple(r for r in self.records if not r.ok)

    def __getitem__(self, revision: str) -> CheckpointRecord:
        for record in self.records:
            if record.revision == revision:
                return record
        raise KeyError(f"{revision!r} is not among the {len(self.records)} revisions of this sweep.")

    def rows(self) -> list[dict[str, Any]]:
        """The tidy table as dicts: one row per revision, identity and provenance first, then the metrics."""
        return [{"model": self.model, "repo_id": self.repo_id, **r.row()} for r in self.records]

    def to_frame(self) -> Any:
        """The tidy table as a ``pandas.DataFrame`` (one row per revision; failed ones carry their reason)."""
        pd = _require("pandas")

        rows = self.rows()
        columns: list[str] = []
        for row in rows:
            columns += [c for c in row if c not in columns]
        frame = pd.DataFrame(rows, columns=columns)
        for column in _INT_COLUMNS:  # integers stay integers next to failed rows (pandas' nullable Int64)
            if column in frame:
                frame[column] = frame[column].astype("Int64")
        return frame

    def metric(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """``(steps, values)`` of one numeric metric over the ok checkpoints (NaN where it is None)."""
        ok = [r for r in self.ok if r.step is not None]
        if ok and name not in {k for r in ok for k in r.metrics}:
            known = sorted({k for r in ok for k in r.metrics})
            raise InvalidArgumentError(f"no metric {name!r} in this sweep; it has {known}.")
        values = [r.metrics.get(name) for r in ok]
        return (
            np.array([r.step for r in ok], dtype=np.int64),
            np.array([np.nan if v is None or isinstance(v, str) else float(v) for v in values]),
        )

    def pca(self, revisions: Any = None, n_components: int | None = None) -> Any:
        """The stored PCA fits of the ok checkpoints (or of ``revisions``) as one batched ``PCAResult``,
        rebuilt from the store without reading any table, e.g. for
        :func:`~pos_geometry.plotting.plot_checkpoints` (the Procrustes-aligned animation).
        ``n_components``: keep the first ones only (default: all stored, the sweep's ``n_components``)."""
        import torch

        from pos_geometry.analysis.pca import PCAResult

        wanted = [r for r in self.ok if revisions is None or r.revision in revisions]
        if "pca" not in self.config.analyses or not wanted:
            rotary = " (a rotary model has no table to decompose: see .atlas(revision))"
            raise InvalidArgumentError(
                "this sweep holds no PCA fits: run it with 'pca' among the analyses (and at least one ok "
                "checkpoint)" + (rotary if self.config.kind == "rotary" else "") + "."
            )
        store = SweepStore(self.store)
        fits = []
        for record in wanted:
            a = store.arrays(record.revision)
            if "components" not in a:
                raise InvalidArgumentError(
                    f"the store {self.store} has no PCA fit for {record.revision!r} (removed?); re-run the sweep."
                )
            total, stable, start, stop, n_iter, n_over = a["scalars"].tolist()
            k = (
                a["components"].shape[0]
                if n_components is None
                else min(n_components, a["components"].shape[0])
            )
            a = {name: a[name][:k] for name in ("components", "explained_variance", "explained_variance_ratio",
                 "singular_values")} | {"coordinates": a["coordinates"][:, :k], "mean": a["mean"], "solver": a["solver"]}  # fmt: skip
            coords = torch.from_numpy(a["coordinates"])
            fits.append(
                PCAResult(
                    components_=torch.from_numpy(a["components"]),
                    explained_variance_=a["explained_variance"],
                    explained_variance_ratio_=a["explained_variance_ratio"],
                    singular_values_=a["singular_values"],
                    mean_=torch.from_numpy(a["mean"]),
                    total_variance_=total,
                    stable_rank_=stable,
                    coordinates=coords,
                    positions=torch.arange(int(start), int(stop)),
                    n_samples_=int(coords.shape[0]),
                    n_features_=int(a["components"].shape[1]),
                    window=(int(start), int(stop)),
                    center=True,
                    solver=bytes(a["solver"]).decode(),
                    n_iter=None if n_iter < 0 else int(n_iter),
                    n_oversamples=None if n_over < 0 else int(n_over),
                    random_state=self.config.random_state,
                    provenance=record.provenance,
                )
            )
        return PCAResult.stack(fits)

    def atlas(self, revision: str) -> Any:
        """The :class:`~pos_geometry.atlas.rotary.RotaryAtlas` of one ok checkpoint of a rotary
        sweep, rebuilt from the store without reading any weight (e.g. for
        :func:`~pos_geometry.plotting.plot_atlas_heatmap`)."""
        from pos_geometry.sweeps.rotary import ATLAS_ARRAYS, rebuild_atlas

        record = self[revision]
        if self.config.kind != "rotary" or not record.ok:
            raise InvalidArgumentError(
                f"{revision!r} has no atlas: atlases are stored by rotary sweeps for their ok checkpoints "
                f"(this sweep is {self.config.kind}, the checkpoint {record.status})."
            )
        arrays = SweepStore(self.store).arrays(revision)
        if not all(name in arrays for name in ATLAS_ARRAYS):
            raise InvalidArgumentError(
                f"the store {self.store} has no atlas for {revision!r} (removed?); re-run the sweep."
            )
        return rebuild_atlas(arrays, record.metrics, record.provenance)

    def _source_label(self) -> str:
        return f"{self.model} over {len(self.revisions)} revisions"

    def summary_rows(self) -> list[tuple[str, str]]:
        fails: dict[str, int] = {}
        for r in self.failures:
            fails[r.status] = fails.get(r.status, 0) + 1
        failed = ", ".join(f"{n} {s}" for s, n in sorted(fails.items())) or "none"
        return [
            ("model", f"{self.model} ({self.repo_id})"),
            (
                "checkpoints",
                f"{len(self.records)} asked, {len(self.ok)} ok ({self.n_computed} computed, "
                f"{self.n_resumed} resumed from {self.store})",
            ),
            ("skipped", failed),
            (
                "analyses",
                ", ".join(self.config.analyses) + (" (rotary atlas)" if self.config.kind == "rotary" else ""),
            ),
            ("read by this run", f"{self.bytes_read:,} bytes in {self.requests} range requests"),
            ("executor", self.executor),
        ]

    def write(self, out: str | Path) -> dict[str, Path]:
        """Write ``metrics.csv``, ``metrics.parquet`` and ``sweep.json`` (everything, with provenance) into
        ``out`` (created), each atomically; returns ``{name: path}``."""
        out = Path(out).expanduser()
        _require("pyarrow")
        frame = self.to_frame()
        paths = {name: out / name for name in OUTPUT_FILES}
        atomic_write(paths["metrics.csv"], frame.to_csv(index=False))
        buf = io.BytesIO()
        frame.to_parquet(buf, index=False)
        atomic_write(paths["metrics.parquet"], buf.getvalue())
        atomic_write(paths["sweep.json"], json.dumps(to_jsonable(self.to_dict()), indent=1, allow_nan=False))
        return paths
