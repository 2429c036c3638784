"""What the model reads: token contexts ``(n_sequences, seq_len)`` and a description of where they came from.

:func:`make_corpus` accepts

* an int array or tensor ``(n_sequences, seq_len)`` of token ids;
* a ``.npy`` file holding one (read with ``allow_pickle=False``);
* a text file (``.txt``/``.md``/...), tokenised with the model's tokenizer and cut into consecutive,
  non-overlapping contexts of ``seq_len`` tokens;
* ``None``: the **offline default**, uniformly random token ids drawn with ``random_state``. It
  needs nothing but the model, and is labelled as such in every result built on it (random
  contexts are not natural text: what they show is position as the model sees it without meaning).

The description (:attr:`Corpus.description`) goes into the provenance of every result.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pos_geometry.errors import InvalidArgumentError, NotApplicableError

__all__ = [
    "Corpus",
    "made_up",
    "make_corpus",
    "DEFAULT_N_SEQUENCES",
    "MAX_DEFAULT_SEQ_LEN",
    "NoTokenizerError",
]


class NoTokenizerError(NotApplicableError):
    """A text corpus for a model with no tokenizer: callers with a fallback (random tokens) catch this one."""


DEFAULT_N_SEQUENCES = 64
MAX_DEFAULT_SEQ_LEN = 1024
"""The default ``seq_len`` is the model's context, capped here (pass ``seq_len`` for longer)."""


