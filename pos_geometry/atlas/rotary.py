"""The frequency atlas: how every head of a rotary model uses each rotation plane, read from its weights.

A rotary model has no positional matrix; position enters attention only through the rotation
of each query/key plane ``i`` by ``p·θ_i``. Whether a head attends by position, and at which
scale, is therefore written in its projection weights: the rows of ``W_q`` and ``W_k`` that form
plane ``i`` decide how much of the logit ``q·k`` turns with the offset at wavelength ``2π/θ_i``.

For layer ``l``, query head ``h`` (key head ``g = h // (n_heads/n_kv_heads)``) and plane ``i``
with head dimensions ``(a, b)`` (the pairing convention of the architecture), let
``Q = W_q[l, h, (a, b), :]`` and ``K = W_k[l, g, (a, b), :]`` (each ``2 × d_model``; with
``fold_norm`` every column is first multiplied by the gain of the norm feeding attention). Then:

* ``q_norm = ‖Q‖_F``, ``k_norm = ‖K‖_F``;
* the plane's bilinear strength ``s_i = ‖Qᵀ K‖_F``, the Frobenius norm of the ``d_model × d_model``
  rank-2 form that plane ``i`` adds to the logit ``xᵀ W_qᵀ R(Δ) W_k y`` at offset ``Δ = 0``
  (computed as ``sqrt(Σ (Q Qᵀ) ⊙ (K Kᵀ))``);
* ``qk_share = s_i / Σ_j s_j`` over the head's rotation planes (sums to 1 per head);
* ``q_pair_cosine``/``k_pair_cosine``: the cosine between the plane's two weight vectors
  (rows ``a`` and ``b``), Chen et al. (NeurIPS 2024);
* ``wavelengths = 2π/θ_i`` with the model's (scaled) frequencies, and ``critical``: whether the
  plane completes a full cycle within the training context ``T`` (``2π/θ_i ≤ T``), the planes
  below Liu et al.'s (ICLR 2024) critical dimension.

Summaries: ``short_share`` per head (share held by the critical planes), ``layer_short_share`` per
layer, and ``layer_usage`` (mean share over heads, per plane: usage versus wavelength). Biases are
not part of the atlas.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import torch

from pos_geometry._device import Device, resolve_device
from pos_geometry._threads import one_thread_per_kernel
from pos_geometry.atlas.plane_statistics import _plane_stats, plane_statistics, span_critical, usage_summaries
from pos_geometry.atlas.plane_sums import grams, layer_sums
from pos_geometry.atlas.rotary_result import RotaryAtlas
from pos_geometry.embedding import Provenance
from pos_geometry.encodings.rotary import rotary_params, scaling_fields
from pos_geometry.errors import InvalidArgumentError, NoLearnedTableError, NotApplicableError
from pos_geometry.hidden.model import LoadedModel
from pos_geometry.registry import kind_from_config
from pos_geometry.registry.derived_layout import RotationGroup
from pos_geometry.sources.network import needs_weights
from pos_geometry.sources.opening import open_checkpoint
from pos_geometry.sources.roles import QKReader
from pos_geometry.sources.tensor_set import Checkpoint

__all__ = ["RotaryAtlas", "rotary_atlas", "plane_statistics", "span_critical", "usage_summaries"]

_NEEDS = "rotary_atlas reads every layer's attention (query/key) weights, and they are not on this machine."

MIN_STREAMS = 2
"""A hub atlas runs at least this many range requests at once (one q/k tensor each), however few cores."""


def _does_not_apply(config: dict, model_id: str) -> NotApplicableError:
    try:
        kind = kind_from_config(config)
        why = f"its positions come from a {kind} table" if kind != "rotary" else ""
    except NoLearnedTableError as exc:
        why = str(exc).split(":")[0]
    return NotApplicableError(
        f"the rotary frequency atlas does not apply to {model_id!r}: {why}, not from rotary embeddings, so "
        "no query/key plane turns with position. Use pos_geometry.load and pos_geometry.pca for learned tables."
    )


def _stored_as(checkpoint: Checkpoint, keys: Sequence[str]) -> dict[str, object]:
    """Provenance of a GGUF checkpoint: its metadata summary and the quantisation types of the tensors read."""
    if "gguf" not in checkpoint.config:
        return {}
    types = sorted({checkpoint.stored_type(key) for key in keys})
    return {"gguf": checkpoint.config["gguf"], "quantization": tuple(types)}


@needs_weights(_NEEDS)
def rotary_atlas(
    name_or_path: str | os.PathLike[str] | Checkpoint | LoadedModel,
    *,
    layers: Sequence[int] | int | None = None,
    revision: str | None = None,
    fold_norm: bool = False,
    offline: bool | None = None,
    model_id: str | None = None,
    device: Device = "auto",
    n_workers: int | None = None,
    layer_type: str | None = None,
    gguf_file: str | None = None,
    biases: bool = True,
) -> RotaryAtlas:
    """The frequency atlas of a rotary model, read from its query/key weights without building it.

    Args:
        name_or_path: a model-table name (``"pythia-70m"``, ``"mistral-7b-v0.1"``), a hub repo id, or a
            local Hugging Face model folder, a ``.gguf`` file, or a model opened by
            :func:`~pos_geometry.open_model` (its q/k bytes are read from the same source). An
            already opened :class:`~pos_geometry.sources.tensor_set.Checkpoint` is read as it is
            (``revision``, ``offline`` and ``model_id`` are then its own).
        layers: layer indices to read (default: all); only their q/k tensors are read.
        revision: branch, tag, commit or checkpoint name (hub: pinned to one commit for all tensors).
        fold_norm: multiply each input column of W_q and W_k by the gain of the norm that feeds
            attention (what the projections see is ``gain ⊙ x̂``), and, for architectures with
            query/key norms after the projection (Qwen3, Gemma-3, OLMo-2), each row by that norm's
            gain (their per-token RMS divisor cancels in the shares, so this is exact).
        offline, model_id: as in :func:`pos_geometry.load`.
        device: where the per-plane dot products run (``"auto"``: CUDA, then MPS, else CPU); the
            arrays returned are float64 on the CPU either way. The CPU result is the reference.
        n_workers: threads that read and reduce the q/k tensors, one tensor each (from the hub: that
            many range requests at once). None: as many as torch has threads, at most 4 (one for a
            GPU), and from the hub at least :data:`MIN_STREAMS`. A caller that already runs several
            atlases at once (the checkpoint sweep) passes 1.
        gguf_file: read this ``.gguf`` file of the repo (or folder) ``name_or_path``, as transformers'
            ``gguf_file=``: from the HF cache, else by range reads (its header, then the q/k tensors).
        layer_type: for models whose layer types rotate with different frequencies (Gemma-2/3), the
            type whose layers to read (default: all layers of that type); required unless ``layers``
            are all of one type. Layers that do not rotate at all (NoPE) are left out and listed in
            ``unrotated_layers``.
        biases: for architectures with query/key biases (Qwen2, Starcoder2, StableLM...), include them
            in the plane shares as an always-on input (:mod:`pos_geometry.atlas.plane_biases`) and
            split each head's form into ``term_share``; False: the weight-only form. ``includes`` says
            which form a result holds.

    Every architecture's attention layout comes from transformers itself
    (:mod:`pos_geometry.registry.derived_layout`), frequencies included.

    Returns:
        a :class:`RotaryAtlas` with arrays ``(n_layers, n_heads, n_planes)`` (see the module docstring).

    Raises:
        NotApplicableError: the model has no rotary embeddings (GPT-2, BERT, ALiBi models ...).
        InvalidArgumentError: ``device`` is unknown or unavailable, or ``n_workers`` is not a positive int.

    Memory holds one head's rotating rows per thread: each head's rows are read from the checkpoint
    by offset (from the hub: one streamed range request per q/k tensor, several at once), reduced to
    its planes' sums as soon as they arrive, and dropped (:mod:`pos_geometry.atlas.plane_sums`).
    From the hub the per-tensor sums are kept in pos_geometry's cache, so a second atlas of the same
    commit reads nothing.
    """
    bad_workers = isinstance(n_workers, bool) or not isinstance(n_workers, int | None)
    if bad_workers or (n_workers is not None and n_workers < 1):
        raise InvalidArgumentError(
            f"n_workers must be a positive int or None (automatic); got {n_workers!r}."
        )
    where = resolve_device(device)
    if isinstance(name_or_path, LoadedModel):  # an opened model: its q/k bytes, read from where it was opened
        revision = name_or_path.revision if revision is None else revision
        name_or_path = name_or_path.checkpoint_source("the atlas's query/key weights")
    checkpoint = (
        name_or_path
        if isinstance(name_or_path, Checkpoint)
        else open_checkpoint(
            name_or_path, revision=revision, offline=offline, model_id=model_id, gguf_file=gguf_file
        )
    )
    try:
        rotary = kind_from_config(checkpoint.config) == "rotary"
    except NoLearnedTableError:
        rotary = False
    if not rotary:
        raise _does_not_apply(checkpoint.config, checkpoint.model_id)
    reader = QKReader(checkpoint)
    chosen, group, unrotated = _rotating_layers(reader, reader.layers(layers), layers is None, layer_type)
    kv_heads = torch.arange(reader.n_heads) // (reader.n_heads // reader.n_kv_heads)
    with one_thread_per_kernel() as threads:
        workers = n_workers
        if workers is None:  # from the hub at least MIN_STREAMS: one transfer overlaps another's arithmetic
            workers = max(1, min(threads, 4)) if where.type == "cpu" else 1
            if checkpoint.commit is not None:
                workers = max(workers, MIN_STREAMS)
        sums, keys, stored = layer_sums(reader, chosen, fold_norm, where, workers)
    plane_grams_ = [
        (grams(*layer["q"], reader.planes), grams(*layer["k"], reader.planes)[kv_heads]) for layer in sums
    ]
    stats = [_plane_stats(gq, gk) for gq, gk in plane_grams_]
    q_norm, k_norm, share, q_cos, k_cos = (torch.stack(s) for s in zip(*stats, strict=True))
    term_share, bias_keys = None, []
    if biases:
        share, term_share, bias_keys = _with_biases(reader, chosen, plane_grams_, kv_heads, fold_norm, share)
    keys = list(keys) + [k for k in bias_keys if k not in keys]
    includes = (
        "weights and q/k biases" if term_share is not None
        else "weights (the model has no q/k biases)" if biases
        else "weights only (q/k biases left out)"
    )  # fmt: skip
    theta = torch.tensor(group.theta, dtype=torch.float64)
    wavelengths = 2 * math.pi / theta
    context = reader.rotary.context_length
    spans = _spans(reader, chosen, context)
    layer_critical = span_critical(wavelengths, spans)
    critical = wavelengths <= (spans[0] if len(set(spans)) == 1 else context)
    provenance = Provenance(
        model_id=checkpoint.model_id,
        kind="rotary",
        source=f"{checkpoint.location}: {reader.layout.model_type} q/k projections of {len(chosen)} layer(s)",
        revision=checkpoint.revision,
        config={
            "model_type": reader.layout.model_type,
            "rope_theta": _base(reader, group),
            "rotary_dim": reader.rotary.rotary_dim,
            "head_dim": reader.rotary.head_dim,
            "max_position_embeddings": reader.rotary.max_positions,
            "num_attention_heads": reader.n_heads,
            "num_key_value_heads": reader.n_kv_heads,
            "tensor_keys": tuple(keys),
            "shares_of": includes,
            **(
                {"layer_type": group.label, "attention_factor": group.attention_factor}
                if group.label != "all"
                else {}
            ),
            **(
                {"layout": f"derived from transformers {reader.derived.transformers_version}"}
                if reader.derived
                else {}
            ),
            **scaling_fields(reader.rotary),
            **_stored_as(checkpoint, keys),
        },
        original_dtype=stored,
        commit=checkpoint.commit,
        processing=(("fold_norm",) + (("fold_qk_norm",) if reader.layout.q_norm_key else ()))
        if fold_norm
        else (),
    )
    return RotaryAtlas(
        q_norm=q_norm,
        k_norm=k_norm,
        qk_share=share,
        q_pair_cosine=q_cos,
        k_pair_cosine=k_cos,
        wavelengths=wavelengths,
        critical=critical,
        **usage_summaries(share, layer_critical),
        layers=chosen,
        kv_heads=tuple(kv_heads.tolist()),
        context_length=context,
        critical_dimension=2 * int(critical.sum()),
        fold_norm=fold_norm,
        pairing=reader.layout.pairing,
        provenance=provenance,
        layer_type=group.label if group.label != "all" else None,
        unrotated_layers=unrotated,
        spans=spans,
        includes=includes,
        term_share=term_share,
    )


def _with_biases(
    reader: QKReader,
    layers: tuple[int, ...],
    plane_grams_: list[tuple[torch.Tensor, torch.Tensor]],
    kv_heads: torch.Tensor,
    fold_norm: bool,
    share: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor | None, list[str]]:
    """``(share, term_share, keys)`` with the q/k biases as an always-on input (``plane_biases``); the
    weight-only ``share`` and None when the model has none."""
    from pos_geometry.atlas.plane_biases import augmented, bias_terms, layer_biases

    shares, terms, keys = [], [], []
    for index, (gq, gk) in zip(layers, plane_grams_, strict=True):
        gains = None
        if fold_norm and reader.layout.q_norm_key is not None:
            gains = {which: reader.qk_norm_gain(index, which)[0] for which in ("q", "k")}
        found, read = layer_biases(reader, index, gains)
        if found is None:
            return share, None, []
        bq, bk = found["q"], found["k"][kv_heads]
        shares.append(_plane_stats(augmented(gq, bq, reader.planes), augmented(gk, bk, reader.planes))[2])
        per_plane = bias_terms(gq, gk, bq, bk, reader.planes).sum(dim=1)  # (n_heads, 4)
        terms.append(per_plane / per_plane.sum(-1, keepdim=True).clamp_min(torch.finfo(torch.float64).tiny))
        keys += [k for k in read if k not in keys]
    return torch.stack(shares), torch.stack(terms), keys


def _spans(reader: QKReader, layers: tuple[int, ...], context: int) -> tuple[int, ...]:
    """Each layer's attention span (:meth:`~pos_geometry.registry.architecture.Architecture.span`), capped at
    ``context``; ``context`` for every layer where the config cannot be described layer by layer."""
    from pos_geometry.registry.architecture import describe_architecture

    try:
        architecture = describe_architecture(reader.config)
        return tuple(min(architecture.span(i), context) for i in layers)
    except InvalidArgumentError:
        return (context,) * len(layers)


def _base(reader: QKReader, group: RotationGroup) -> float | None:
    """The rope base of ``group``'s layers as the config states it (None where it states none pos_geometry
    reads: the frequencies then come from transformers alone, and JSON stays strict)."""
    try:
        base = (
            reader.rotary.base
            if group.label == "all"
            else rotary_params(reader.config, layer_type=group.label).base
        )
    except InvalidArgumentError:
        return None
    return base if math.isfinite(base) else None


def _rotating_layers(
    reader: QKReader, chosen: tuple[int, ...], all_layers: bool, layer_type: str | None
) -> tuple[tuple[int, ...], RotationGroup, tuple[int, ...]]:
    """``(layers to read, their rotation group, requested layers that do not rotate)``.

    Raises:
        InvalidArgumentError: the layers rotate with different frequencies and ``layer_type`` does not
            pick one group, or ``layer_type`` is unknown or excludes a requested layer.
        NotApplicableError: none of the requested layers rotates.
    """
    groups = reader.rotation_groups()
    unrotated = tuple(i for i in chosen if i in reader.unrotated)
    rotating = tuple(i for i in chosen if i not in reader.unrotated)
    if not rotating:
        raise NotApplicableError(
            f"layers {list(chosen)} do not rotate at all (no positional rotation): no atlas."
        )
    listing = "; ".join(f"{g.label!r}: layers {', '.join(map(str, g.layers))}" for g in groups)
    if layer_type is not None:
        group = next((g for g in groups if g.label == layer_type), None)
        if group is None:
            raise InvalidArgumentError(
                f"layer_type must be one of {[g.label for g in groups]}; got {layer_type!r}."
            )
        outside = [i for i in rotating if i not in group.layers]
        if all_layers:
            rotating = tuple(i for i in rotating if i in group.layers)
        elif outside:
            raise InvalidArgumentError(f"layers {outside} are not of type {layer_type!r} ({listing}).")
        return rotating, group, unrotated
    hit = [g for g in groups if any(i in g.layers for i in rotating)]
    if len(hit) > 1:
        raise InvalidArgumentError(
            f"these layers rotate with different frequencies ({listing}); one atlas holds one set of "
            f"wavelengths, so pass layer_type= one of {[g.label for g in hit]}, or layers= of one type."
        )
    return rotating, hit[0], unrotated
