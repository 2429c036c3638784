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
from typing import Any

import torch

from pos_geometry._dtypes import dtype_name
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
from pos_geometry.sources.qk_heads import (
    QKWeights,
    check_shape,
    head_counts,
    head_start,
    rotation_planes,
    split_heads,
)
from pos_geometry.sources.tensor_set import Checkpoint

__all__ = ["QKReader", "QKWeights", "open_qk", "read_qk", "rotation_planes", "head_counts"]


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
        layout: its attention layout (transformers' description, :func:`~pos_geometry.registry.architecture.attention_of`).
        rotary: its rotary parameters.
        n_layers, n_heads, n_kv_heads: from the config.
        planes: ``(n_planes, 2)`` long, the head dimensions of each rotation plane.
    """

    def __init__(self, checkpoint: Checkpoint) -> None:
        self.checkpoint = checkpoint
        config = as_transformers_config(checkpoint.config)
        self.config = config
        # transformers' own description (the layout table's row only where it has none: registry.architecture)
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
        return split_heads(
            self.layout, tensor, which, self.n_heads, self.n_kv_heads, self.rotary.head_dim
        ), key

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
            check_shape(
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
        return [head_start(self.layout, which, h, self.n_heads, self.rotary.head_dim) for h in range(n)]

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
                start = head_start(self.layout, which, head, self.n_heads, self.rotary.head_dim)
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
