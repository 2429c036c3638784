"""How each head of a learned-table model (GPT-2) reads the position table through its query/key weights.

The rotary atlas's counterpart for a model whose positions come from a learned table ``T``
``(n_positions, d_model)``. For layer ``l`` and head ``h``, with the layer's own LayerNorm
(gain ``γ``, bias ``β``) applied to the table, ``X = LN_l(T)`` ``(n_positions, d_model)``, and the
head's query/key columns ``A = W_q[:, h]``, ``B = W_k[:, h]`` ``(d_model, d_head)`` and biases
``b_q``, ``b_k``, the head's QK bilinear form is ``F = A Bᵀ`` and its position-position logits are
``L = (X A + b_q)(X B + b_k)ᵀ / s`` (``s = √d_head``, times ``l + 1`` when the config scales by the
layer index). ``L`` is the sum of four terms (``terms``):

* ``"position"``: ``X A Bᵀ Xᵀ / s``, the only one that couples the two positions;
* ``"query_bias"``: ``b_q Bᵀ X_jᵀ / s``, a function of the KEY's position ``j`` alone: a preference for
  some positions whatever the query (a first-token or recency bias);
* ``"key_bias"``: ``X_i A b_kᵀ / s``, a function of the QUERY's position alone: the same for every key
  of a query, so it cannot change where that query attends (softmax removes it);
* ``"constant"``: ``b_q b_kᵀ / s``.

``term_share`` gives each term's share of the positional logits, as ``‖t_c‖² / Σ_t ‖t_c‖²`` over the
causal pairs ``j ≤ i`` (``t_c``: the term minus its mean there; the constant has share 0).

**The direct path only** (``path = "direct"``). For layer 0 and a position-only input (token
embeddings zero), ``L`` is exactly the logit matrix GPT-2 computes. For later layers it is the table
as the layer's norm would read it were it alone in the residual stream. Position also reaches later
layers composed through earlier ones (a previous-token head built from layer-0 outputs, say), which
this view cannot see: on GPT-2's real weights ``form_share`` is at most 0.001 from layer 3 on, and a
known previous-token head (L4H11) has ``offset_r2`` 0.21 here. Per head:

* ``form_share = ‖Pᵀ F P‖²_F / ‖F‖²_F``: the share of the form's energy lying in the top
  ``n_components`` principal directions ``P`` of ``X`` (centred PCA, per layer);
* ``logit_share``: ``R²`` of ``L`` rebuilt from ``X``'s rank-``n_components`` PCA reconstruction,
  over the causal pairs ``j ≤ i``;
* ``offset_profile[Δ]``: the mean of ``L[i, i-Δ]`` over the causal pairs at offset ``Δ``;
* ``offset_r2``: the share of the causal logits' variance that the offset alone explains
  (between-offset variance / total): near 1, the head's positional logits depend on relative
  position only, as a rotary head's would;
* ``logit_std``: the standard deviation of the causal logits (how strongly position moves them);
* ``peak_offset``: the offset ``Δ ≤ n/2`` at which ``offset_profile`` is largest (where the head's
  positional logit peaks, among offsets with at least ``n/2`` pairs).

``offset_profile``, ``offset_r2``, ``logit_std`` and ``peak_offset`` are of the whole ``L`` (biases
included; ``biases=False`` leaves them out, as in earlier versions); ``form_share`` and
``logit_share`` are of the position term.

Models with neither rotary embeddings nor a row in
:data:`~pos_geometry.registry.attention.TABLE_QK_LAYOUTS` get :class:`NotApplicableError`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from pos_geometry._device import resolve_device
from pos_geometry._dtypes import dtype_name
from pos_geometry.analysis._results import Result
from pos_geometry.analysis.qk_head_view import head_view, layer_norm_table, offset_means
from pos_geometry.analysis.qk_lookback import implied_offset, plane_step
from pos_geometry.embedding import Provenance
from pos_geometry.errors import (
    CheckpointFormatError,
    InvalidArgumentError,
    MissingTensorError,
    NotApplicableError,
)
from pos_geometry.registry.attention import TableQKLayout, table_qk_layout
from pos_geometry.sources.roles import _layers, _resolve_prefix, head_counts
from pos_geometry.sources.tensor_set import Checkpoint, open_checkpoint

__all__ = [
    "PositionQKAtlas",
    "position_qk_atlas",
    "position_logits",
    "layer_norm_table",
    "offset_means",
    "TERMS",
]

TERMS: tuple[str, ...] = ("position", "query_bias", "key_bias", "constant")
"""The terms of the position logits, in the order of ``term_share`` (module docstring)."""


@dataclass(frozen=True, eq=False)
class PositionQKAtlas(Result):
    """Per layer × head view of how a learned-table model's QK circuit reads its position table.

    Attributes:
        form_share: ``(n_layers, n_heads)`` share of ``‖W_q W_kᵀ‖²`` in the table's top PCA directions.
        logit_share: ``(n_layers, n_heads)`` R² of the position logits from the rank-k table.
        offset_profile: ``(n_layers, n_heads, n_positions)`` mean causal logit at each offset Δ.
        offset_r2: ``(n_layers, n_heads)`` share of the causal logits' variance explained by the offset.
        logit_std: ``(n_layers, n_heads)`` standard deviation of the causal position logits.
        explained_variance_ratio: ``(n_layers, n_components)`` of ``LN_l(table)``'s PCA.
        term_share: ``(n_layers, n_heads, 4)`` each term's share of the positional logits, in the order
            of :data:`TERMS` (all zeros but the position term with ``biases=False``).
        peak_offset: ``(n_layers, n_heads)`` long: the offset where the logit profile peaks.
        path: ``"direct"``: the table read straight through each layer's norm and W_q/W_k (see the
            module docstring for what this cannot see).
        biases: whether the c_attn biases are in the logits.
        toeplitz_share, toeplitz_null: ``(n_layers, n_heads)`` share of the position term's variance (all
            pairs) that the offset explains, and the same with the key rows permuted (the null).
        rotation_fit, rotation_angle: ``(n_layers, n_heads)`` how much of the form on the table's top
            principal plane is a scaled rotation, and its angle (radians).
        plane_step: ``(n_layers,)`` radians per position the normed table turns in that plane.
        layers: the layer indices, in order.
        n_components: the PCA directions counted as "top".
        n_positions: rows of the table used.
        provenance: model, revision, commit, tensor keys.
    """

    form_share: torch.Tensor
    logit_share: torch.Tensor
    offset_profile: torch.Tensor
    offset_r2: torch.Tensor
    logit_std: torch.Tensor
    explained_variance_ratio: torch.Tensor
    layers: tuple[int, ...]
    n_components: int
    n_positions: int
    provenance: Provenance
    term_share: torch.Tensor | None = None
    peak_offset: torch.Tensor | None = None
    path: str = "direct"
    biases: bool = True
    toeplitz_share: torch.Tensor | None = None
    toeplitz_null: torch.Tensor | None = None
    rotation_fit: torch.Tensor | None = None
    rotation_angle: torch.Tensor | None = None
    plane_step: torch.Tensor | None = None

    @property
    def implied_offset(self) -> torch.Tensor:
        """``(n_layers, n_heads)``: ``(rotation_angle / plane_step) mod (2π/|plane_step|)``, the look-back the
        head's rotation in the table's top plane alone would give (:mod:`~pos_geometry.analysis.qk_lookback`)."""
        return torch.tensor(
            [
                [implied_offset(float(a), float(self.plane_step[i])) for a in row]
                for i, row in enumerate(self.rotation_angle)
            ],
            dtype=torch.float64,
        )

    @property
    def shape(self) -> tuple[int, int]:
        """``(n_layers, n_heads)``."""
        return tuple(self.form_share.shape)  # type: ignore[return-value]

    def summary_rows(self) -> list[tuple[str, str]]:
        n_layers, n_heads = self.shape
        r2 = self.offset_r2
        best = divmod(int(torch.argmax(r2)), n_heads)
        return [
            ("layers × heads", f"{n_layers} × {n_heads}"),
            (
                "path",
                f"{self.path} (the table through each layer's norm and W_q/W_k; misses composed position)",
            ),
            ("positions", str(self.n_positions)),
            (
                f"QK form in the table's top {self.n_components} directions",
                f"mean {self.form_share.mean():.3f} (heads {self.form_share.min():.3f} .. {self.form_share.max():.3f})",
            ),
            ("position logits from the rank-k table (R²)", f"mean {self.logit_share.mean():.3f}"),
            (
                "logit variance explained by the offset",
                f"mean {r2.mean():.3f}; most relative head L{self.layers[best[0]]} H{best[1]} ({r2.max():.3f})",
            ),
            *(
                [
                    (
                        "share of the logits: " + ", ".join(TERMS),
                        ", ".join(f"{v:.3f}" for v in self.term_share.mean(dim=(0, 1)).tolist()),
                    )
                ]
                if self.term_share is not None and self.biases
                else []
            ),
        ]


def _read(ckpt: Checkpoint, layout: TableQKLayout, key: str) -> torch.Tensor:
    key = _resolve_prefix(ckpt, layout, key)  # a headless checkpoint (the hub's gpt2) drops the prefix
    return ckpt.read([key])[key]


def _does_not_apply(ckpt: Checkpoint) -> NotApplicableError:
    from pos_geometry.analysis.rotary_atlas import _does_not_apply as why

    exc = why(ckpt.config, ckpt.model_id)
    return NotApplicableError(
        f"{exc} Nor does the learned-table QK view: model_type {ckpt.config.get('model_type')!r} has no row in "
        "pos_geometry/registry/attention.py's TABLE_QK_LAYOUTS (where its table and query/key weights live)."
    )


class _Model:
    """An opened learned-table checkpoint: its layout row, shapes and the position table."""

    def __init__(self, ckpt: Checkpoint) -> None:
        layout = table_qk_layout(ckpt.config)
        if layout is None:
            raise _does_not_apply(ckpt)
        self.ckpt, self.layout = ckpt, layout
        self.n_layers, self.n_heads, _ = head_counts(ckpt.config)
        self.table_key = _resolve_prefix(ckpt, layout, layout.position_key)
        self.table = _read(ckpt, layout, layout.position_key)
        self.n_positions, self.d_model = self.table.shape
        if self.d_model % self.n_heads:
            raise CheckpointFormatError(
                f"d_model {self.d_model} is not a multiple of the config's {self.n_heads} heads."
            )
        self.d_head = self.d_model // self.n_heads
        self.eps = float(ckpt.config.get(layout.eps_field, 1e-5))

    def scale(self, index: int) -> float:
        """The logit divisor of layer ``index``: ``√d_head`` (if ``scale_attn_weights``) × ``(index + 1)``
        (if ``scale_attn_by_inverse_layer_idx``), as GPT2Attention divides."""
        config = self.ckpt.config
        root = math.sqrt(self.d_head) if config.get("scale_attn_weights", True) else 1.0
        return root * (index + 1 if config.get("scale_attn_by_inverse_layer_idx", False) else 1)

    def bias(
        self, index: int, device: torch.device, dtype: torch.dtype
    ) -> tuple[torch.Tensor | None, str | None]:
        """``(bias, key)``: the c_attn bias ``(3·d_model,)`` of layer ``index``, or ``(None, None)`` when the
        checkpoint has none (``Conv1D`` without bias)."""
        key = self.layout.keys(index)["qkv"].removesuffix("weight") + "bias"
        try:
            spelled = _resolve_prefix(self.ckpt, self.layout, key)
        except MissingTensorError:
            return None, None
        bias = self.ckpt.read([spelled])[spelled]
        if tuple(bias.shape) != (3 * self.d_model,):
            raise CheckpointFormatError(
                f"{spelled} has shape {tuple(bias.shape)}; expected ({3 * self.d_model},)."
            )
        return bias.to(device, dtype), spelled

    def layer(
        self, index: int, device: torch.device, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor, tuple[str, ...]]:
        """``(x, w, keys)``: ``LN_index(table)`` ``(n_positions, d_model)`` and the c_attn weight
        ``(d_model, 3·d_model)`` of layer ``index`` on ``device``, and the keys read."""
        names = self.layout.keys(index)
        w = _read(self.ckpt, self.layout, names["qkv"])
        if tuple(w.shape) != (self.d_model, 3 * self.d_model):
            raise CheckpointFormatError(
                f"{names['qkv']} has shape {tuple(w.shape)}; a Conv1D c_attn of d_model {self.d_model} is "
                f"({self.d_model}, {3 * self.d_model}). The checkpoint and its config.json disagree."
            )
        gain, bias = (_read(self.ckpt, self.layout, names[r]) for r in ("norm", "norm_bias"))
        keys = tuple(_resolve_prefix(self.ckpt, self.layout, names[r]) for r in ("qkv", "norm", "norm_bias"))
        x = layer_norm_table(self.table, gain, bias, self.eps)
        return x.to(device, dtype), w.to(device, dtype), keys

    def head(self, w: torch.Tensor, h: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(A, B)``: head ``h``'s query and key columns of the c_attn weight, each ``(d_model, d_head)``
        (also: its query and key entries of the c_attn bias, each ``(d_head,)``)."""
        d, dh = self.d_model, self.d_head
        return w[..., h * dh : (h + 1) * dh], w[..., d + h * dh : d + (h + 1) * dh]


