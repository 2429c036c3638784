"""The masked-token loss of a model that attends both ways: which positions are masked, and with which token.

A model that attends both ways sees the next token at every position, so its loss is the masked-token loss
it was trained with. The rule, stated in every result's provenance (:func:`masking_rule`):

* in each context, ``max(1, round(0.15 · seq_len))`` positions are masked, drawn uniformly without
  replacement by ``numpy.random.default_rng([random_state, context index])``;
* every masked position holds the model's mask token (BERT's 80/10/10 split of mask, random and kept tokens
  is not used: the loss is the model's prediction of a hidden token from its context alone);
* the loss is the cross-entropy of the original token at the masked positions;
* both passes of an intervention mask the same positions, so their difference is paired by sequence.

The mask token is the tokenizer's (the one that tokenised a text corpus, else the model's own: its folder's
tokenizer or the GGUF's ``tokenizer.ggml.mask_token_id``), else the config's ``mask_token_id``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pos_geometry.errors import NotApplicableError

__all__ = ["MASKED_FRACTION", "Masking", "mask_token_id", "masked_positions", "masking_for", "masking_rule"]

MASKED_FRACTION = 0.15
"""The share of each context's positions that is masked (BERT's pre-training share)."""


def n_masked(seq_len: int) -> int:
    """Positions masked per context of ``seq_len`` tokens: ``max(1, round(0.15 · seq_len))``."""
    return max(1, round(MASKED_FRACTION * seq_len))


def masking_rule(seq_len: int, random_state: int, token_id: int) -> str:
    """The rule in words, for a result's provenance."""
    return (
        f"masked-token loss: {n_masked(seq_len)} of {seq_len} positions per context replaced by the mask token "
        f"(id {token_id}), drawn uniformly with random_state={random_state} (the same positions in every pass); "
        "cross-entropy of the original tokens there"
    )


def masked_positions(n_sequences: int, seq_len: int, random_state: int) -> np.ndarray:
    """``(n_sequences, seq_len)`` bool: the positions masked in each context (module docstring)."""
    out = np.zeros((n_sequences, seq_len), dtype=bool)
    k = n_masked(seq_len)
    for i in range(n_sequences):
        out[i, np.random.default_rng([random_state, i]).choice(seq_len, size=k, replace=False)] = True
    return out


def _own_tokenizer_id(source: str | None) -> int | None:
    """The mask token id of the model's own tokenizer at ``source`` (a folder, repo id or ``.gguf`` file); a
    GGUF's from its metadata when transformers cannot build its tokenizer (it reads no BERT GGUF)."""
    from pos_geometry.hidden.run import own_tokenizer

    try:
        found = getattr(own_tokenizer(source), "mask_token_id", None)
    except Exception:  # tokenizers raises its own types for a damaged file: then there is no mask token
        found = None
    if (
        found is None
        and source is not None
        and Path(source).suffix.lower() == ".gguf"
        and Path(source).is_file()
    ):
        from pos_geometry.sources.byte_source import FileByteSource
        from pos_geometry.sources.gguf.header import read_header

        value = read_header(FileByteSource(Path(source))).fields.get("tokenizer.ggml.mask_token_id")
        found = value if isinstance(value, int) and not isinstance(value, bool) else None
    return found


def mask_token_id(loaded: Any, tokenizer: Any) -> int:
    """The mask token of ``loaded`` (a :class:`~pos_geometry.hidden.model.LoadedModel`): ``tokenizer``'s, else the
    model's own tokenizer's, else its config's ``mask_token_id``; a typed refusal when none is found."""
    found = getattr(tokenizer, "mask_token_id", None) if tokenizer is not None else None
    if found is None:
        found = _own_tokenizer_id(loaded.tokenizer_source)
    if found is None:
        found = loaded.config.get("mask_token_id")
    if isinstance(found, bool) or not isinstance(found, int) or not 0 <= found < loaded.vocab_size:
        raise NotApplicableError(
            f"a masked-token loss needs {loaded.model_id}'s mask token, and none was found (no tokenizer with a "
            f"mask token, no mask_token_id in its config; got {found!r}); pass tokenizer=... with a mask token."
        )
    return int(found)


@dataclass(frozen=True)
class Masking:
    """The masked positions ``(n_sequences, seq_len)``, the mask token and the rule in words, shared by every
    pass of one intervention."""

    positions: np.ndarray
    token_id: int
    rule: str


def masking_for(run: Any, random_state: int) -> Masking | None:
    """The :class:`Masking` of a :class:`~pos_geometry.hidden.run.Run` whose model attends both ways (its objective
    is the masked-token loss); None for a causal decoder."""
    if run.loaded.direction.causal:
        return None
    corpus = run.corpus
    token_id = mask_token_id(run.loaded, run.tokenizer)
    return Masking(
        masked_positions(corpus.n_sequences, corpus.seq_len, random_state),
        token_id,
        masking_rule(corpus.seq_len, random_state, token_id),
    )
