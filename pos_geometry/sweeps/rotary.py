"""What a sweep measures on each checkpoint of a rotary model: its frequency atlas, and how it moves.

A rotary model has no positional table; position enters attention through the rotation of each
query/key plane, and how a head uses each plane is written in its ``W_q``/``W_k`` rows
(:mod:`pos_geometry.atlas.rotary`). Per checkpoint the sweep reads those rows (and the norm gain
with ``fold_norm``) pinned to the checkpoint's commit, by range requests, computes
:func:`~pos_geometry.atlas.rotary.rotary_atlas` and keeps (see :data:`ROTARY_ANALYSES`):

* ``atlas``: ``short_share`` (mean over layers × heads of the share of the QK form held by the planes that
  complete a cycle within the training context; ``long_share`` is the rest) with its ``_min``/``_max`` over
  heads and ``layer{l}_short_share`` per layer; ``q_pair_cosine_abs``/``k_pair_cosine_abs`` (mean |cosine|
  between each plane's two weight rows); ``q_plane_norm``/``k_plane_norm`` (mean Frobenius norm of a
  plane's two rows); ``top_plane``, its ``top_plane_wavelength`` and ``top_plane_share`` (the plane with
  the largest mean share); ``effective_planes`` (mean over heads of ``exp`` of the entropy of the head's
  plane shares: 1 when one plane holds everything, ``n_planes`` when all are used alike); the shape
  (``n_layers``, ``n_heads``, ``n_kv_heads``, ``n_planes``), ``context_length``, ``critical_dimension``,
  ``pairing``. The atlas arrays are stored (:meth:`SweepResult.atlas
  <pos_geometry.sweeps.result.SweepResult.atlas>` rebuilds it without any read).
* ``drift`` (needs ``atlas``): ``usage_drift_previous``/``usage_drift_final``, the mean over heads of the
  total-variation distance ``½ Σ_i |p_i − q_i|`` between a head's plane shares at two checkpoints (0: the
  same usage, 1: disjoint planes).

A learned table's verdicts do not apply: each record says so (``helix_verdict`` ``"does not apply"`` with
``helix_reason``), never a number.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pos_geometry.errors import InvalidArgumentError, NonFiniteError

__all__ = [
    "ROTARY_ANALYSES",
    "add_usage_drift",
    "atlas_metrics",
    "read_atlas",
    "rotary_config",
    "usage_drift",
]

ROTARY_ANALYSES: tuple[str, ...] = ("atlas", "drift")
"""The analyses of a rotary model's checkpoint (both cheap: no null); ``"all"`` and ``"cheap"`` are both."""
ATLAS_ARRAYS = ("q_norm", "k_norm", "qk_share", "q_pair_cosine", "k_pair_cosine", "wavelengths")


def rotary_config(cls: type, analyses: Any, *, layers: Any, fold_norm: Any) -> Any:
    """The :class:`~pos_geometry.sweeps.metrics.SweepConfig` of a rotary sweep (validated)."""
    from pos_geometry.sweeps.columns import analysis_names

    named = analysis_names(
        analyses, ROTARY_ANALYSES, ROTARY_ANALYSES, " (a rotary model's: it has no learned table)"
    )
    chosen = set(named) | {"atlas"}
    if layers is not None:
        picked = (layers,) if isinstance(layers, int) else layers
        if (
            not isinstance(picked, Sequence)
            or isinstance(picked, str)
            or not picked
            or any(isinstance(i, bool) or not isinstance(i, int) for i in picked)
        ):
            raise InvalidArgumentError(
                f"layers must be a layer index or a non-empty list of them (negatives count from the end), or "
                f"None for all; got {layers!r}."
            )
        layers = tuple(picked)
    if not isinstance(fold_norm, bool):
        raise InvalidArgumentError(f"fold_norm must be True or False; got {fold_norm!r}.")
    return cls(
        tuple(a for a in ROTARY_ANALYSES if a in chosen), kind="rotary", layers=layers, fold_norm=fold_norm
    )


