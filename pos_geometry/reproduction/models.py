"""The models the reproduction reads, and how ``--model NAME=PATH`` names them (a light module: the command's
results cache reads it without the analysis stack)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pos_geometry.errors import InvalidArgumentError
from pos_geometry.sources.locations import parse_named_path

__all__ = ["COMPARISON_MODELS", "NINE_GPT2S", "REPRODUCED_MODELS", "ROTARY_MODELS", "parse_model_paths"]

NINE_GPT2S: tuple[str, ...] = (
    "gpt2",
    "gpt2-medium",
    "gpt2-large",
    "gpt2-xl",
    "alias-gpt2-small-x21",
    "battlestar-gpt2-small-x49",
    "caprica-gpt2-small-x81",
    "darkmatter-gpt2-small-x343",
    "expanse-gpt2-small-x777",
)
"""The post's nine GPT-2s: the four OpenAI sizes and five Stanford CRFM GPT-2 small replicas."""

ROTARY_MODELS: tuple[str, ...] = ("pythia-160m", "mistral-7b-v0.1")
COMPARISON_MODELS: tuple[str, ...] = ("openai-gpt",)
REPRODUCED_MODELS: tuple[str, ...] = (*NINE_GPT2S, *COMPARISON_MODELS, *ROTARY_MODELS)
"""Every model the reproduction reads, in the order it looks for them."""


def parse_model_paths(items: Sequence[str]) -> dict[str, Path]:
    """``["gpt2-medium=/ckpt/dir", ...]`` -> ``{"gpt2-medium": Path(...)}`` (names resolved by the model table;
    the same parser as ``load("NAME=PATH")``: :func:`~pos_geometry.sources.locations.parse_named_path`)."""
    out: dict[str, Path] = {}
    for item in items:
        named = parse_named_path(item, known=True)
        if named is None:
            raise InvalidArgumentError(
                f"--model takes NAME=PATH (a model-table name and a local checkpoint, file or folder); got "
                f"{item!r}. Example: --model gpt2-medium=~/ckpts/gpt2-medium"
            )
        out[named[0]] = named[1]
    return out
