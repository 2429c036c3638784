"""The card's corpus: what the model-running sections read, and how it is described on the page.

The default is a public-domain text in the checkout's ``data/corpus/`` (Lewis Carroll, *Alice's
Adventures in Wonderland*, Project Gutenberg #11; ``data/README.md`` cites it), tokenised with the
model's own tokenizer, so a card needs no network. A model without a tokenizer reads random tokens
instead, and the page says so. ``corpus=`` (``--corpus``) overrides both.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "CORPUS_ENV",
    "DEFAULT_CORPUS",
    "CorpusPlan",
    "check_corpus_options",
    "default_corpus",
    "default_text",
    "plan_corpus",
]

CORPUS_ENV = "POS_GEOMETRY_CORPUS"
"""Environment variable naming a text file that replaces the default corpus."""

DEFAULT_CORPUS = "alice.txt"
"""The default corpus's file name in ``<checkout>/data/corpus``."""

FULL = (16, 512)  # contexts × tokens of a full card (at most; a shorter model context shortens them)
FAST = (8, 256)  # and of a fast one


def default_corpus() -> Path | None:
    """``$POS_GEOMETRY_CORPUS``, else ``<checkout>/data/corpus/alice.txt``; None when neither is a file."""
    from pos_geometry.sources.locations import checkout_data

    path = checkout_data(CORPUS_ENV, "corpus", DEFAULT_CORPUS)
    return path if path is not None and path.is_file() else None


def default_text(command: str) -> Path:
    """The default corpus of the commands that run a model (``card``, ``hidden``, ``intervene``): the public-domain
    text in ``data/corpus`` (or ``$POS_GEOMETRY_CORPUS``).

    Raises:
        InvalidArgumentError: the text is not on this machine (a wheel install without the checkout's data).
    """
    from pos_geometry.errors import InvalidArgumentError

    path = default_corpus()
    if path is None:
        raise InvalidArgumentError(
            f"{command} reads a corpus: none was given and the default text (data/corpus/alice.txt in the checkout, "
            "or the file $POS_GEOMETRY_CORPUS names) is not on this machine. Pass --corpus FILE (text or .npy)."
        )
    return path


@dataclass(frozen=True)
class CorpusPlan:
    """What the model-running sections read: ``tokens`` (a path, an array, or None for random tokens),
    ``seq_len`` and ``n_sequences`` (None: the model's defaults), and ``note``, how it was chosen."""

    tokens: Any
    seq_len: int | None
    n_sequences: int | None
    note: str

    def random(self, why: str) -> CorpusPlan:
        """The same sizes on random tokens, with ``why`` in the note."""
        return CorpusPlan(None, self.seq_len, self.n_sequences, f"random tokens: {why}")


def check_corpus_options(corpus: Any, *, seq_len: Any, n_sequences: Any) -> None:
    """Check what a card will read before any work: ``seq_len`` and ``n_sequences`` positive integers (or
    None), and a ``corpus`` given as a path naming a file.

    Raises:
        InvalidArgumentError: naming the option, the rule and the value received.
    """
    import numbers

    from pos_geometry._describe import describe
    from pos_geometry.errors import InvalidArgumentError

    for name, value, example in (("seq_len", seq_len, 512), ("n_sequences", n_sequences, 16)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < 1:
            raise InvalidArgumentError(
                f"{name} must be a positive whole number (or None for the default); got {describe(value)}. "
                f"Pass e.g. {name}={example} (--{name.replace('_', '-')} {example})."
            )
    if isinstance(corpus, str | os.PathLike):
        path = Path(corpus).expanduser()
        if not path.is_file():
            what = "a folder" if path.is_dir() else "nothing"
            raise InvalidArgumentError(
                f"corpus must be a text file or a .npy of token ids; {os.fspath(corpus)!r} is {what}. Check "
                "the path, or leave corpus out to read the default text."
            )


def plan_corpus(
    corpus: Any, *, fast: bool, context: int | None, seq_len: int | None, n_sequences: int | None
) -> CorpusPlan:
    """The corpus a card reads: ``corpus`` when given, else the default text; sizes from ``seq_len`` and
    ``n_sequences``, else :data:`FULL` (or :data:`FAST`), the length capped at the model's ``context``."""
    n_default, len_default = FAST if fast else FULL
    length = seq_len if seq_len is not None else min(len_default, context or len_default)
    n = n_sequences if n_sequences is not None else n_default
    if corpus is not None:
        shown = os.fspath(corpus) if isinstance(corpus, str | os.PathLike) else "the token array given"
        return CorpusPlan(corpus, length, n, f"given: {shown}")
    path = default_corpus()
    if path is None:
        return CorpusPlan(
            None, length, n,
            "random tokens: the default text (data/corpus/alice.txt) is not on this machine; pass --corpus",
        )  # fmt: skip
    return CorpusPlan(
        path, length, n,
        "the default: Lewis Carroll, Alice's Adventures in Wonderland (public domain, Project Gutenberg #11), "
        "tokenised with the model's tokenizer",
    )  # fmt: skip
