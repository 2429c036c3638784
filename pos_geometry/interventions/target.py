"""Where a positional edit lands in a running transformers model, and how it is undone.

:class:`EditTarget` finds, in a loaded causal LM, what position flows through:

* the learned position table: the ``nn.Embedding`` named in :data:`POSITION_MODULES` (a new
  architecture is a new name there), e.g. GPT-2's ``transformer.wpe``;
* the rotary frequencies: every ``inv_freq`` buffer of transformers' ``*RotaryEmbedding`` modules,
  and the per-layer-type buffers one module keeps for several types (Gemma-3's
  ``sliding_attention_inv_freq`` and ``full_attention_inv_freq``), each a :class:`RotarySlot`
  labelled with its layer type; the model reads them on every forward pass. An edit of some layers
  only (``layers=``) recomputes those layers' cos/sin with the module's own forward and hands them
  to those decoder blocks (a pre-hook on each), leaving the others as they are;
* the query/key projections, by the model's attention layout
  (:func:`~pos_geometry.registry.architecture.attention_of`: separate ``q_proj``/``k_proj`` or fused),
  for the pairing control.

Every change goes through a method that records how to undo it; :meth:`EditTarget.editing` undoes
them all on exit, whatever happens, so the model is bit-identical afterwards.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from pos_geometry.errors import NotApplicableError
from pos_geometry.hidden.model import LoadedModel, positional_kind

__all__ = ["EditTarget", "POSITION_MODULES", "RotarySlot"]

POSITION_MODULES: tuple[str, ...] = ("wpe", "embed_positions", "position_embeddings")
"""Last name component of a learned position table's ``nn.Embedding`` (GPT-2, OPT/BioGPT, BERT/GPT-Neo)."""


@dataclass(frozen=True)
class RotarySlot:
    """One set of rotary frequencies: ``module``'s ``{prefix}inv_freq`` buffer (``prefix`` is ``""`` or a layer
    type and ``_``) and its ``{prefix}attention_scaling``."""

    module: Any
    prefix: str = ""

    @property
    def layer_type(self) -> str | None:
        """The layer type the buffer serves, or None for a module shared by every layer."""
        return self.prefix[:-1] or None

    @property
    def inv_freq(self) -> torch.Tensor:
        return getattr(self.module, f"{self.prefix}inv_freq")

    @property
    def scaling_name(self) -> str:
        return f"{self.prefix}attention_scaling"

    def cos_sin(self, x: torch.Tensor, position_ids: torch.Tensor) -> Any:
        """The module's own cos/sin for ``position_ids`` (with this slot's layer type when it has one)."""
        if self.layer_type is None:
            return self.module(x, position_ids)
        return self.module(x, position_ids, self.layer_type)


def _slots(model: Any) -> list[RotarySlot]:
    found = []
    for module in model.modules():
        if isinstance(getattr(module, "inv_freq", None), torch.Tensor):
            found.append(RotarySlot(module))
        for name, _ in module.named_buffers(recurse=False):
            if name.endswith("_inv_freq") and not name.endswith("original_inv_freq"):
                found.append(RotarySlot(module, name.removesuffix("inv_freq")))
    return found


