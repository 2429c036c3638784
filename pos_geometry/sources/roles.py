"""The query and key projections of a rotary model, read by role from its checkpoint.

:func:`read_qk` looks the architecture up in the attention-layout table
(:mod:`pos_geometry.registry.attention`), reads only the tensors that play the roles
"query projection", "key projection" (and, when asked, "norm gain") of the requested layers
through :func:`~pos_geometry.sources.opening.open_checkpoint`, and splits them into heads:

* separate ``q_proj``/``k_proj`` (Llama, Mistral, Qwen2, GPT-J): rows ``h*head_dim + j``;
* fused, per head (GPT-NeoX/Pythia ``query_key_value``): rows ``(h, [q|k|v], j)``;
* fused, in blocks (Phi-3 ``qkv_proj``): ``[all q rows | all k rows | all v rows]``.

The rotation planes come from the layout's pairing convention and the rotary config
(partial rotary included: only the first ``rotary_dim`` dims of each head rotate).
Biases are not read: the atlas studies the weights' bilinear form.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from pos_geometry._dtypes import dtype_name
from pos_geometry._limits import check_config_int
from pos_geometry.encodings.rotary import (
    RotaryParams,
    as_transformers_config,
    inverse_frequencies,
    layer_type_groups,
    rotary_params,
)
from pos_geometry.errors import (
    CheckpointFormatError,
    InvalidArgumentError,
    MissingTensorError,
    NonFiniteError,
)
from pos_geometry.registry.architecture import attention_of
from pos_geometry.registry.attention import AttentionLayout
from pos_geometry.registry.derived_layout import DerivedLayout, RotationGroup
from pos_geometry.sources.opening import open_checkpoint
from pos_geometry.sources.tensor_set import Checkpoint

__all__ = ["QKReader", "QKWeights", "open_qk", "read_qk", "rotation_planes", "head_counts"]


def _int_field(config: Mapping[str, Any], keys: tuple[str, ...], default: int | None = None) -> int:
    for key in keys:
        value = config.get(key)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgumentError(f"config {key} must be a positive int; got {value!r}.")
            return check_config_int(key, value)
    if default is None:
        raise InvalidArgumentError(f"config has none of {keys}; the attention shape cannot be read from it.")
    return default


def head_counts(config: Mapping[str, Any]) -> tuple[int, int, int]:
    """``(n_layers, n_heads, n_kv_heads)`` from a config.json dict (``n_kv_heads`` defaults to ``n_heads``)."""
    n_layers = _int_field(config, ("num_hidden_layers", "n_layer", "num_layers"))
    n_heads = _int_field(config, ("num_attention_heads", "n_head"))
    n_kv = _int_field(config, ("num_key_value_heads",), n_heads)
    if n_heads % n_kv:
        raise InvalidArgumentError(
            f"num_attention_heads ({n_heads}) must be a multiple of num_key_value_heads ({n_kv}); fix the config."
        )
    return n_layers, n_heads, n_kv


def rotation_planes(pairing: str, rotary_dim: int) -> torch.Tensor:
    """``(rotary_dim//2, 2)`` long: the two head dimensions rotation plane ``i`` turns, at angle ``p·θ_i``.

    ``"rotate_half"``: ``(i, i + rotary_dim/2)``; ``"interleaved"``: ``(2i, 2i+1)``.
    """
    half = torch.arange(rotary_dim // 2)
    if pairing == "rotate_half":
        return torch.stack([half, half + rotary_dim // 2], dim=1)
    if pairing == "interleaved":
        return torch.stack([2 * half, 2 * half + 1], dim=1)
    raise InvalidArgumentError(f"pairing must be 'rotate_half' or 'interleaved'; got {pairing!r}.")


@dataclass(frozen=True, eq=False)
class QKWeights:
    """Per-head query and key projection weights of some layers of a rotary model.

    Attributes:
        q: ``(n_layers, n_heads, head_dim, d_model)`` float32: row ``j`` of head ``h`` is the weight
            vector of query dimension ``j`` (``q_h = q[l, h] @ x``).
        k: ``(n_layers, n_kv_heads, head_dim, d_model)`` float32; query head ``h`` reads key head
            ``h // (n_heads // n_kv_heads)`` (grouped-query attention).
        norm: ``(n_layers, d_model)`` float32 gain of the norm feeding attention (offset applied),
            or None when not read.
        layers: the layer indices, in order.
        planes: ``(n_planes, 2)`` long: the head dimensions of each rotation plane.
        rotary: the rotary parameters (frequencies, context length, rope type).
        layout: the attention-layout row used.
        keys: every checkpoint key read.
        stored_dtype: the dtype the projections are stored in.
        checkpoint: where they came from (config, model id, revision, commit, location).
    """

    q: torch.Tensor
    k: torch.Tensor
    norm: torch.Tensor | None
    layers: tuple[int, ...]
    planes: torch.Tensor
    rotary: RotaryParams
    layout: AttentionLayout
    keys: tuple[str, ...]
    stored_dtype: str
    checkpoint: Checkpoint

    @property
    def n_heads(self) -> int:
        return self.q.shape[1]

    @property
    def n_kv_heads(self) -> int:
        return self.k.shape[1]

    def kv_head(self, head: int) -> int:
        """The key head that query head ``head`` attends with."""
        return head // (self.n_heads // self.n_kv_heads)


def _split(
    layout: AttentionLayout, tensor: torch.Tensor, which: str, n_heads: int, n_kv: int, head_dim: int
) -> torch.Tensor:
    """``which`` (``"q"``: ``(n_heads, head_dim, d)``, ``"k"``: ``(n_kv, head_dim, d)``) from the tensor
    read for it: its own projection, or the fused qkv projection (a view, no copy)."""
    heads = n_heads if which == "q" else n_kv
    if layout.qkv_key is None:
        gated = 2 if which == "q" and layout.q_gate else 1
        if tensor.ndim != 2 or tensor.shape[0] != gated * heads * head_dim:
            raise CheckpointFormatError(
                f"the {which} projection has shape {tuple(tensor.shape)}; the config implies "
                f"({gated * heads * head_dim}, d_model). The checkpoint and its config.json disagree."
            )
        if gated == 2:  # [query | gate] per head: the query half
            return tensor.reshape(heads, 2, head_dim, -1)[:, 0]
        return tensor.reshape(heads, head_dim, -1)
    rows = (n_heads + 2 * n_kv) * head_dim
    if tensor.ndim != 2 or tensor.shape[0] != rows:
        raise CheckpointFormatError(
            f"the fused qkv projection has shape {tuple(tensor.shape)}; the config implies ({rows}, d_model)."
        )
    if layout.fused == "per_head":  # GPT-NeoX: view(heads, 3 * head_size), chunk(3)
        if n_kv != n_heads:
            raise CheckpointFormatError("a per-head fused qkv layout has as many key heads as query heads.")
        return tensor.reshape(n_heads, 3, head_dim, -1)[:, 0 if which == "q" else 1]
    q_rows = n_heads * head_dim  # Phi-3: [all q | all k | all v]
    if which == "q":
        return tensor[:q_rows].reshape(n_heads, head_dim, -1)
    return tensor[q_rows : q_rows + n_kv * head_dim].reshape(n_kv, head_dim, -1)


def _check_shape(
    layout: AttentionLayout,
    shape: tuple[int, ...],
    which: str,
    n_heads: int,
    n_kv: int,
    head_dim: int,
    d_model: int | None = None,
) -> None:
    """The stored shape of the tensor holding ``which`` must be what the config implies: its rows from the head
    counts and head size, its columns ``d_model`` (when the config gives it)."""
    if layout.qkv_key is None:
        rows = (n_heads if which == "q" else n_kv) * head_dim * (2 if which == "q" and layout.q_gate else 1)
        what = f"the {which} projection"
    else:
        rows = (n_heads + 2 * n_kv) * head_dim
        what = "the fused qkv projection"
        if layout.fused == "per_head" and n_kv != n_heads:
            raise CheckpointFormatError("a per-head fused qkv layout has as many key heads as query heads.")
    if len(shape) != 2 or shape[0] != rows or (d_model is not None and shape[1] != d_model):
        cols = "d_model" if d_model is None else str(d_model)
        raise CheckpointFormatError(
            f"{what} has shape {tuple(shape)}; the config implies ({rows}, {cols}). The checkpoint and its "
            "config.json disagree."
        )


def _head_start(layout: AttentionLayout, which: str, head: int, n_heads: int, head_dim: int) -> int:
    """The first row of ``head`` of ``which`` in the tensor read for it (the layouts of :func:`_split`)."""
    if layout.qkv_key is None:
        return head * head_dim * (2 if which == "q" and layout.q_gate else 1)
    if layout.fused == "per_head":  # rows (h, [q|k|v], j)
        return (3 * head + (0 if which == "q" else 1)) * head_dim
    return (head if which == "q" else n_heads + head) * head_dim  # [all q | all k | all v]


def _rotary(config: Mapping[str, Any], derived: DerivedLayout | None) -> RotaryParams:
    """The rotary parameters of ``config`` (of its first rotating layer type when types differ); for a
    derived layout whose config pos_geometry cannot read, the sizes transformers reported."""
    groups = layer_type_groups(config)
    label = None
    if groups is not None:
        label = derived.groups[0].label if derived is not None else next(iter(groups))
    try:
        return rotary_params(config, layer_type=label)
    except InvalidArgumentError:
        if derived is None:
            raise
    max_positions = config.get("max_position_embeddings") or config.get("n_positions") or 0
    return RotaryParams(math.nan, derived.rotary_dim, derived.head_dim, int(max_positions))


def _layers(layers: Sequence[int] | int | None, n_layers: int) -> tuple[int, ...]:
    if layers is None:
        return tuple(range(n_layers))
    chosen = (layers,) if isinstance(layers, int) else tuple(layers)
    bad = [
        i for i in chosen if isinstance(i, bool) or not isinstance(i, int) or not -n_layers <= i < n_layers
    ]
    if bad or not chosen:
        raise InvalidArgumentError(
            f"layers must be layer indices in [0, {n_layers}) (negatives count from the end) or None for all; "
            f"got {layers!r}."
        )
    return tuple(i % n_layers for i in chosen)


def _resolve_prefix(ckpt: Checkpoint, layout: AttentionLayout, key: str) -> str:
    """``key`` as the checkpoint spells it: a headless checkpoint drops the layout's prefix."""
    if not layout.prefix or ckpt.has(key):
        return key
    bare = key.removeprefix(layout.prefix)
    if ckpt.has(bare):
        return bare
    available = ckpt.keys()
    raise MissingTensorError(
        f"{ckpt.location} has neither {key!r} nor {bare!r}; the {layout.model_type} layout expects them. "
        f"It has {len(available)} keys, e.g. {', '.join(sorted(available)[:8])}.",
        keys=tuple(sorted(available)),
    )


class QKReader:
    """One opened rotary checkpoint, read layer by layer (so memory holds one layer at a time).

    Attributes:
        checkpoint: the opened checkpoint (config, model id, commit, location).
        layout: the attention-layout row of its ``model_type``.
        rotary: its rotary parameters.
        n_layers, n_heads, n_kv_heads: from the config.
        planes: ``(n_planes, 2)`` long, the head dimensions of each rotation plane.
    """

    def __init__(self, checkpoint: Checkpoint) -> None:
        self.checkpoint = checkpoint
        config = as_transformers_config(checkpoint.config)
        self.config = config
        # the layout table's row, else transformers' own description (registry.architecture)
        self.layout, self.derived = attention_of(config)
        if self.layout.latent is not None:  # MLA: one rotary key, shared by every head
            config = {**config, "head_dim": self.layout.latent.rope}
        self.rotary: RotaryParams = _rotary(config, self.derived)
        self.n_layers, self.n_heads, self.n_kv_heads = head_counts(config)
        if self.layout.latent is not None:
            self.n_kv_heads = 1
        self.planes = rotation_planes(self.layout.pairing, self.rotary.rotary_dim)
        hidden = next(
            (config.get(k) for k in ("hidden_size", "n_embd", "d_model") if config.get(k) is not None), None
        )
        self.d_model: int | None = (
            hidden if isinstance(hidden, int) and not isinstance(hidden, bool) else None
        )
        self._drop_prefix: bool | None = None
        self._fused: tuple[str, torch.Tensor] | None = None
        self._checked: set[str] = set()

    def rotation_groups(self) -> tuple[RotationGroup, ...]:
        """The groups of layers that rotate with the same frequencies (one group, ``"all"``, for a table row)."""
        if self.derived is not None:
            return self.derived.groups
        theta = tuple(inverse_frequencies(self.rotary).tolist())
        return (RotationGroup("all", tuple(range(self.n_layers)), theta, self.rotary.attention_factor),)

    @property
    def unrotated(self) -> tuple[int, ...]:
        """Layers whose attention does not rotate at all (Llama-4's and SmolLM3's NoPE layers)."""
        return self.derived.unrotated if self.derived is not None else ()

    def layers(self, layers: Sequence[int] | int | None) -> tuple[int, ...]:
        """Validated layer indices (None: all; negatives count from the end)."""
        return _layers(layers, self.n_layers)

    def _spelled(self, key: str) -> str:
        if self._drop_prefix is None:
            self._drop_prefix = _resolve_prefix(self.checkpoint, self.layout, key) != key
        return key.removeprefix(self.layout.prefix) if self._drop_prefix else key

    def _key(self, index: int, role: str) -> str:
        return self._spelled(self.layout.keys(index, norm=True)[role])

    def spelled(self, key: str) -> str:
        """A key as the layout names it (:meth:`head_ranges`), as this checkpoint spells it (a headless
        checkpoint drops the layout's prefix; finding out may read the key list once)."""
        return self._spelled(key)

    def projection(self, index: int, which: str) -> tuple[torch.Tensor, str]:
        """``(weights, key)``: the ``which`` (``"q"`` or ``"k"``) projection of layer ``index`` as stored,
        ``(heads, head_dim, d_model)``. A fused qkv tensor is read once for q then k (in that order)."""
        if self.layout.qkv_key is None:
            key = self._key(index, which)
            tensor = self.checkpoint.read([key])[key]
        else:
            key = self._key(index, "qkv")
            if self._fused is None or self._fused[0] != key:
                self._fused = (key, self.checkpoint.read([key])[key])
            tensor = self._fused[1]
            if which == "k":  # read q first, then k: the fused tensor is not kept beyond that
                self._fused = None
        return _split(self.layout, tensor, which, self.n_heads, self.n_kv_heads, self.rotary.head_dim), key

    def key(self, index: int, which: str) -> str:
        """The checkpoint key holding the ``which`` (``"q"``/``"k"``) projection of layer ``index``."""
        return self._key(index, "qkv" if self.layout.qkv_key is not None else which)

    def check(self, index: int, which: str) -> str:
        """Check the stored shape of the tensor holding ``which`` (``"q"``/``"k"``) of layer ``index``
        against the config (once per tensor; only its header is read); returns its key.

        Raises:
            CheckpointFormatError: the checkpoint and its config.json disagree.
        """
        key = self.key(index, which)
        if key not in self._checked:
            _check_shape(
                self.layout,
                self.checkpoint.shape(key),
                which,
                self.n_heads,
                self.n_kv_heads,
                self.rotary.head_dim,
                self.d_model,
            )
            self._checked.add(key)
        return key

    def head_starts(self, which: str) -> list[int]:
        """The first row of each ``which`` (``"q"``/``"k"``) head in the tensor holding it; its bias vector
        has the same rows."""
        n = self.n_heads if which == "q" else self.n_kv_heads
        return [_head_start(self.layout, which, h, self.n_heads, self.rotary.head_dim) for h in range(n)]

    def head_ranges(
        self, index: int
    ) -> list[tuple[str, tuple[tuple[str, int], ...], tuple[tuple[int, int], ...]]]:
        """Where layer ``index``'s rotating q/k rows are stored, as ``[(key, heads, ranges)]`` per tensor:
        ``ranges[i]`` is the row range ``[start, start + rotary_dim)`` of ``heads[i] = (which, head)``
        (``head`` counts key heads for ``"k"``), in increasing order, as
        :meth:`~pos_geometry.sources.tensor_set.Checkpoint.visit_rows` takes them. A fused qkv tensor
        is one entry holding both; its value rows lie between or after the ranges. ``key`` is as the
        layout names it (:meth:`spelled` gives the checkpoint's spelling). Nothing is read."""
        names = self.layout.keys(index, norm=True)
        found: dict[str, list[tuple[int, str, int]]] = {}
        for which, n in (("q", self.n_heads), ("k", self.n_kv_heads)):
            key = names["qkv" if self.layout.qkv_key is not None else which]
            for head in range(n):
                start = _head_start(self.layout, which, head, self.n_heads, self.rotary.head_dim)
                found.setdefault(key, []).append((start, which, head))
        plans = []
        for key, rows in found.items():
            rows.sort()
            heads = tuple((which, head) for _, which, head in rows)
            ranges = tuple((start, start + self.rotary.rotary_dim) for start, _, _ in rows)
            plans.append((key, heads, ranges))
        return plans

    def norm_key(self, index: int) -> str:
        """The checkpoint key of the gain of the norm feeding attention in layer ``index``.

        Raises:
            InvalidArgumentError: the layout names no such norm (its gain cannot be folded).
        """
        if self.layout.norm_key is None:
            raise InvalidArgumentError(
                f"the {self.layout.model_type} layout names no norm before attention, so its gain cannot be folded."
            )
        return self._key(index, "norm")

    def gain(self, index: int) -> tuple[torch.Tensor, str]:
        """``(gain, key)``: the norm gain feeding attention in layer ``index``, float32, offset applied."""
        key = self.norm_key(index)
        gain = self.checkpoint.read([key])[key].float()
        if gain.ndim != 1 or (self.d_model is not None and gain.shape[0] != self.d_model):
            raise CheckpointFormatError(
                f"the norm gain {key!r} has shape {tuple(gain.shape)}; the config implies ({self.d_model},). The "
                "checkpoint and its config.json disagree."
            )
        if not bool(torch.isfinite(gain).all()):
            raise NonFiniteError(
                f"the norm gain {key!r} (layer {index}) holds {int((~torch.isfinite(gain)).sum())} NaN or infinite "
                "value(s); the atlas of such weights would be NaN. Check or re-export the checkpoint."
            )
        return gain + self.layout.norm_offset, key

    def qk_norm_gain(self, index: int, which: str) -> tuple[torch.Tensor, str]:
        """``(gain, key)``: the gain of layer ``index``'s ``which`` (``"q"``/``"k"``) norm applied after the
        projection, as ``(heads, rotary_dim)`` float32 (offset applied): one gain per rotating row of each
        head (a per-head norm's ``(head_dim,)`` gain is shared by every head; OLMo-2's covers all heads).

        Raises:
            InvalidArgumentError: the layout names no q/k norms.
            CheckpointFormatError: the gain's length fits neither ``head_dim`` nor all heads.
        """
        if self.layout.q_norm_key is None:
            raise InvalidArgumentError(f"the {self.layout.model_type} layout names no query/key norms.")
        key = self._key(index, f"{which}_norm")
        gain = self.checkpoint.read([key])[key].float().reshape(-1) + self.layout.qk_norm_offset
        if not bool(torch.isfinite(gain).all()):
            raise NonFiniteError(
                f"the {which} norm gain {key!r} (layer {index}) holds NaN or infinite values."
            )
        heads, head_dim = (self.n_heads if which == "q" else self.n_kv_heads), self.rotary.head_dim
        if gain.numel() == head_dim:
            gain = gain.expand(heads, head_dim)
        elif gain.numel() == heads * head_dim:
            gain = gain.reshape(heads, head_dim)
        else:
            raise CheckpointFormatError(
                f"{key!r} has {gain.numel()} values; a {which} norm gain has head_dim ({head_dim}) or heads x head_dim "
                f"({heads * head_dim}). The checkpoint and its config.json disagree."
            )
        return gain[:, : self.rotary.rotary_dim].contiguous(), key

    def layer(
        self, index: int, *, norm: bool = False, dtype: torch.dtype | None = torch.float32
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, tuple[str, ...], str]:
        """``(q, k, gain, keys, stored dtype)`` of layer ``index``: q ``(n_heads, head_dim, d_model)`` and
        k ``(n_kv_heads, head_dim, d_model)`` in ``dtype`` (None: as stored, views of the tensors read),
        gain ``(d_model,)`` float32 (offset applied) or None."""
        q, q_key = self.projection(index, "q")
        k, k_key = self.projection(index, "k")
        keys = tuple(dict.fromkeys((q_key, k_key)))
        gain = None
        if norm:
            gain, norm_key = self.gain(index)
            keys += (norm_key,)
        stored = dtype_name(q.dtype)
        if dtype is not None:
            q, k = q.to(dtype), k.to(dtype)
        return q, k, gain, keys, stored


def open_qk(
    name_or_path: str | os.PathLike[str],
    *,
    revision: str | None = None,
    offline: bool | None = None,
    model_id: str | None = None,
) -> QKReader:
    """A :class:`QKReader` on a local model folder, a model-table name or a hub repo id (one pinned commit)."""
    return QKReader(open_checkpoint(name_or_path, revision=revision, offline=offline, model_id=model_id))


def read_qk(
    name_or_path: str | os.PathLike[str],
    *,
    layers: Sequence[int] | int | None = None,
    revision: str | None = None,
    norm: bool = False,
    offline: bool | None = None,
    model_id: str | None = None,
) -> QKWeights:
    """Read the per-head query/key projections (and optionally the norm gains) of a rotary model.

    Only the tensors of the requested ``layers`` are read (one commit for all of them when
    ``name_or_path`` is a hub repo). The architecture is taken from ``config.json``'s
    ``model_type`` and must have a row in the attention-layout table.

    Raises:
        InvalidArgumentError: unknown architecture, bad ``layers``, inconsistent config.
        MissingTensorError, CheckpointFormatError, NotCachedError: see :mod:`pos_geometry.sources.tensor_set`.
    """
    reader = open_qk(name_or_path, revision=revision, offline=offline, model_id=model_id)
    chosen = reader.layers(layers)
    qs, ks, gains, keys = [], [], [], []
    stored = ""
    for index in chosen:
        q, k, gain, layer_keys, stored = reader.layer(index, norm=norm)
        qs.append(q)
        ks.append(k)
        keys += layer_keys
        if gain is not None:
            gains.append(gain)
    return QKWeights(
        q=torch.stack(qs),
        k=torch.stack(ks),
        norm=torch.stack(gains) if gains else None,
        layers=chosen,
        planes=reader.planes,
        rotary=reader.rotary,
        layout=reader.layout,
        keys=tuple(keys),
        stored_dtype=stored,
        checkpoint=reader.checkpoint,
    )
