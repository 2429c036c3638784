"""Which way a model attends, from its config: causal (each position sees the ones before it) or both ways.

The objective and the nulls that fit a model follow from it. A causal decoder is trained to predict the next
token, and uniform attention over the keys a query may see puts ``1/(q + 1)`` on each. A model that attends both
ways sees the next token at every position: a next-token loss measures nothing there (an encoder's objective is
a masked-token loss), and uniform attention puts ``1/T`` on every key.

Read from the config as transformers reads it, no table of model names:

* ``use_bidirectional_attention`` true (the embedding models of decoder families: Gemma's and others');
* ``is_causal`` false;
* else a ``model_type`` transformers builds a masked language model for (BERT, RoBERTa, RoFormer, ModernBERT,
  ...), unless its config sets ``is_decoder`` (BERT used as a decoder);

and causal otherwise.

Each objective has its transformers head class (:func:`auto_class`): ``AutoModelForCausalLM`` for the next-token
loss, ``AutoModelForMaskedLM`` for the masked-token loss; :func:`objective_heads` says which of them transformers
builds for a config.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["AttentionDirection", "attention_direction", "auto_class", "bare_options", "objective_heads"]


@dataclass(frozen=True)
class AttentionDirection:
    """``causal``: whether each position attends only to itself and earlier ones; ``reason``: the config field
    or the transformers fact that says so, in words."""

    causal: bool
    reason: str

    @property
    def objective(self) -> str:
        """The training objective that fits: ``"next-token"`` (causal) or ``"masked-token"`` (both ways)."""
        return "next-token" if self.causal else "masked-token"


def _masked_lm_types() -> frozenset[str]:
    from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES

    return frozenset(MODEL_FOR_MASKED_LM_MAPPING_NAMES)


def attention_direction(config: Mapping[str, Any]) -> AttentionDirection:
    """The :class:`AttentionDirection` of a config dict (see the module docstring)."""
    model_type = str(config.get("model_type", ""))
    if config.get("use_bidirectional_attention"):
        return AttentionDirection(False, "its config sets use_bidirectional_attention=True")
    if config.get("is_causal") is False:
        return AttentionDirection(False, "its config sets is_causal=False")
    if model_type in _masked_lm_types() and not config.get("is_decoder"):
        return AttentionDirection(
            False,
            f"model_type {model_type!r} is an encoder (transformers builds a masked language model for it)",
        )
    return AttentionDirection(True, f"model_type {model_type!r} is a causal decoder")


def objective_heads(config: Any) -> frozenset[str]:
    """The objectives transformers builds a head class for, for a transformers config object:
    ``"next-token"`` (a causal-LM class) and/or ``"masked-token"`` (a masked-LM class)."""
    import transformers

    heads = set()
    if type(config) in transformers.MODEL_FOR_CAUSAL_LM_MAPPING:
        heads.add("next-token")
    if type(config) in transformers.MODEL_FOR_MASKED_LM_MAPPING:
        heads.add("masked-token")
    return frozenset(heads)


def auto_class(head: str | None) -> Any:
    """transformers' auto class for a module with the head of objective ``head`` (None: the bare model)."""
    import transformers

    return {"next-token": transformers.AutoModelForCausalLM, "masked-token": transformers.AutoModelForMaskedLM,
            None: transformers.AutoModel}[head]  # fmt: skip


def bare_options(config: Any) -> dict[str, Any]:
    """Keyword arguments that build the bare model of ``config`` (a transformers config object) without its
    pooler, where its class has one to leave out (``add_pooling_layer``): the ``[CLS]`` summary is no hidden
    state, no analysis reads it, and a checkpoint saved from a masked LM has none."""
    import inspect

    import transformers

    try:
        cls = transformers.AutoModel._model_mapping[type(config)]
    except (KeyError, ValueError):
        return {}
    return (
        {"add_pooling_layer": False}
        if "add_pooling_layer" in inspect.signature(cls.__init__).parameters
        else {}
    )
