"""An opened model: the transformers module, its blocks, and what every result's provenance records.

:class:`LoadedModel` is what :func:`~pos_geometry.hidden.opening.open_model` returns (``pg.open_model``): the
transformers module in eval mode on its device, the list of its transformer blocks, and what provenance
needs (model id, revision, config fields), with the model's kind of position, attention direction and
rotary description resolved from its config.

The blocks are found without naming any architecture: they are the ``nn.ModuleList`` whose
length is the config's number of layers (``transformer.h`` in GPT-2, ``model.layers`` in Llama,
``gpt_neox.layers`` in Pythia, ``encoder.layer`` in BERT).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pos_geometry.errors import InvalidArgumentError, NoLearnedTableError, NotApplicableError

__all__ = ["LoadedModel", "positional_kind", "quiet_transformers"]


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers at error verbosity and without progress bars for the block, then as it was: its load
    report (ANSI-coloured), config warnings and download bars would otherwise land in our output."""
    from transformers.utils import logging as tlog

    level, bars = tlog.get_verbosity(), tlog.is_progress_bar_enabled()
    tlog.set_verbosity_error()
    tlog.disable_progress_bar()
    try:
        yield
    finally:
        tlog.set_verbosity(level)
        if bars:
            tlog.enable_progress_bar()


@dataclass(frozen=True, eq=False)
class LoadedModel:
    """A transformers model ready to run, and what its results' provenance records.

    Attributes:
        module: the ``torch.nn.Module`` (eval mode).
        blocks: the transformer blocks, in order (an ``nn.ModuleList``).
        blocks_path: the blocks' attribute path inside ``module`` (``"transformer.h"``).
        model_id: the name, path or ``name_or_path`` it came from.
        revision: the revision asked for (names), else None.
        config: the model's config as a plain dict.
        device: the device its parameters live on.
        tokenizer_source: where a tokenizer can be loaded from (a folder, repo id or ``.gguf`` file), or None.
        source: what it was opened from, as given (a model-table name, hub repo id, folder or ``.gguf`` file),
            or None for a model handed over in memory without a folder: the atlas reads its q/k bytes there.
        headless: why the bare model was opened although its objective has a head class ("" when it was not, or
            when ``head=False`` asked for it): the checkpoint holds no such head.

    Properties resolved from the config once: :attr:`kind` (how position enters), :attr:`direction` (which
    way it attends, so its objective) and :attr:`architecture` (a rotary model's description).
    """

    module: Any
    blocks: Any
    blocks_path: str
    model_id: str
    revision: str | None
    config: dict[str, Any]
    device: Any
    tokenizer_source: str | None
    source: str | None = None
    headless: str = ""

    def checkpoint_source(self, reader: str) -> str:
        """:attr:`source`, for ``reader`` (what reads the checkpoint's bytes itself), or a typed refusal when the
        model was handed over in memory without a folder."""
        if self.source is None:
            raise InvalidArgumentError(
                f"{self.model_id} was handed over in memory, with no checkpoint for {reader} to read; save it "
                "(model.save_pretrained(folder)) and pass the folder."
            )
        return self.source

    @property
    def kind(self) -> str:
        """``"learned"``, ``"rotary"`` or ``"none"`` (:func:`positional_kind`)."""
        return positional_kind(self.config)

    @property
    def direction(self) -> Any:
        """Which way the model attends, and so its objective
        (:func:`~pos_geometry.registry.direction.attention_direction`)."""
        from pos_geometry.registry.direction import attention_direction

        return attention_direction(self.config)

    @property
    def head(self) -> str | None:
        """The objective the module has a head for: ``"next-token"`` (a transformers causal-LM class),
        ``"masked-token"`` (a masked-LM class), or None (a bare model, or a head of another kind)."""
        from transformers.models.auto.modeling_auto import (
            MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
            MODEL_FOR_MASKED_LM_MAPPING_NAMES,
        )

        names = {cls.__name__ for cls in type(self.module).__mro__}  # a subclass keeps its head
        if names & set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values()):
            return "next-token"
        if names & set(MODEL_FOR_MASKED_LM_MAPPING_NAMES.values()):
            return "masked-token"
        return None

    @property
    def architecture(self) -> Any:
        """The :class:`~pos_geometry.registry.architecture.Architecture` of a rotary model (layer types, their
        rotations and attention spans, the attention layout), None for any other kind."""
        if self.kind != "rotary":
            return None
        from pos_geometry.registry.architecture import describe_architecture

        return describe_architecture(self.config)

    @property
    def n_layers(self) -> int:
        return len(self.blocks)

    @property
    def d_model(self) -> int:
        for key in ("hidden_size", "n_embd", "d_model"):
            if isinstance(self.config.get(key), int):
                return int(self.config[key])
        raise InvalidArgumentError(f"config of {self.model_id!r} has no hidden_size/n_embd/d_model.")

    @property
    def vocab_size(self) -> int:
        value = self.config.get("vocab_size")
        if not isinstance(value, int) or value < 1:
            raise InvalidArgumentError(
                f"config of {self.model_id!r} has no usable vocab_size (got {value!r})."
            )
        return value

    @property
    def context_length(self) -> int | None:
        for key in ("n_positions", "max_position_embeddings", "n_ctx", "seq_length"):
            value = self.config.get(key)
            if isinstance(value, int) and value > 0:
                return value
        return None

    @property
    def model_type(self) -> str:
        return str(self.config.get("model_type", ""))


