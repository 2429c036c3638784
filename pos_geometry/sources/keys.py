"""Which checkpoint key holds the positional (or token) embedding table.

Known keys are tried in order of preference; failing that, a key whose last name
component is a known table name (``...wpe.weight``, ``...embed_positions.weight``, ``wpe``) is taken (the shortest such key, ties broken alphabetically, so the choice is
deterministic); failing that, :class:`MissingTensorError` lists the keys the file has.
"""

from __future__ import annotations

from collections.abc import Iterable

from pos_geometry.errors import MissingTensorError
from pos_geometry.sources.tensor_record import Which, check_which

__all__ = ["POSITION_KEYS", "TOKEN_KEYS", "POSITION_NAMES", "TOKEN_NAMES", "find_key", "select_key"]

POSITION_KEYS: tuple[str, ...] = (
    "wpe.weight",  # GPT-2 / GPT-Neo saved from the bare model
    "transformer.wpe.weight",  # GPT-2, GPT-Neo, GPT-J-style LM heads
    "model.decoder.embed_positions.weight",  # OPT (rows 0-1 are an offset, dropped by the loader)
    "decoder.embed_positions.weight",  # OPT bare model
    "embeddings.position_embeddings.weight",  # BERT / RoBERTa bare model
    "bert.embeddings.position_embeddings.weight",
    "roberta.embeddings.position_embeddings.weight",
    "distilbert.embeddings.position_embeddings.weight",
    "electra.embeddings.position_embeddings.weight",
    "transformer.positions_embed.weight",  # GPT-1 (openai-gpt)
    "positions_embed.weight",
    "transformer.embed_positions.weight",
    "model.embed_positions.weight",
)

TOKEN_KEYS: tuple[str, ...] = (
    "wte.weight",
    "transformer.wte.weight",
    "model.decoder.embed_tokens.weight",
    "decoder.embed_tokens.weight",
    "embeddings.word_embeddings.weight",
    "bert.embeddings.word_embeddings.weight",
    "roberta.embeddings.word_embeddings.weight",
    "transformer.tokens_embed.weight",
    "tokens_embed.weight",
    "gpt_neox.embed_in.weight",
    "embed_in.weight",
    "model.embed_tokens.weight",
    "embed_tokens.weight",
    "transformer.word_embeddings.weight",
)

# last name component (before an optional ".weight") of keys that hold such a table
POSITION_NAMES: tuple[str, ...] = (
    "wpe",
    "embed_positions",
    "position_embeddings",
    "positions_embed",
    "position_embedding",
    "positional_embedding",
    "pos_embed",
)
TOKEN_NAMES: tuple[str, ...] = (
    "wte",
    "embed_tokens",
    "word_embeddings",
    "tokens_embed",
    "embed_in",
    "token_embedding",
)

_MAX_LISTED = 20


def _stem(key: str) -> str:
    """``"model._orig_mod.transformer.wpe.weight"`` -> ``"wpe"``; ``"wpe"`` -> ``"wpe"``."""
    return key.removesuffix(".weight").rsplit(".", 1)[-1]


def listing(keys: tuple[str, ...]) -> str:
    shown = ", ".join(keys[:_MAX_LISTED])
    more = f", ... ({len(keys) - _MAX_LISTED} more)" if len(keys) > _MAX_LISTED else ""
    return f"{len(keys)} keys: {shown}{more}" if keys else "no tensors at all"


def _missing(keys: tuple[str, ...], which: Which, source: str, asked: str | None) -> MissingTensorError:
    where = f" in {source}" if source else ""
    if asked is not None:
        msg = f"The checkpoint{where} has no tensor {asked!r}; it has {listing(keys)}. Pass one of these as key=."
    else:
        table = "positional-embedding" if which == "position" else "token-embedding"
        names = POSITION_NAMES if which == "position" else TOKEN_NAMES
        msg = (
            f"No {table} table found{where}: none of the known keys and no key named like "
            f"{' / '.join(names)}; it has {listing(keys)}. If the table is stored under another "
            "name, pass key='<that name>'."
        )
        if which == "position":
            msg += " Models with rotary or sinusoidal positions (GPT-NeoX, Llama, Mistral) have no learned table."
    return MissingTensorError(msg, keys=keys)


def find_key(
    keys: Iterable[str], which: Which = "position", *, preferred: str | None = None, source: str = ""
) -> str:
    """The key holding the ``which`` table among ``keys``.

    ``preferred`` is taken when present (a hint: when absent the search goes on);
    else the first of :data:`POSITION_KEYS` / :data:`TOKEN_KEYS` present; else the
    shortest key whose last name (before ``.weight``) is in :data:`POSITION_NAMES` /
    :data:`TOKEN_NAMES` (so a bare ``"wpe"`` in an ``.npz`` is found). ``source`` names the file in the error.

    Raises:
        MissingTensorError: nothing matches; the message lists (up to 20 of) the keys.
    """
    check_which(which)
    present = tuple(keys)
    have = set(present)
    if preferred is not None and preferred in have:
        return preferred
    known = POSITION_KEYS if which == "position" else TOKEN_KEYS
    for k in known:
        if k in have:
            return k
    names = POSITION_NAMES if which == "position" else TOKEN_NAMES
    matches = [k for k in present if _stem(k) in names]
    if matches:
        return min(matches, key=lambda k: (len(k), k))
    raise _missing(present, which, source, None)


def select_key(
    keys: Iterable[str],
    which: Which = "position",
    key: str | None = None,
    source: str = "",
    preferred: str | None = None,
) -> str:
    """Like :func:`find_key` (``preferred`` is its hint), but an explicit ``key`` is strict: it must be present.

    The readers use this, so ``key="x"`` never silently returns some other tensor.
    """
    present = tuple(keys)
    if key is None:
        return find_key(present, which, preferred=preferred, source=source)
    check_which(which)
    if key not in set(present):
        raise _missing(present, which, source, key)
    return key
