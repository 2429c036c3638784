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

**Two paths** (``path``). ``"direct"``: ``X = LN_l(T)``, the table read straight through each layer's
norm and W_q/W_k. For layer 0 and a position-only input (token embeddings zero), ``L`` is exactly the
logit matrix GPT-2 computes; for later layers it is the table as the layer's norm would read it were
it alone in the residual stream. Position also reaches later layers composed through earlier ones
(a previous-token head built from layer-0 outputs, say), which the direct path cannot see: on GPT-2's
real weights ``form_share`` is at most 0.001 from layer 3 on, and a known previous-token head (L4H11)
has ``offset_r2`` 0.21 there. ``"hidden"``: ``X = LN_l(pos_l)``, with ``pos_l`` ``(seq_len, d_model)``
the positional part of the residual stream entering block ``l``, measured by
:func:`~pos_geometry.hidden_positions` on a corpus (Song & Zhong's ``h[c, t] = μ + pos[t] + ctx[c] +
resid``): position as the layer receives it, composed through every earlier layer, read alone through
the same norm and weights. It needs the whole model run once; the direct path needs only the weights.

**The null** (``permute_key_rows=True``): every statistic below computed for heads whose ``W_k`` has
its ``d_model`` rows permuted (one permutation per layer, drawn from ``random_state``): the key still
reads a smooth curve of the same spectrum, but not the one the query was trained against. A smooth
table gives smooth logits whatever the weights, so a head's Toeplitz share or rotation means
something only above this null's. Per head:

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

The look-back measures (``toeplitz_share``, ``rotation_fit``, ``rotation_angle``, ``plane_step``,
``implied_offset``) are defined in :mod:`~pos_geometry.atlas.lookback`.

Models with neither rotary embeddings nor a row in
:data:`~pos_geometry.registry.attention.TABLE_QK_LAYOUTS` get :class:`NotApplicableError`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from pos_geometry._device import Device, resolve_device
from pos_geometry._threads import cpu_workers, parallel_map
from pos_geometry.analysis._pca_solvers import exact_pca
from pos_geometry.analysis._results import Result
from pos_geometry.atlas.lookback import implied_offset, plane_step
from pos_geometry.atlas.qk_head_view import head_view, layer_norm_table, offset_means
from pos_geometry.atlas.qk_table_model import TableQKModel, atlas_provenance, hidden_rows
from pos_geometry.embedding import Provenance
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.sources.network import needs_weights
from pos_geometry.sources.opening import open_checkpoint
from pos_geometry.sources.roles import _layers

if TYPE_CHECKING:
    from pos_geometry.hidden.decomposition import HiddenPositions

__all__ = [
    "PositionQKAtlas",
    "position_qk_atlas",
    "position_logits",
    "layer_norm_table",
    "offset_means",
    "TERMS",
]

_NEEDS = "position_qk_atlas reads every layer's attention (query/key) weights, not only the positional table, and they are not on this machine."

TERMS: tuple[str, ...] = ("position", "query_bias", "key_bias", "constant")
"""The terms of the position logits, in the order of ``term_share`` (module docstring)."""