def does_not_apply(model_id: str) -> dict[str, Any]:
    """The learned-table verdict of a rotary checkpoint: it does not apply, and why."""
    return {
        "helix_verdict": "does not apply",
        "helix_reason": (
            f"{model_id} is a rotary model: position enters attention by rotating query/key planes, so there "
            "is no learned positional table to fit a helix to (its atlas columns describe the planes)."
        ),
    }


def _finite(x: np.ndarray, how: Any = np.mean) -> float | None:
    """``how`` (mean, min, max) of the finite entries of ``x``; None when there are none."""
    x = x[np.isfinite(x)]
    return float(how(x)) if x.size else None


def atlas_metrics(atlas: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """``(metrics, arrays)`` of one checkpoint's :class:`~pos_geometry.atlas.rotary.RotaryAtlas`
    (the module docstring defines the metrics; arrays: ``(n_layers, n_heads, n_planes)`` statistics,
    wavelengths, critical flags, layers and key heads).

    Raises:
        NonFiniteError: a NaN/inf in the weights (their plane norms are not finite).
    """
    a = {name: getattr(atlas, name).detach().cpu().numpy().astype(np.float64) for name in ATLAS_ARRAYS}
    for which in ("q_norm", "k_norm"):
        bad = ~np.isfinite(a[which])
        if bad.any():
            layer, head, plane = (int(v[0]) for v in np.nonzero(bad))
            raise NonFiniteError(
                f"the {which[0]} weights of layer {atlas.layers[layer]}, head {head}, plane {plane} hold NaN or "
                "inf (their norm is not finite); this checkpoint's atlas cannot be computed."
            )
    share = a["qk_share"]
    short = atlas.short_share.detach().cpu().numpy().astype(np.float64)
    usage = np.nanmean(share, axis=(0, 1)) if np.isfinite(share).any() else np.full(share.shape[-1], np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        entropy = -np.nansum(np.where(share > 0, share * np.log(share), 0.0), axis=-1)
    entropy[~np.isfinite(share).all(axis=-1)] = np.nan  # a head with no QK form (all-zero rows) has none
    n_layers, n_heads, n_planes = share.shape
    top = int(np.nanargmax(usage)) if np.isfinite(usage).any() else None
    metrics: dict[str, Any] = {
        "n_layers": n_layers, "n_heads": n_heads, "n_kv_heads": len(set(atlas.kv_heads)), "n_planes": n_planes,
        "context_length": int(atlas.context_length), "critical_dimension": int(atlas.critical_dimension),
        "pairing": atlas.pairing,
        "short_share": _finite(short), "short_share_min": _finite(short, np.min),
        "short_share_max": _finite(short, np.max),
        "q_pair_cosine_abs": _finite(np.abs(a["q_pair_cosine"])), "k_pair_cosine_abs": _finite(np.abs(a["k_pair_cosine"])),
        "q_plane_norm": _finite(a["q_norm"]), "k_plane_norm": _finite(a["k_norm"]),
        "top_plane": top, "top_plane_wavelength": None if top is None else float(a["wavelengths"][top]),
        "top_plane_share": None if top is None else float(usage[top]),
        "effective_planes": _finite(np.exp(entropy)),
    }  # fmt: skip
    for row, layer in enumerate(atlas.layers):
        metrics[f"layer{layer}_short_share"] = _finite(short[row])
    arrays = {
        **{name: a[name] for name in ATLAS_ARRAYS},
        "critical": atlas.critical.detach().cpu().numpy().astype(np.uint8),
        "spans": np.asarray(atlas.spans or (atlas.context_length,) * n_layers, dtype=np.int64),
        "layers": np.asarray(atlas.layers, dtype=np.int64),
        "kv_heads": np.asarray(atlas.kv_heads, dtype=np.int64),
    }
    return metrics, arrays


def usage_drift(a: np.ndarray, b: np.ndarray) -> float | None:
    """Mean over heads of ``½ Σ_i |a_i − b_i|`` for two ``(..., n_planes)`` share arrays, in [0, 1]
    (None when their shapes differ or no head has finite shares in both)."""
    if a.shape != b.shape:
        return None
    tv = 0.5 * np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).sum(axis=-1)
    return _finite(tv)


def add_usage_drift(shares: Sequence[np.ndarray | None], names: Sequence[str]) -> list[dict[str, Any]]:
    """``usage_drift_previous``/``usage_drift_final`` (and the revisions compared) per checkpoint, in sweep
    order; ``shares[i]``: checkpoint ``i``'s ``qk_share`` ``(n_layers, n_heads, n_planes)`` or None (failed)."""
    from pos_geometry.sweeps.columns import drift_walk

    return drift_walk(shares, names, lambda a, b: {"usage_drift": usage_drift(a, b)})


def _cache_folder(repo_id: str, commit: str | None) -> Path | None:
    """The pos_geometry cache folder of ``repo_id`` at ``commit`` (where the atlas keeps its per-tensor
    sums), or None without a commit."""
    from pos_geometry.sources import cache

    if commit is None or not cache.is_commit(commit):
        return None
    return cache.commit_dir(repo_id, commit)


def read_atlas(task: Any) -> Any:
    """The :class:`~pos_geometry.atlas.rotary.RotaryAtlas` of ``task``'s checkpoint, read from the Hub
    at its commit (its ``revision`` recorded), as ``rotary_atlas(repo, revision=...)`` computes it.

    The atlas reduces each q/k tensor as it streams in (one range request each) and keeps only small
    entries in the pos_geometry cache (its per-tensor sums, and the norm gains with ``fold_norm``); unless
    ``task.keep_tables``, the entries this call added are removed afterwards (a sweep of hundreds of
    checkpoints keeps only its results), so the cache holds at most the checkpoints in flight.
    """
    from pos_geometry.atlas.rotary import rotary_atlas
    from pos_geometry.sources.opening import open_checkpoint
    from pos_geometry.sweeps.store import remove_stale_temporaries

    config = task.config
    folder = _cache_folder(task.repo_id, task.commit)
    if folder is not None:
        remove_stale_temporaries(folder)  # a sweep killed while writing here left them
    before = set(folder.iterdir()) if folder is not None and folder.is_dir() else set()
    try:
        checkpoint = open_checkpoint(
            task.repo_id, revision=task.commit or task.revision, model_id=task.model_id,
            gguf_file=config.gguf_file,
        )  # fmt: skip
        checkpoint = dataclasses.replace(checkpoint, revision=task.revision)
        # one tensor at a time: the sweep already reads several checkpoints at once (bounded by its workers)
        return rotary_atlas(
            checkpoint, layers=config.layers, fold_norm=config.fold_norm, device="cpu", n_workers=1
        )
    finally:
        if folder is not None and not task.keep_tables and folder.is_dir():
            for path in set(folder.iterdir()) - before:
                with contextlib.suppress(OSError):
                    path.unlink()
            with contextlib.suppress(OSError):
                folder.rmdir()  # only when empty


def rebuild_atlas(arrays: dict[str, np.ndarray], metrics: dict[str, Any], provenance: Any) -> Any:
    """A :class:`~pos_geometry.atlas.rotary.RotaryAtlas` from a stored checkpoint's arrays."""
    import torch

    from pos_geometry.atlas.rotary import RotaryAtlas, span_critical, usage_summaries

    t = {name: torch.from_numpy(arrays[name]) for name in ATLAS_ARRAYS}
    critical = torch.from_numpy(arrays["critical"].astype(bool))
    spans = tuple(int(s) for s in arrays["spans"]) if "spans" in arrays else ()
    per_layer = span_critical(t["wavelengths"], spans) if spans else critical
    return RotaryAtlas(
        **t, critical=critical, **usage_summaries(t["qk_share"], per_layer), spans=spans,
        layers=tuple(int(i) for i in arrays["layers"]), kv_heads=tuple(int(i) for i in arrays["kv_heads"]),
        context_length=int(metrics["context_length"]), critical_dimension=int(metrics["critical_dimension"]),
        fold_norm="fold_norm" in provenance.processing, pairing=str(metrics["pairing"]), provenance=provenance,
    )  # fmt: skip