@dataclass(frozen=True, eq=False)
class Corpus:
    """Token contexts and where they came from.

    Attributes:
        tokens: ``(n_sequences, seq_len)`` int64 token ids.
        description: a one-line account (source, shape, and for the default its random state).
        source: ``"array"``, ``"npy"``, ``"text"`` or ``"random"``.
    """

    tokens: np.ndarray
    description: str
    source: str

    @property
    def n_sequences(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def seq_len(self) -> int:
        return int(self.tokens.shape[1])


def made_up(tokenizer: Any) -> bool:
    """Whether ``tokenizer`` is one transformers made up for a folder that has none: its vocabulary holds nothing
    but its special tokens (an empty one, or BERT's five), so every text would tokenise to nothing and its mask
    token would be a guess."""
    try:
        vocab = tokenizer.get_vocab()
    except (AttributeError, NotImplementedError):
        return False
    return len(vocab) <= max(1, len(set(getattr(tokenizer, "all_special_tokens", ()) or ())))


def _check_ids(ids: np.ndarray, vocab_size: int | None, where: str, min_sequences: int = 2) -> np.ndarray:
    if ids.ndim != 2 or ids.shape[0] < min_sequences or ids.shape[1] < 2:
        why = (
            "the decomposition needs several contexts and positions"
            if min_sequences > 1
            else "a next-token loss needs two positions"
        )
        raise InvalidArgumentError(
            f"tokens must be a 2-D int array (n_sequences, seq_len) with n_sequences >= {min_sequences} and "
            f"seq_len >= 2 ({why}); {where} has shape {tuple(ids.shape)}."
        )
    if ids.dtype.kind not in "iu":
        raise InvalidArgumentError(
            f"tokens must hold integer token ids; {where} has dtype {ids.dtype}. Convert with .astype(np.int64)."
        )
    ids = ids.astype(np.int64, copy=False)
    lo, hi = int(ids.min()), int(ids.max())
    if lo < 0 or (vocab_size is not None and hi >= vocab_size):
        raise InvalidArgumentError(
            f"token ids must lie in [0, vocab_size={vocab_size}); {where} holds ids from {lo} to {hi}. "
            "Were they made with another model's tokenizer?"
        )
    return ids


def _check_count(name: str, value: Any, minimum: int) -> None:
    """``value`` None or an int ≥ ``minimum``; else :class:`InvalidArgumentError` stating the rule."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise InvalidArgumentError(
            f"{name} must be an int >= {minimum} (or None for the default); got {value!r}."
        )


def _fingerprint(ids: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(ids).tobytes()).hexdigest()[:12]


_CHUNK = 1 << 20


def _read_text(path: Path, tokens_needed: int | None) -> str:
    """The UTF-8 text of ``path``: all of it (at most ``POS_GEOMETRY_MAX_CORPUS_BYTES``) or, when only
    ``tokens_needed`` tokens are used, enough of it (a token is at least one character: that many characters,
    read in 1 MiB pieces, suffice). Bytes that are not UTF-8 are refused with their offset."""
    from pos_geometry._limits import MAX_CORPUS_BYTES, limit

    cap = limit(MAX_CORPUS_BYTES)
    size = path.stat().st_size
    wanted = size if tokens_needed is None else min(size, 8 * tokens_needed + 4)  # ≤ 4 bytes per character
    if wanted > cap:
        raise InvalidArgumentError(
            f"the corpus {str(path)!r} is {size:,} bytes, over the limit of {cap:,} set by {MAX_CORPUS_BYTES}; pass "
            f"n_sequences (only the text those contexts need is read), or raise the limit: {MAX_CORPUS_BYTES}=<bytes>."
        )
    with open(path, "rb") as fh:
        data = fh.read(wanted)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start >= len(data) - 3 and wanted < size:  # a character cut at the end of what was read
            return data[: exc.start].decode("utf-8")
        raise InvalidArgumentError(
            f"the corpus {str(path)!r} is not UTF-8 text (byte {exc.start:,}: {data[exc.start : exc.start + 4]!r}); "
            "pass a UTF-8 text file, or token ids as a .npy of shape (n_sequences, seq_len)."
        ) from None


def _from_text(
    path: Path, tokenizer: Any, seq_len: int, n_sequences: int | None, min_sequences: int = 2
) -> np.ndarray:
    if tokenizer is None:
        raise NoTokenizerError(
            f"{str(path)!r} is text, but no tokenizer is available for this model (its folder has none). "
            "Pass tokenizer=..., or token ids as a .npy file of shape (n_sequences, seq_len)."
        )
    text = _read_text(path, None if n_sequences is None else n_sequences * seq_len)
    ids = np.asarray(tokenizer(text, add_special_tokens=False)["input_ids"], dtype=np.int64)
    n = len(ids) // seq_len
    if n_sequences is not None:
        n = min(n, n_sequences)
    if n < min_sequences:
        raise InvalidArgumentError(
            f"{str(path)!r} tokenises to {len(ids)} tokens: fewer than {min_sequences} context(s) of seq_len={seq_len}. "
            "Use a longer text or a smaller seq_len."
        )
    return ids[: n * seq_len].reshape(n, seq_len)


def make_corpus(
    tokens: Any,
    *,
    vocab_size: int | None,
    context_length: int | None,
    seq_len: int | None = None,
    n_sequences: int | None = None,
    random_state: int = 0,
    tokenizer: Any = None,
    beyond_context: bool = False,
    min_sequences: int = 2,
) -> Corpus:
    """The :class:`Corpus` for ``tokens`` (see the module docstring for what it may be).

    ``seq_len`` defaults to the model's context (capped at :data:`MAX_DEFAULT_SEQ_LEN`) for text and
    the random default; ``n_sequences`` defaults to :data:`DEFAULT_N_SEQUENCES` for the random
    default and, when given, keeps the first ``n_sequences`` contexts of arrays, files and text.
    A context longer than the model's (learned tables end there) is refused unless ``beyond_context``
    (a rotary model run past its training context, as position interpolation is tested).
    ``min_sequences``: the fewest contexts the caller can use (2 for a decomposition, 1 for a loss).
    """
    default_len = min(context_length or MAX_DEFAULT_SEQ_LEN, MAX_DEFAULT_SEQ_LEN)
    _check_count("seq_len", seq_len, 2)
    _check_count("n_sequences", n_sequences, min_sequences)
    if tokens is None:
        n = DEFAULT_N_SEQUENCES if n_sequences is None else int(n_sequences)
        length = default_len if seq_len is None else int(seq_len)
        if vocab_size is None:
            raise InvalidArgumentError(
                "the random default needs the model's vocab_size; pass tokens instead."
            )
        from pos_geometry._limits import check_elements

        check_elements("the random default corpus (n_sequences × seq_len)", (n, length),
                       "Pass a smaller n_sequences or seq_len.")  # fmt: skip
        rng = np.random.default_rng(random_state)
        ids = _check_ids(
            rng.integers(0, vocab_size, size=(n, length), dtype=np.int64),
            vocab_size,
            "the default",
            min_sequences,
        )
        description = (
            f"random tokens (offline default, not natural text): {n} x {length} ids drawn uniformly from "
            f"[0, {vocab_size}) with random_state={random_state}"
        )
        corpus = Corpus(ids, description, "random")
    elif isinstance(tokens, str | os.PathLike):
        from pos_geometry._limits import check_regular_file

        path = Path(tokens).expanduser()
        check_regular_file(path, f"the corpus {str(path)!r}")
        if not path.is_file():
            raise InvalidArgumentError(f"corpus file {str(path)!r} does not exist (or is not a file).")
        if path.suffix.lower() == ".npy":
            try:
                raw = np.load(path, allow_pickle=False)
            except ValueError as exc:
                raise InvalidArgumentError(
                    f"{str(path)!r} is not a plain .npy array of token ids ({exc}); save one with np.save."
                ) from None
            ids = _check_ids(
                raw[:n_sequences] if n_sequences else raw, vocab_size, repr(str(path)), min_sequences
            )
            if seq_len is not None:
                ids = _check_ids(ids[:, :seq_len], vocab_size, repr(str(path)), min_sequences)
            kind, what = "npy", f"token ids from {path.name}"
        else:
            length = default_len if seq_len is None else int(seq_len)
            ids = _check_ids(
                _from_text(path, tokenizer, length, n_sequences, min_sequences),
                vocab_size,
                repr(str(path)),
                min_sequences,
            )
            kind, what = "text", f"text {path.name}, tokenised, cut into consecutive contexts"
        corpus = Corpus(ids, f"{what}: {ids.shape[0]} x {ids.shape[1]} (sha256 {_fingerprint(ids)})", kind)
    else:
        raw = tokens.detach().cpu().numpy() if hasattr(tokens, "detach") else np.asarray(tokens)
        ids = _check_ids(
            raw[:n_sequences] if n_sequences else raw, vocab_size, "the token array", min_sequences
        )
        if seq_len is not None:
            ids = _check_ids(ids[:, :seq_len], vocab_size, "the token array", min_sequences)
        corpus = Corpus(
            ids, f"token array: {ids.shape[0]} x {ids.shape[1]} (sha256 {_fingerprint(ids)})", "array"
        )
    if context_length is not None and corpus.seq_len > context_length and not beyond_context:
        raise InvalidArgumentError(
            f"seq_len={corpus.seq_len} is longer than the model's context ({context_length} positions); "
            f"pass seq_len <= {context_length}."
        )
    return corpus
