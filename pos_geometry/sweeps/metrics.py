"""What a sweep measures on each checkpoint's table, and the drift between checkpoints.

Per checkpoint (each analysis selectable, see :data:`ANALYSES`), on the table ``X`` ``(n, d)``:

* ``norms``: ``table_norm`` ``‖X‖_F``, ``position0_norm`` ``‖X[0]‖``, ``mean_row_norm`` (whole table);
* ``pca``: :func:`~pos_geometry.analysis.pca.pca` with ``n_components`` (default 10) in ``window``:
  ``top3_ratio`` and ``top{n_components}_ratio``, the explained-variance shares; its basis and
  coordinates are kept (for the drift and the aligned animation);
* ``helix``: :func:`~pos_geometry.analysis.helix.fit_helix` (3 components) with its null:
  ``helix_verdict``/``helix_reason``, ``helix_p_value`` (the largest over its nulls, None when untested),
  ``helix_period``/``helix_turns`` (None where the helix does not apply), shape and ΔBIC, rotation share;
* ``periodicity``: :func:`~pos_geometry.analysis.periodicity.periodicity` (3 components) against red
  noise: the strongest significant peak (``periodicity_period``, its series and p; status ``"none
  significant"`` when no peak passes), ``toeplitz_score`` and ``column_fraction``;
* ``drift`` (needs ``pca``; computed once all checkpoints are in, see :func:`add_drift`): the
  Procrustes distance of the top-3 basis to the previous checkpoint's and to the final one's, and of
  the top-3 trajectory's shape.

The drift of two orthonormal bases ``A``, ``B`` ``(3, d)`` is ``min_R ‖R A − B‖_F / √6`` over orthogonal
``R`` (:func:`~pos_geometry.analysis.procrustes.procrustes_rotation`), which equals ``√(1 − mean cos θ_j)``
for the principal angles ``θ_j`` between the subspaces: 0 for the same subspace, 1 for orthogonal ones.
The shape drift is ``scipy.spatial.procrustes``' disparity of the two ``(n, 3)`` trajectories (after
centring, scaling and the best rotation): 0 when the curves are the same up to rotation and scale.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from pos_geometry.analysis._inputs import Window, check_int, check_level
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.sweeps.columns import analysis_names as _named
from pos_geometry.sweeps.columns import drift_walk

__all__ = [
    "ANALYSES",
    "CHEAP",
    "SweepConfig",
    "add_drift",
    "analyse",
    "basis_drift",
    "drift_walk",
    "shape_drift",
]

ANALYSES: tuple[str, ...] = ("norms", "pca", "helix", "periodicity", "drift")
"""Every analysis a sweep can run on each checkpoint (see the module docstring)."""
CHEAP: tuple[str, ...] = ("norms", "pca", "drift")
"""The analyses without a null (about 0.1 s per GPT-2 table): ``analyses="cheap"``."""
DRIFT_COMPONENTS = 3


@dataclass(frozen=True)
class SweepConfig:
    """The analyses and their parameters; a stored checkpoint result is reused only under the same one.

    ``kind``: ``"learned"`` (a positional table per checkpoint) or ``"rotary"`` (the frequency atlas of the
    query/key weights, :mod:`pos_geometry.sweeps.rotary`); ``analyses``: a subset of :data:`ANALYSES`
    (learned) or of :data:`~pos_geometry.sweeps.rotary.ROTARY_ANALYSES` (rotary); ``"all"`` / ``"cheap"``
    accepted by :meth:`make`. Learned: ``n_components``: PCA components kept (the ``top{n}_ratio``);
    ``n_surrogates``, ``alpha``, ``random_state``, ``null_method``: the helix and periodicity nulls
    (``sequential``: the helix nulls stop once 10 surrogates reach the table, as in
    :func:`~pos_geometry.analysis.helix.fit_helix`); ``window``:
    ``(start, stop)`` positions analysed (None: all). Rotary: ``layers`` (None: all) and ``fold_norm``, as in
    :func:`~pos_geometry.atlas.rotary.rotary_atlas`, and ``gguf_file``: the ``.gguf`` file of each
    checkpoint that is read instead of its transformers weights (None: those).
    """

    analyses: tuple[str, ...]
    n_components: int = 10
    n_surrogates: int = 199
    alpha: float = 0.01
    random_state: int = 0
    window: tuple[int, int] | None = None
    kind: str = "learned"
    layers: tuple[int, ...] | None = None
    fold_norm: bool = False
    gguf_file: str | None = None
    null_method: str = "fast"
    sequential: bool = True

    @classmethod
    def make(
        cls,
        analyses: str | Sequence[str] = "all",
        *,
        n_components: int = 10,
        n_surrogates: int = 199,
        alpha: float = 0.01,
        random_state: int = 0,
        window: Window = None,
        kind: str = "learned",
        layers: Any = None,
        fold_norm: bool = False,
        gguf_file: str | None = None,
        null_method: str = "fast",
        sequential: bool = True,
    ) -> SweepConfig:
        """Validate the arguments of :func:`~pos_geometry.sweeps.sweep` into a config."""
        if gguf_file is not None:
            from pos_geometry.sources.gguf.opening import check_gguf_name

            check_gguf_name(gguf_file)
        if kind == "rotary":
            from pos_geometry.sweeps.rotary import rotary_config

            config = rotary_config(cls, analyses, layers=layers, fold_norm=fold_norm)
            return dataclasses.replace(config, gguf_file=gguf_file)
        if kind != "learned":
            raise InvalidArgumentError(f"kind must be 'learned' or 'rotary'; got {kind!r}.")
        if gguf_file is not None:
            raise InvalidArgumentError(
                "gguf_file sweeps read a rotary model's query/key weights from each checkpoint's GGUF file; this "
                "model has a learned table. Leave gguf_file out."
            )
        if layers is not None or fold_norm:
            raise InvalidArgumentError(
                "layers and fold_norm choose the query/key weights of a rotary model's atlas; this sweep reads a "
                f"learned positional table. Leave them out (got layers={layers!r}, fold_norm={fold_norm!r})."
            )
        named = _named(analyses, ANALYSES, CHEAP, " (a learned table's; 'atlas' is a rotary model's)")
        chosen = set(named) | ({"pca"} if "drift" in named else set())
        n_components = check_int("n_components", n_components, DRIFT_COMPONENTS, f">= {DRIFT_COMPONENTS}")
        n_surrogates = check_int("n_surrogates", n_surrogates, 0, ">= 0 (0 leaves the helix untested)")
        random_state = check_int("random_state", random_state, 0, ">= 0 (a seed)")
        if "periodicity" in chosen and n_surrogates < 1:
            raise InvalidArgumentError(
                "periodicity needs n_surrogates >= 1 for its red-noise null; got 0. Raise n_surrogates or "
                "leave 'periodicity' out of analyses."
            )
        if n_surrogates:
            alpha = check_level(alpha, n_surrogates)
        if window is not None:
            try:
                start, stop = (None if v is None else int(v) for v in window)
            except (TypeError, ValueError):
                raise InvalidArgumentError(f"window must be a pair (start, stop); got {window!r}.") from None
            window = (start, stop)
        from pos_geometry.analysis.nulls.basis import check_null_method
        from pos_geometry.analysis.nulls.monte_carlo import check_sequential

        return cls(
            tuple(a for a in ANALYSES if a in chosen), n_components, n_surrogates, float(alpha), random_state,
            window, null_method=check_null_method(null_method),
            sequential=check_sequential(sequential),
        )  # fmt: skip

    def fingerprint(self) -> str:
        """A short hash of the config: stored results computed under another config are recomputed.

        Only the fields that decide the results count: a learned sweep's hash is that of its analyses and
        their parameters (as before rotary sweeps existed), a rotary sweep's that of its analyses, layers
        and ``fold_norm``."""
        fields = asdict(self)
        if self.kind == "learned":
            for name in ("kind", "layers", "fold_norm", "gguf_file"):
                fields.pop(name)
            if {"helix", "periodicity"} & set(self.analyses):
                # the nulls are drawn on the table's principal axes: results of the
                # older, basis-dependent nulls are recomputed
                fields["null_basis"] = "principal axes"
            else:
                fields.pop("null_method")
            if "helix" not in self.analyses or not self.sequential:
                fields.pop("sequential")  # (results of all-surrogate helix nulls keep their hash)
        else:
            keys = ("analyses", "kind", "layers", "fold_norm") + (("gguf_file",) if self.gguf_file else ())
            fields = {k: fields[k] for k in keys}
        text = json.dumps(fields, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _f(value: Any) -> float | None:
    return None if value is None else float(value)


def _norms(matrix: Any) -> dict[str, Any]:
    """Norms accumulated in float64 without a float64 copy of the table."""
    import torch

    rows = torch.linalg.vector_norm(matrix, dim=1, dtype=torch.float64)
    return {
        "table_norm": float(torch.linalg.vector_norm(rows)),
        "position0_norm": float(rows[0]),
        "mean_row_norm": float(rows.mean()),
    }


def _pca(emb: Any, config: SweepConfig) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    from pos_geometry.analysis.pca import pca

    k = min(config.n_components, *emb.shape)
    res = pca(emb, n_components=k, window=config.window, random_state=config.random_state)
    ratio = np.asarray(res.explained_variance_ratio_, dtype=np.float64)
    metrics = {"top3_ratio": float(ratio[:3].sum()), f"top{config.n_components}_ratio": float(ratio.sum())}
    arrays = {
        "components": res.components_.detach().cpu().numpy(),
        "coordinates": res.coordinates.detach().cpu().numpy(),
        "mean": res.mean_.detach().cpu().numpy(),
        "explained_variance": np.asarray(res.explained_variance_, dtype=np.float64),
        "explained_variance_ratio": ratio,
        "singular_values": np.asarray(res.singular_values_, dtype=np.float64),
        "scalars": np.array(
            [
                res.total_variance_,
                res.stable_rank_,
                res.window[0],
                res.window[1],
                res.n_iter or -1,
                res.n_oversamples or -1,
            ],
            dtype=np.float64,
        ),
        "solver": np.frombuffer(res.solver.encode(), dtype=np.uint8).copy(),
    }
    return metrics, arrays


def _helix(emb: Any, config: SweepConfig) -> dict[str, Any]:
    from pos_geometry.analysis.helix import fit_helix

    fit = fit_helix(
        emb, 3, window=config.window, n_surrogates=config.n_surrogates, alpha=config.alpha,
        random_state=config.random_state, null_method=config.null_method, sequential=config.sequential,
    )  # fmt: skip
    return {
        "helix_verdict": fit.verdict,
        "helix_reason": fit.reason,
        "helix_p_value": _f(fit.p_value),
        # surrogates drawn by the longest null (fewer than n_surrogates where a sequential null stopped; 0: none ran)
        "helix_n_surrogates": max((t.n_surrogates for t in fit.tests), default=0),
        "helix_shape": fit.shape,
        "helix_delta_bic": float(fit.delta_bic),
        "helix_period": _f(fit.period),
        "helix_turns": float(fit.turns[0]) if fit.turns.size else None,
        "helix_rotation_share": float(fit.rotation_share),
    }


def _periodicity(emb: Any, config: SweepConfig) -> dict[str, Any]:
    from pos_geometry.analysis.periodicity import periodicity

    res = periodicity(
        emb, window=config.window, n_components=3, n_surrogates=config.n_surrogates, alpha=config.alpha,
        random_state=config.random_state, null_method=config.null_method,
    )  # fmt: skip
    top = res.dominant_periods[0] if res.dominant_periods else None
    std = None if top is None or not math.isfinite(top.period_std) else float(top.period_std)
    return {
        "periodicity_status": "period" if top is not None else "none significant",
        "periodicity_period": None if top is None else float(top.period),
        "periodicity_period_std": std,
        "periodicity_series": None if top is None else top.series,
        "periodicity_p_value": None if top is None else float(top.p_value),
        "periodicity_n_significant": len(res.dominant_periods),
        "toeplitz_score": float(res.toeplitz_score),
        "column_fraction": float(res.column_fraction),
    }


def analyse(emb: Any, config: SweepConfig) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """``(metrics, arrays)`` of one checkpoint's :class:`PositionalEmbedding`.

    ``metrics``: name -> number/str/None (see the module docstring); ``arrays``: the PCA fit (basis
    ``(k, d)``, coordinates ``(n, k)``, mean ``(d,)``, variances) when ``"pca"`` ran, else empty.
    """
    metrics: dict[str, Any] = {}
    arrays: dict[str, np.ndarray] = {}
    if "norms" in config.analyses:
        metrics |= _norms(emb.matrix.detach().cpu())
    if "pca" in config.analyses:
        found, arrays = _pca(emb, config)
        metrics |= found
    if "helix" in config.analyses:
        metrics |= _helix(emb, config)
    if "periodicity" in config.analyses:
        metrics |= _periodicity(emb, config)
    return metrics, arrays


def basis_drift(a: np.ndarray, b: np.ndarray) -> float:
    """Procrustes distance ``min_R ‖R a − b‖_F / √(2k)`` of two orthonormal bases ``(k, d)``, in [0, 1]."""
    import torch

    from pos_geometry.analysis.procrustes import procrustes_rotation

    ta, tb = torch.from_numpy(np.asarray(a, np.float64)), torch.from_numpy(np.asarray(b, np.float64))
    rot = procrustes_rotation(ta, tb)
    dist = float(torch.linalg.norm(rot @ ta - tb)) / math.sqrt(2 * a.shape[0])
    return min(max(dist, 0.0), 1.0)


def shape_drift(a: np.ndarray, b: np.ndarray) -> float:
    """``scipy.spatial.procrustes`` disparity of two trajectories ``(n, k)`` (0 = same shape), in [0, 1]."""
    from scipy.spatial import procrustes

    return float(procrustes(np.asarray(b, np.float64), np.asarray(a, np.float64))[2])


def add_drift(
    bases: Sequence[tuple[np.ndarray, np.ndarray] | None], names: Sequence[str]
) -> list[dict[str, Any]]:
    """Drift columns for each checkpoint, in sweep order (``None`` entries are failed checkpoints).

    ``bases[i]``: ``(components (k, d), coordinates (n, k))`` of checkpoint ``i``; the first
    :data:`DRIFT_COMPONENTS` are compared (:func:`drift_walk`: to the previous and the final checkpoint).
    """
    k = DRIFT_COMPONENTS

    def compare(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> dict[str, float]:
        return {
            "drift": basis_drift(a[0][:k], b[0][:k]),
            "shape_drift": shape_drift(a[1][:, :k], b[1][:, :k]),
        }

    return drift_walk(bases, names, compare)
