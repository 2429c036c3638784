"""Where a positional edit lands in a running transformers model, and how it is undone.

:class:`EditTarget` finds, in a loaded causal LM, what position flows through:

* the learned position table: the ``nn.Embedding`` named in :data:`POSITION_MODULES` (a new
  architecture is a new name there), e.g. GPT-2's ``transformer.wpe``;
* the rotary embedding modules: every submodule holding an ``inv_freq`` buffer (transformers'
  ``*RotaryEmbedding``; Gemma-3 has one per layer type), whose frequencies the model reads on
  every forward pass;
* the query/key projections, by the attention-layout row of
  :mod:`pos_geometry.registry.attention` (separate ``q_proj``/``k_proj`` or fused), for the
  pairing control.

Every change goes through a method that records how to undo it; :meth:`EditTarget.editing` undoes
them all on exit, whatever happens, so the model is bit-identical afterwards.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch

from pos_geometry.errors import NotApplicableError
from pos_geometry.hidden.model import LoadedModel, positional_kind

__all__ = ["EditTarget", "POSITION_MODULES"]

POSITION_MODULES: tuple[str, ...] = ("wpe", "embed_positions", "position_embeddings")
"""Last name component of a learned position table's ``nn.Embedding`` (GPT-2, OPT/BioGPT, BERT/GPT-Neo)."""


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

    def rotary_modules(self) -> list[Any]:
        """Every module holding an ``inv_freq`` buffer (the model's rotary embeddings)."""
        found = [
            m for m in self.loaded.module.modules() if isinstance(getattr(m, "inv_freq", None), torch.Tensor)
        ]
        if not found:
            raise NotApplicableError(
                f"{self.loaded.model_id!r} ({self.loaded.model_type}) has no rotary embedding module (no inv_freq "
                f"buffer); its position enters as {self.kind!r}. Rotary edits (planes, scale, rope, swap) apply to "
                "rotary models only."
            )
        return found

    def inverse_frequencies(self) -> torch.Tensor:
        """``(n_planes,)`` float64 θ_i of the first rotary module (plane 0 the fastest)."""
        return self.rotary_modules()[0].inv_freq.detach().to("cpu", torch.float64).clone()

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
        modules: list[Any] | None = None,
    ) -> None:
        """``inv_freq ← change(inv_freq)`` in ``modules`` (default: every rotary module), and their
        ``attention_scaling`` when given."""
        for module in self.rotary_modules() if modules is None else modules:
            buffer = module.inv_freq
            saved = buffer.detach().clone()
            new = change(saved.to(torch.float64)).to(buffer.dtype)
            if new.shape != saved.shape:
                raise NotApplicableError(
                    f"the edited frequencies have shape {tuple(new.shape)}; the model's inv_freq has {tuple(saved.shape)}."
                )
            with torch.no_grad():
                buffer.copy_(new)
            self._undo.append(lambda b=buffer, s=saved: _copy(b, s))
            if scaling is not None and hasattr(module, "attention_scaling"):
                old = module.attention_scaling
                module.attention_scaling = scaling
                self._undo.append(lambda m=module, o=old: setattr(m, "attention_scaling", o))

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
