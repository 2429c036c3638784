"""The argument handling every hidden-state function shares: model, corpus, batch, device, progress.

:func:`hidden_positions` and :func:`attention_by_offset` both take a model, token contexts and the
:class:`RunOptions` below; :func:`start` checks them once and returns a :class:`Run`: the loaded
model, its corpus, the batch size, and the provenance fields every result built on it records.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import torch

from pos_geometry._progress import Progress, check_progress
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.hidden.corpus import Corpus, made_up, make_corpus
from pos_geometry.hidden.model import LoadedModel, positional_kind, quiet_transformers
from pos_geometry.hidden.opening import open_model

__all__ = ["RunOptions", "Run", "start", "check_layers", "own_tokenizer", "TOKENS_PER_BATCH"]

TOKENS_PER_BATCH = {"cpu": 1024, "other": 16384}
"""The default batch: contexts of ``seq_len`` tokens filling this many tokens (at least one context).
On a CPU throughput is flat beyond about a thousand tokens per pass while activation memory grows
with the batch (GPT-2 small, 16 x 1024 tokens: one context per pass 24.7 s and 416 MiB above the
loaded model, two per pass 23.8 s and 730 MiB); on an accelerator larger passes keep it busy."""


class RunOptions(TypedDict, total=False):
    """Keyword options shared by :func:`~pos_geometry.hidden_positions` and :func:`~pos_geometry.attention_by_offset`.

    * ``seq_len``, ``n_sequences``: corpus shape (defaults: the model's context capped at 1024;
      64 contexts for the random default; all contexts of arrays and files);
    * ``random_state``: seed of the random-token default (0);
    * ``tokenizer``: tokenises a text corpus (default: the model folder's own, when it has one);
    * ``revision``: the revision of a model named by the model table or a hub repo id;
    * ``progress``: as everywhere in pos_geometry: ``None`` (the default) shows a bar in a terminal or
      Jupyter, ``True`` always, ``False`` never; or a callable, called with ``(contexts done, total)``
      after each batch.
    """

    seq_len: int | None
    n_sequences: int | None
    random_state: int
    tokenizer: Any
    revision: str | None
    progress: Progress


@dataclass(frozen=True, eq=False)
class Run:
    """A model ready to run over its corpus, ``batch_size`` contexts at a time. ``progress``: the caller's
    callable, or None for a bar shown as ``show`` says (:func:`pos_geometry._progress.shown`)."""

    loaded: LoadedModel
    corpus: Corpus
    batch_size: int
    progress: Callable[[int, int], None] | None
    show: bool | None = None
    tokenizer: Any = None

    def config(self) -> dict[str, Any]:
        """The provenance config fields every hidden-state result shares."""
        loaded, corpus = self.loaded, self.corpus
        return {
            "model_type": loaded.model_type,
            "n_layers": loaded.n_layers,
            "d_model": loaded.d_model,
            "positional_encoding": positional_kind(loaded.config),
            "corpus": corpus.description,
            "corpus_source": corpus.source,
            "n_sequences": corpus.n_sequences,
            "seq_len": corpus.seq_len,
            "context_length": loaded.context_length,
        }


def check_layers(layers: Sequence[int] | int | None, n_layers: int) -> tuple[int, ...]:
    """Sorted unique layer indices in ``0..n_layers`` (negative ones count from ``n_layers + 1``)."""
    if layers is None:
        return tuple(range(n_layers + 1))
    items = [layers] if isinstance(layers, int) else list(layers)
    out = []
    for layer in items:
        if isinstance(layer, bool) or not isinstance(layer, int | np.integer):
            raise InvalidArgumentError(f"layers must be ints; got {layer!r} ({type(layer).__name__}).")
        index = int(layer) + (n_layers + 1 if layer < 0 else 0)
        if not 0 <= index <= n_layers:
            raise InvalidArgumentError(
                f"layer {layer} is out of range: this model has layers 0..{n_layers} (0 = embedding output, "
                f"{n_layers} = last block's output)."
            )
        out.append(index)
    if not out:
        raise InvalidArgumentError("layers is empty; pass None for every layer.")
    return tuple(sorted(set(out)))


def _check_int(name: str, value: Any, *, minimum: int, optional: bool) -> None:
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        allowed = "None or " if optional else ""
        raise InvalidArgumentError(f"{name} must be {allowed}an int >= {minimum}; got {value!r}.")


def start(
    model: Any,
    tokens: Any,
    *,
    batch_size: int | None,
    device: Any,
    options: RunOptions,
    loss: bool = False,
    beyond_context: bool = False,
    min_sequences: int = 2,
) -> Run:
    """Check the shared arguments, load the model (with the head of its objective when ``loss``: see
    :func:`~pos_geometry.hidden.opening.open_model`) and
    build the corpus (see :class:`RunOptions`). ``beyond_context``: a rotary model may run contexts
    longer than its training context (a learned table still cannot). ``min_sequences``: the fewest
    contexts the caller can use (2 for a decomposition, 1 for a loss).

    ``batch_size`` None: :data:`TOKENS_PER_BATCH` tokens per pass on the model's device.
    """
    unknown = sorted(set(options) - set(RunOptions.__annotations__))
    if unknown:
        raise TypeError(
            f"unexpected keyword argument(s) {', '.join(unknown)}; known: "
            f"batch_size, device, {', '.join(RunOptions.__annotations__)}."
        )
    _check_int("batch_size", batch_size, minimum=1, optional=True)
    check_progress(options.get("progress"))
    _check_int("random_state", options.get("random_state", 0), minimum=0, optional=False)
    loaded = open_model(model, device=device, revision=options.get("revision"), head=loss)
    tokenizer = options.get("tokenizer")
    if tokenizer is None and _is_text(tokens):
        tokenizer = own_tokenizer(loaded.tokenizer_source)
    corpus = make_corpus(
        tokens,
        vocab_size=loaded.vocab_size,
        context_length=loaded.context_length,
        seq_len=options.get("seq_len"),
        n_sequences=options.get("n_sequences"),
        random_state=options.get("random_state", 0),
        tokenizer=tokenizer,
        beyond_context=beyond_context and positional_kind(loaded.config) == "rotary",
        min_sequences=min_sequences,
    )
    if batch_size is None:
        budget = TOKENS_PER_BATCH["cpu" if torch.device(loaded.device).type == "cpu" else "other"]
        batch_size = max(1, min(corpus.n_sequences, budget // corpus.seq_len))
    progress = options.get("progress")
    if progress is None or isinstance(progress, bool):
        return Run(loaded, corpus, batch_size, None, progress, tokenizer)
    return Run(loaded, corpus, batch_size, progress, tokenizer=tokenizer)


def own_tokenizer(source: str | None) -> Any:
    """The model's own tokenizer at ``source`` (a folder, hub repo id or ``.gguf`` file, whose vocabulary
    transformers reads), or None: none there, one transformers cannot read, or one it made up for a folder
    that has only a config (:func:`~pos_geometry.hidden.corpus.made_up`)."""
    if source is None:
        return None
    try:
        import transformers

        from pos_geometry.sources.network import offline_reason

        path = Path(source)
        local = path.exists() or offline_reason() is not None  # one offline policy: no retries
        with quiet_transformers():
            if path.suffix.lower() == ".gguf":  # the GGUF's own vocabulary, read by transformers
                tokenizer = transformers.AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
            else:
                tokenizer = transformers.AutoTokenizer.from_pretrained(source, local_files_only=local)
    except (OSError, ValueError):
        return None
    return None if made_up(tokenizer) else tokenizer


def _is_text(tokens: Any) -> bool:
    return isinstance(tokens, str | Path) and Path(tokens).suffix.lower() != ".npy"