class EditTarget:
    """The parts of ``loaded`` a positional edit may change, with undo.

    Attributes:
        loaded: the model.
        kind: ``"learned"``, ``"rotary"`` or ``"none"`` (from the config).
        position_offset: added to every position id of the forward (:class:`~pos_geometry.interventions.edits.Shift`).
    """

    def __init__(self, loaded: LoadedModel) -> None:
        self.loaded = loaded
        self.kind = positional_kind(loaded.config)
        self.position_offset = 0
        self._undo: list[Callable[[], None]] = []

    # --- what is there -------------------------------------------------------------------------

    def table(self) -> torch.nn.Parameter:
        """The learned position table's weight ``(n_positions, d_model)``."""
        for name, module in self.loaded.module.named_modules():
            if name.rsplit(".", 1)[-1] in POSITION_MODULES and isinstance(module, torch.nn.Embedding):
                return module.weight
        raise NotApplicableError(
            f"{self.loaded.model_id!r} ({self.loaded.model_type}) has no learned position table (an nn.Embedding named "
            f"{', '.join(POSITION_MODULES)}); its position enters as {self.kind!r}. Table edits (rank, helix, shuffle, "
            "mean) apply to learned tables only."
        )

    def rotary_slots(self, layer_type: str | None = None) -> list[RotarySlot]:
        """The model's rotary frequency buffers (module docstring): all of them, or those of ``layer_type``.

        Raises:
            NotApplicableError: no rotary buffer; or ``layer_type`` names no type with its own buffer (the
                message lists the types that have one, or says that one buffer serves every layer, so an
                edit of one type's layers needs ``layers=``).
        """
        found = _slots(self.loaded.module)
        if not found:
            why = (
                "its rotation is not computed from an inv_freq buffer (GPT-J and CodeGen keep a precomputed sin/cos "
                "table, embed_positions), so frequency edits cannot reach it; the pairing swap still applies"
                if self.kind == "rotary"
                else "rotary edits (planes, scale, rope, swap) apply to rotary models only"
            )
            raise NotApplicableError(
                f"{self.loaded.model_id!r} ({self.loaded.model_type}) has no rotary embedding module (no inv_freq "
                f"buffer); its position enters as {self.kind!r}: {why}."
            )
        if layer_type is None:
            return found
        typed = [slot for slot in found if slot.layer_type == layer_type]
        if typed:
            return typed
        labels = sorted({slot.layer_type for slot in found if slot.layer_type is not None})
        if labels:
            raise NotApplicableError(
                f"layer_type={layer_type!r}: this model keeps rotary frequencies for the layer types {labels} only."
            )
        raise NotApplicableError(
            f"layer_type={layer_type!r}: this model rotates every layer with one shared set of frequencies, so no "
            "buffer belongs to one layer type; pass layers= (the layers of that type) to edit only those layers."
        )

    def inverse_frequencies(self, layer_type: str | None = None) -> torch.Tensor:
        """``(n_planes,)`` float64 θ_i of the first rotary buffer (of ``layer_type``), plane 0 the fastest."""
        return self.rotary_slots(layer_type)[0].inv_freq.detach().to("cpu", torch.float64).clone()

    def blocks(self) -> list[Any]:
        """The decoder blocks, in order (the model's ``ModuleList`` of ``n_layers`` modules)."""
        n = self.loaded.n_layers
        lists = [
            (name, m)
            for name, m in self.loaded.module.named_modules()
            if isinstance(m, torch.nn.ModuleList) and len(m) == n
        ]
        if not lists:
            raise NotApplicableError(f"no list of {n} decoder blocks in {type(self.loaded.module).__name__}.")
        return list(min(lists, key=lambda f: f[0].count("."))[1])

    # --- changes, each undone on exit ------------------------------------------------------------

    def set_table(self, rows: torch.Tensor) -> None:
        """Replace the position table's values by ``rows`` (same shape)."""
        weight = self.table()
        saved = weight.detach().clone()
        with torch.no_grad():
            weight.copy_(rows.to(weight.dtype))
        self._undo.append(lambda: _copy(weight, saved))

    def set_frequencies(
        self,
        change: Callable[[torch.Tensor], torch.Tensor],
        scaling: float | None = None,
        slots: list[RotarySlot] | None = None,
        layers: tuple[int, ...] | None = None,
    ) -> None:
        """``inv_freq ← change(inv_freq)`` in ``slots`` (default: every rotary buffer), and their attention
        scaling when given. With ``layers``, only those decoder blocks see the change: their cos/sin are
        recomputed by the module's own forward with the changed buffer and passed to them in place of the
        shared ones (the buffers themselves stay as they are)."""
        slots = self.rotary_slots() if slots is None else slots
        if layers is not None:
            self._set_layer_frequencies(change, scaling, slots, layers)
            return
        for slot in slots:
            self._swap(slot, change, scaling)

    def _swap(
        self, slot: RotarySlot, change: Callable[[torch.Tensor], torch.Tensor], scaling: float | None
    ) -> Callable[[], None]:
        """Change one slot's buffer (and scaling); returns its undo, also recorded."""
        buffer = slot.inv_freq
        saved = buffer.detach().clone()
        new = change(saved.to(torch.float64)).to(buffer.dtype)
        if new.shape != saved.shape:
            raise NotApplicableError(
                f"the edited frequencies have shape {tuple(new.shape)}; the model's inv_freq has {tuple(saved.shape)}."
            )
        with torch.no_grad():
            buffer.copy_(new)
        undo = [lambda b=buffer, s=saved: _copy(b, s)]
        if scaling is not None and hasattr(slot.module, slot.scaling_name):
            old = getattr(slot.module, slot.scaling_name)
            setattr(slot.module, slot.scaling_name, scaling)
            undo.append(lambda m=slot.module, n=slot.scaling_name, o=old: setattr(m, n, o))
        self._undo.extend(undo)

        def revert() -> None:
            for u in reversed(undo):
                u()
            for u in undo:
                self._undo.remove(u)

        return revert

    def _set_layer_frequencies(
        self,
        change: Callable[[torch.Tensor], torch.Tensor],
        scaling: float | None,
        slots: list[RotarySlot],
        layers: tuple[int, ...],
    ) -> None:
        blocks = self.blocks()
        kinds = self.layer_types()
        for layer in layers:
            kind = kinds[layer] if kinds is not None else None
            slot = next((s for s in slots if s.layer_type in (None, kind)), None)
            if slot is None:
                raise NotApplicableError(
                    f"layer {layer} is of type {kind!r}, which none of the chosen rotary buffers serves."
                )

            def hook(
                module: Any, args: tuple, kwargs: dict, slot: RotarySlot = slot, layer: int = layer
            ) -> Any:
                positions = kwargs.get("position_ids")
                hidden = args[0] if args else kwargs.get("hidden_states")
                if positions is None or "position_embeddings" not in kwargs or hidden is None:
                    raise NotApplicableError(
                        f"decoder block {layer} of {type(self.loaded.module).__name__} is not handed its rotation "
                        "(position_embeddings and position_ids), so one layer's frequencies cannot be changed alone."
                    )
                revert = self._swap(slot, change, scaling)
                try:
                    kwargs["position_embeddings"] = slot.cos_sin(hidden, positions)
                finally:
                    revert()
                return args, kwargs

            handle = blocks[layer].register_forward_pre_hook(hook, with_kwargs=True)
            self._undo.append(handle.remove)

    def layer_types(self) -> list[str] | None:
        """Each decoder layer's type (the config's ``layer_types``), or None when the config names none."""
        kinds = getattr(self.loaded.module.config, "layer_types", None)
        return list(kinds) if kinds is not None and len(kinds) == self.loaded.n_layers else None

    def permute_rows(
        self, weight: torch.Tensor, rows: torch.Tensor, order: torch.Tensor, dim: int = 0
    ) -> None:
        """``weight[rows] ← weight[rows[order]]`` along ``dim`` (0: rows of an nn.Linear weight)."""
        saved = weight.detach().clone()
        with torch.no_grad():
            source = saved.index_select(dim, rows[order].to(saved.device))
            weight.index_copy_(dim, rows.to(weight.device), source)
        self._undo.append(lambda: _copy(weight, saved))

    @contextlib.contextmanager
    def editing(self) -> Iterator[EditTarget]:
        """Within the block, changes are live; on exit every one is undone, last first."""
        try:
            yield self
        finally:
            while self._undo:
                self._undo.pop()()
            self.position_offset = 0


def _copy(target: torch.Tensor, saved: torch.Tensor) -> None:
    with torch.no_grad():
        target.copy_(saved)