def position_logits(
    name_or_path: str | os.PathLike[str],
    layer: int,
    *,
    revision: str | None = None,
    offline: bool | None = None,
    model_id: str | None = None,
) -> torch.Tensor:
    """``(n_heads, n_positions, n_positions)`` float64: every head's position-position logits
    ``L = LN(T) A Bᵀ LN(T)ᵀ / s`` in layer ``layer`` (module docstring; biases excluded, no mask).

    For layer 0 this is the pre-softmax attention score GPT-2 computes when its input is the
    position table alone (token embeddings zero, c_attn bias zero)."""
    model = _Model(open_checkpoint(name_or_path, revision=revision, offline=offline, model_id=model_id))
    (index,) = _layers(layer, model.n_layers)
    x, w, _ = model.layer(index, torch.device("cpu"), torch.float64)
    heads = [model.head(w, h) for h in range(model.n_heads)]
    return torch.stack([(x @ a) @ (x @ b).T for a, b in heads]) / model.scale(index)


def position_qk_atlas(
    name_or_path: str | os.PathLike[str],
    *,
    layers: Sequence[int] | int | None = None,
    n_components: int = 8,
    revision: str | None = None,
    offline: bool | None = None,
    model_id: str | None = None,
    device: str | torch.device | None = "cpu",
    biases: bool = True,
) -> PositionQKAtlas:
    """How each head's query/key weights read a learned position table (GPT-2), without building the model.

    Reads the position table and, for each requested layer, the fused ``c_attn`` weight and bias and
    the ``ln_1`` gain and bias (nothing else). Definitions in the module docstring. This is the
    direct path only (``result.path == "direct"``): position composed through earlier layers is not in it.

    Args:
        name_or_path: a model-table name (``"gpt2"``), a hub repo id or a local model folder whose
            ``model_type`` has a row in ``TABLE_QK_LAYOUTS``.
        layers: layer indices (default: all).
        n_components: how many principal directions of the normed table count as "top".
        revision, offline, model_id: as in :func:`pos_geometry.load`.
        device: where the per-head products run (``"auto"``: CUDA, then MPS, else CPU); results
            come back as float64 CPU tensors (the CPU result is the reference).
        biases: include the c_attn query/key biases in the logits (``term_share`` splits them out).

    Returns:
        a :class:`PositionQKAtlas`.

    Raises:
        NotApplicableError: the model has no learned table with a known QK layout.
        InvalidArgumentError: bad ``layers``/``n_components``/``device``; CheckpointFormatError: shapes
            that disagree with the config.
    """
    where = resolve_device(device)
    dtype = torch.float32 if where.type == "mps" else torch.float64
    model = _Model(open_checkpoint(name_or_path, revision=revision, offline=offline, model_id=model_id))
    chosen = _layers(layers, model.n_layers)
    d_model = model.d_model
    if (
        isinstance(n_components, bool)
        or not isinstance(n_components, int)
        or not 1 <= n_components <= d_model
    ):
        raise InvalidArgumentError(f"n_components must be an int in [1, {d_model}]; got {n_components!r}.")
    keys = [model.table_key]
    rows: list[list[tuple]] = []
    ratios, steps = [], []
    perm = torch.randperm(model.n_positions, generator=torch.Generator().manual_seed(0)).to(where)
    for index in chosen:
        x, w, layer_keys = model.layer(index, where, dtype)
        keys += layer_keys
        bias, bias_key = model.bias(index, where, dtype) if biases else (None, None)
        keys += [bias_key] if bias_key else []
        mean = x.mean(0, keepdim=True)
        _, s, vh = torch.linalg.svd(x - mean, full_matrices=False)
        basis = vh[:n_components].T
        ratios.append((s[:n_components] ** 2 / (s**2).sum()).to("cpu", torch.float64))
        x_k = mean + (x - mean) @ basis @ basis.T
        plane = vh[:2].T
        steps.append(plane_step(x, plane))
        rows.append(
            [
                head_view(
                    x,
                    x_k,
                    basis,
                    *model.head(w, h),
                    *(model.head(bias, h) if bias is not None else (None, None)),
                    model.scale(index),
                    plane,
                    perm,
                )
                for h in range(model.n_heads)
            ]
        )
        del w, x, x_k

    def stack(i: int) -> torch.Tensor:
        return torch.tensor([[head[i] for head in layer] for layer in rows], dtype=torch.float64)

    profile = torch.stack([torch.stack([head[2] for head in layer]) for layer in rows]).to(
        "cpu", torch.float64
    )
    provenance = Provenance(
        model_id=model.ckpt.model_id,
        kind="learned",
        source=f"{model.ckpt.location}: {model.layout.model_type} position table, c_attn and ln_1 of {len(chosen)} layer(s)",
        revision=model.ckpt.revision,
        config={
            "model_type": model.layout.model_type,
            "n_positions": model.n_positions,
            "d_model": d_model,
            "num_attention_heads": model.n_heads,
            "layer_norm_epsilon": model.eps,
            "tensor_keys": tuple(keys),
        },
        original_dtype=dtype_name(model.table.dtype),
        commit=model.ckpt.commit,
        processing=(
            f"ln_1 of each layer applied to the table; top {n_components} PCA directions",
            "c_attn biases in the logits" if biases else "c_attn biases left out",
            "direct path only",
        ),
    )
    return PositionQKAtlas(
        form_share=stack(0),
        logit_share=stack(1),
        offset_profile=profile,
        offset_r2=stack(3),
        logit_std=stack(4),
        explained_variance_ratio=torch.stack(ratios),
        layers=chosen,
        n_components=n_components,
        n_positions=model.n_positions,
        provenance=provenance,
        term_share=torch.stack([torch.stack([head[5] for head in layer]) for layer in rows]).to(
            "cpu", torch.float64
        ),
        peak_offset=torch.tensor([[head[6] for head in layer] for layer in rows], dtype=torch.long),
        path="direct",
        biases=biases,
        toeplitz_share=stack(7),
        toeplitz_null=stack(8),
        rotation_fit=stack(9),
        rotation_angle=stack(10),
        plane_step=torch.tensor(steps, dtype=torch.float64),
    )