@dataclass(frozen=True, eq=False, repr=False)
class PositionQKAtlas(Result):
    """Per layer × head view of how a learned-table model's QK circuit reads position.

    Attributes:
        form_share: ``(n_layers, n_heads)`` share of ``‖W_q W_kᵀ‖²`` in the normed rows' top PCA directions.
        logit_share: ``(n_layers, n_heads)`` R² of the position logits from the rank-k rows.
        offset_profile: ``(n_layers, n_heads, n_positions)`` mean causal logit at each offset Δ.
        offset_r2: ``(n_layers, n_heads)`` share of the causal logits' variance explained by the offset.
        logit_std: ``(n_layers, n_heads)`` standard deviation of the causal position logits.
        explained_variance_ratio: ``(n_layers, n_components)`` of the normed rows' PCA.
        term_share: ``(n_layers, n_heads, 4)`` each term's share of the positional logits, in the order
            of :data:`TERMS` (all zeros but the position term with ``biases=False``).
        peak_offset: ``(n_layers, n_heads)`` long: the offset where the logit profile peaks.
        path: ``"direct"`` (the table through each layer's norm and W_q/W_k) or ``"hidden"`` (each
            layer's input positional part, composed through the earlier layers); module docstring.
        biases: whether the c_attn biases are in the logits.
        permuted_key_rows: True for the null: every layer's ``W_k`` rows permuted.
        toeplitz_share: ``(n_layers, n_heads)`` share of the position term's variance (all pairs)
            that the offset explains.
        rotation_fit, rotation_angle: ``(n_layers, n_heads)`` how much of the form on the rows' top
            principal plane is a scaled rotation, and its angle (radians).
        plane_step: ``(n_layers,)`` radians per position the normed rows turn in that plane.
        layers: the layer indices, in order.
        n_components: the PCA directions counted as "top".
        n_positions: rows used (the table's, or the corpus's ``seq_len`` on the hidden path).
        provenance: model, revision, commit, tensor keys (and the corpus, on the hidden path).
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
    permuted_key_rows: bool = False
    toeplitz_share: torch.Tensor | None = None
    rotation_fit: torch.Tensor | None = None
    rotation_angle: torch.Tensor | None = None
    plane_step: torch.Tensor | None = None

    @property
    def implied_offset(self) -> torch.Tensor:
        """``(n_layers, n_heads)``: ``(rotation_angle / plane_step) mod (2π/|plane_step|)``, the look-back the
        head's rotation in the rows' top plane alone would give (:mod:`~pos_geometry.atlas.lookback`)."""
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
        best = divmod(int(torch.nan_to_num(r2, nan=-1.0).argmax()), n_heads)
        path = PATHS.get(self.path, self.path)
        rows = [
            ("layers × heads", f"{n_layers} × {n_heads}"),
            ("path", f"{self.path} ({path})"),
            ("positions", str(self.n_positions)),
            (
                f"QK form in the rows' top {self.n_components} directions",
                f"mean {self.form_share.mean():.3f} (heads {self.form_share.min():.3f} .. {self.form_share.max():.3f})",
            ),
            ("position logits from the rank-k rows (R²)", f"mean {self.logit_share.mean():.3f}"),
            (
                "logit variance explained by the offset",
                f"mean {r2.nanmean():.3f}; most relative head L{self.layers[best[0]]} H{best[1]} ({r2.nan_to_num(-1).max():.3f})",
            ),
        ]
        if self.term_share is not None and self.biases:
            shares = ", ".join(f"{v:.3f}" for v in self.term_share.nanmean(dim=(0, 1)).tolist())
            rows.append(("share of the logits: " + ", ".join(TERMS), shares))
        if self.toeplitz_share is not None:
            rows.append(("position term that is a function of the offset (Toeplitz share)",
                         f"mean {self.toeplitz_share.nanmean():.3f}"))  # fmt: skip
        if self.permuted_key_rows:
            rows.append(("null", "every layer's W_k rows permuted: not the trained heads"))
        return rows


PATHS = {
    "direct": "the table through each layer's norm and W_q/W_k; misses composed position",
    "hidden": "each layer's input positional part (hidden_positions), composed through earlier layers",
}
"""The values of ``path`` and what each reads (module docstring)."""


@needs_weights(_NEEDS)
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
    model = TableQKModel(open_checkpoint(name_or_path, revision=revision, offline=offline, model_id=model_id))
    (index,) = _layers(layer, model.n_layers)
    x, w, _ = model.layer(index, torch.device("cpu"), torch.float64)
    heads = [model.head(w, h) for h in range(model.n_heads)]
    return torch.stack([(x @ a) @ (x @ b).T for a, b in heads]) / model.scale(index)


def _check(
    n_components: int, d_model: int, path: str, hidden: HiddenPositions | None, random_state: int
) -> None:
    if (
        isinstance(n_components, bool)
        or not isinstance(n_components, int)
        or not 1 <= n_components <= d_model
    ):
        raise InvalidArgumentError(f"n_components must be an int in [1, {d_model}]; got {n_components!r}.")
    if path not in PATHS:
        raise InvalidArgumentError(f"path must be one of {', '.join(map(repr, PATHS))}; got {path!r}.")
    if path == "hidden" and hidden is None:
        raise InvalidArgumentError(
            "path='hidden' reads each layer's positional part from a hidden_positions result; got hidden=None. "
            "Fix: hidden=pg.hidden_positions(model, tokens) (the same model), then pass it here."
        )
    if path == "direct" and hidden is not None:
        raise InvalidArgumentError(
            "hidden= is read only with path='hidden'; got path='direct'. Pass path='hidden'."
        )
    if isinstance(random_state, bool) or not isinstance(random_state, int) or random_state < 0:
        raise InvalidArgumentError(f"random_state must be an int >= 0; got {random_state!r}.")


@needs_weights(_NEEDS)
def position_qk_atlas(
    name_or_path: str | os.PathLike[str],
    *,
    layers: Sequence[int] | int | None = None,
    n_components: int = 8,
    revision: str | None = None,
    offline: bool | None = None,
    model_id: str | None = None,
    device: Device = "auto",
    biases: bool = True,
    path: str = "direct",
    hidden: HiddenPositions | None = None,
    permute_key_rows: bool = False,
    random_state: int = 0,
) -> PositionQKAtlas:
    """How each head's query/key weights read position in a learned-table model (GPT-2).

    Reads, for each requested layer, the fused ``c_attn`` weight and bias and the ``ln_1`` gain and
    bias, and the position table (nothing else; the model is never built). Definitions in the
    module docstring.

    Args:
        name_or_path: a model-table name (``"gpt2"``), a hub repo id or a local model folder whose
            ``model_type`` has a row in ``TABLE_QK_LAYOUTS``.
        layers: layer indices (default: all; on the hidden path, the blocks ``hidden`` has an input for).
        n_components: how many principal directions of the normed rows count as "top".
        revision, offline, model_id: as in :func:`pos_geometry.load`.
        device: where the per-head products run (``"auto"``: CUDA, then MPS, else CPU); results
            come back as float64 CPU tensors (the CPU result is the reference).
        biases: include the c_attn query/key biases in the logits (``term_share`` splits them out).
        path: ``"direct"`` (the position table) or ``"hidden"`` (each layer's input positional part,
            from ``hidden``): what the direct path cannot see, the hidden one can.
        hidden: the :func:`~pos_geometry.hidden_positions` result of the same model, for ``path="hidden"``.
        permute_key_rows: compute the null instead: every layer's ``W_k`` with its rows permuted.
        random_state: seed of those permutations.

    Returns:
        a :class:`PositionQKAtlas`.

    Raises:
        NotApplicableError: the model has no learned table with a known QK layout.
        InvalidArgumentError: bad ``layers``/``n_components``/``device``/``path``, or a ``hidden`` of
            another model; CheckpointFormatError: shapes that disagree with the config.
    """
    where = resolve_device(device)
    dtype = torch.float32 if where.type == "mps" else torch.float64
    model = TableQKModel(open_checkpoint(name_or_path, revision=revision, offline=offline, model_id=model_id))
    _check(n_components, model.d_model, path, hidden, random_state)
    if path == "hidden" and layers is None:
        layers = [layer for layer in hidden.layers if layer < model.n_layers]  # type: ignore[union-attr]
    chosen = _layers(layers, model.n_layers)
    inputs = hidden_rows(model, hidden, chosen) if path == "hidden" else {}
    keys = [model.table_key] if path == "direct" else []
    generator = torch.Generator().manual_seed(random_state)
    rows: list[list[tuple]] = []
    ratios, steps = [], []
    for index in chosen:
        x, w, layer_keys = model.layer(index, where, dtype, rows=inputs.get(index))
        keys += layer_keys
        if permute_key_rows:
            d = model.d_model
            w = torch.cat([w[:, :d], w[torch.randperm(d, generator=generator).to(where), d : 2 * d]], dim=1)
        bias, bias_key = model.bias(index, where, dtype) if biases else (None, None)
        keys += [bias_key] if bias_key else []
        mean = x.mean(0, keepdim=True)
        # the top principal axes, scikit-learn's signs (an eigendecomposition of the d × d Gram matrix where
        # n ≥ d: several times faster than the table's full SVD, which reproduce ran 28 times)
        k = min(n_components, *x.shape)
        s, axes, coords = exact_pca(x, mean[0], max(k, 2))
        basis, coords = axes[:k].T, coords[:, :k]
        ratios.append((s[:k] ** 2 / (x - mean).square().sum()).to("cpu", torch.float64))
        plane = axes[:2].T
        steps.append(plane_step(x, plane))
        heads = range(model.n_heads)
        biased = [model.head(bias, h) if bias is not None else (None, None) for h in heads]
        scale = model.scale(index)
        args = [(x, mean, coords, basis, *model.head(w, h), *biased[h], scale, plane) for h in heads]
        rows.append(parallel_map(lambda a: head_view(*a), args, cpu_workers(where)))  # heads side by side
        del w, x, coords

    def stack(i: int) -> torch.Tensor:
        return torch.tensor([[head[i] for head in layer] for layer in rows], dtype=torch.float64)

    def stack_tensors(i: int) -> torch.Tensor:
        return torch.stack([torch.stack([head[i] for head in layer]) for layer in rows]).to(
            "cpu", torch.float64
        )

    provenance = atlas_provenance(
        model, chosen, keys, n_components, biases, path, hidden, permute_key_rows, random_state
    )
    return PositionQKAtlas(
        form_share=stack(0),
        logit_share=stack(1),
        offset_profile=stack_tensors(2),
        offset_r2=stack(3),
        logit_std=stack(4),
        explained_variance_ratio=torch.nn.utils.rnn.pad_sequence(ratios, batch_first=True),
        layers=chosen,
        n_components=n_components,
        n_positions=int(next(iter(inputs.values())).shape[0]) if inputs else model.n_positions,
        provenance=provenance,
        term_share=stack_tensors(5),
        peak_offset=torch.tensor([[head[6] for head in layer] for layer in rows], dtype=torch.long),
        path=path,
        biases=biases,
        permuted_key_rows=permute_key_rows,
        toeplitz_share=stack(7),
        rotation_fit=stack(8),
        rotation_angle=stack(9),
        plane_step=torch.tensor(steps, dtype=torch.float64),
    )