def positional_kind(config: dict[str, Any]) -> str:
    """``"learned"``, ``"rotary"``, or ``"none"`` (ALiBi, relative biases, sinusoidal...): how position enters."""
    from pos_geometry.registry import kind_from_config

    try:
        return kind_from_config(config)
    except (NoLearnedTableError, InvalidArgumentError):
        return "none"


def _find_blocks(module: Any, n_layers: int | None) -> tuple[Any, str]:
    import torch

    candidates = [
        (name, child)
        for name, child in module.named_modules()
        if isinstance(child, torch.nn.ModuleList)
        and len(child) > 0
        and (n_layers is None or len(child) == n_layers)
    ]
    if not candidates:
        raise NotApplicableError(
            f"no list of {n_layers} transformer blocks was found in {type(module).__name__}; hidden states are read "
            "at the blocks' inputs and outputs. Pass a transformers decoder or encoder model."
        )
    name, blocks = min(candidates, key=lambda c: c[0].count("."))  # the outermost: a model's own blocks
    return blocks, name


def _config_dict(config: Any) -> dict[str, Any]:
    out = config.to_dict() if hasattr(config, "to_dict") else dict(config)
    if "model_type" not in out and getattr(config, "model_type", None):
        out["model_type"] = config.model_type
    return out


def _wrap(
    module: Any,
    model_id: str,
    revision: str | None,
    tokenizer_source: str | None,
    source: str | None = None,
    *,
    base_paths: bool = False,
) -> LoadedModel:
    """``module`` checked and described; ``base_paths``: name the blocks inside the base model (``layers``,
    not ``model.layers``), as the bare model a path gives names them, for a model opened with its head."""
    config = _config_dict(module.config)
    if config.get("is_encoder_decoder"):
        raise NotApplicableError(
            f"{model_id!r} is an encoder-decoder model; hidden_positions reads one stack of blocks. "
            "Pass a decoder-only or encoder-only model."
        )
    n_layers = next(
        (config[k] for k in ("num_hidden_layers", "n_layer", "num_layers") if config.get(k)), None
    )
    blocks, path = _find_blocks(module, n_layers)
    prefix = f"{getattr(module, 'base_model_prefix', '')}."
    if base_paths and prefix != "." and path.startswith(prefix):
        path = path[len(prefix) :]
    _check_finite(module, model_id)
    module.eval()
    device = next(module.parameters()).device
    return LoadedModel(module, blocks, path, model_id, revision, config, device, tokenizer_source, source)


def _check_finite(module: Any, model_id: str) -> None:
    """Refuse a model whose weights hold NaN or inf: every number measured on it would be NaN or meaningless."""
    import torch

    from pos_geometry._describe import printable
    from pos_geometry.errors import NonFiniteError

    with torch.no_grad():
        for name, param in module.named_parameters():
            if param.is_floating_point() and not bool(torch.isfinite(param).all()):
                bad = int((~torch.isfinite(param)).sum())
                raise NonFiniteError(
                    f"{printable(model_id)}: the weight {name!r} holds {bad} NaN or infinite value(s) of "
                    f"{param.numel()}; a model with such weights cannot be measured. Check or re-export the checkpoint."
                )
