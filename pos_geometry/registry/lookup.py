"""Looking models up in the table: names, aliases, suggestions, revisions, kinds.

The table (:mod:`~pos_geometry.registry.table`) is parsed into :class:`ModelSpec` rows
once, on first use. Names are matched case-insensitively against each row's name, hub
repo id and aliases; a miss raises :class:`UnknownModelError` carrying the closest
known names.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from functools import cache
from typing import Any

from pos_geometry._names import check_revision_name
from pos_geometry.errors import (
    InvalidArgumentError,
    NoLearnedTableError,
    RevisionNotFoundError,
    UnknownModelError,
)
from pos_geometry.registry.schedules import parse_checkpoint
from pos_geometry.registry.spec import ModelSpec
from pos_geometry.registry.table import FAMILY_DEFAULTS, ROWS

__all__ = [
    "table_records",
    "get_spec",
    "find_spec",
    "all_specs",
    "known_names",
    "suggest",
    "revisions",
    "check_revision",
    "kind_from_config",
    "LEARNED_MODEL_TYPES",
    "ROTARY_MODEL_TYPES",
    "ALIBI_MODEL_TYPES",
    "NO_TABLE_MODEL_TYPES",
    "SINUSOIDAL_MODEL_TYPES",
    "ROW_OFFSET_BY_MODEL_TYPE",
    "row_offset_from_config",
]


# --- the parsed table ---------------------------------------------------------
_SEARCHED = ("name", "repo_id", "family", "kind", "model_type")


def table_records(contains: str | None = None) -> tuple[dict[str, Any], ...]:
    """Every row of the model table as a plain dict of :class:`ModelSpec` fields, in table order: the
    family's defaults merged under the row, and the row offset derived from its ``model_type``.

    ``contains``: keep only rows where it occurs (any case) in the name, an alias, the repo id, the
    family, the kind or the model_type. Builds no :class:`ModelSpec`, so it needs no torch
    (``pos-geometry models FILTER`` lists these).
    """
    needle = _norm(contains) if contains is not None else ""
    out = []
    for row in ROWS:
        record = {**FAMILY_DEFAULTS.get(row.get("family", ""), {}), **row}
        if record.get("kind") == "learned" and "row_offset" not in record:
            record["row_offset"] = row_offset_from_config({"model_type": record.get("model_type", "")})
        fields = [str(record.get(f, "")) for f in _SEARCHED] + list(record.get("aliases", ()))
        if not needle or any(needle in field.lower() for field in fields):
            out.append(record)
    return tuple(out)


@cache
def all_specs() -> tuple[ModelSpec, ...]:
    """Every row of the model table, in table order."""
    return tuple(ModelSpec.from_record(record) for record in table_records())


def _norm(name: str) -> str:
    return name.strip().lower()


def _squash(name: str) -> str:
    """Lower case without separators: ``"GPT-2"`` -> ``"gpt2"``, ``"pythia_70m"`` -> ``"pythia70m"``."""
    return re.sub(r"[\s._-]+", "", _norm(name))


@cache
def _index() -> dict[str, ModelSpec]:
    index: dict[str, ModelSpec] = {}
    for spec in all_specs():
        for key in spec.keys:
            k = _norm(key)
            other = index.get(k)
            if other is not None and other is not spec:
                raise InvalidArgumentError(
                    f"model table: {key!r} names both {other.name!r} and {spec.name!r}; "
                    "every name, repo id and alias must be unique. Fix registry/table.py."
                )
            index[k] = spec
    return index


def known_names() -> tuple[str, ...]:
    """The canonical name of every row, in table order."""
    return tuple(spec.name for spec in all_specs())


def find_spec(name: str) -> ModelSpec | None:
    """The row known as ``name`` (canonical name, alias or repo id, any case), or None."""
    if not isinstance(name, str):
        return None
    return _index().get(_norm(name))


def suggest(name: str, n: int = 3) -> tuple[str, ...]:
    """Up to ``n`` known names closest to ``name``, best first.

    Names equal to ``name`` once case and separators are ignored come first
    (``"GPT-2"`` -> ``gpt2``); then :func:`difflib.get_close_matches` over every
    name, alias and repo id; then names that start with ``name`` (``"bert"`` ->
    ``bert-base-uncased``). Reported as canonical names.
    """
    index = _index()
    out: list[str] = []
    squashed = _squash(name)
    for key, spec in index.items():
        if _squash(key) == squashed and spec.name not in out:
            out.append(spec.name)
    for key in difflib.get_close_matches(_norm(name), list(index), n=3 * n, cutoff=0.6):
        if index[key].name not in out:
            out.append(index[key].name)
    if squashed:
        for key, spec in index.items():
            if _squash(key).startswith(squashed) and spec.name not in out:
                out.append(spec.name)
    return tuple(out[:n])


def get_spec(name: str) -> ModelSpec:
    """The row known as ``name``; :class:`UnknownModelError` (with suggestions) when there is none."""
    if not isinstance(name, str) or not name.strip():
        raise UnknownModelError(
            f"a model name must be a non-empty string such as 'gpt2' or 'EleutherAI/pythia-70m'; got {name!r}.",
            name=str(name),
        )
    spec = find_spec(name)
    if spec is not None:
        return spec
    hints = suggest(name)
    did_you_mean = f" Did you mean {', '.join(repr(h) for h in hints)}?" if hints else ""
    raise UnknownModelError(
        f"{name!r} is not in the model table ({len(all_specs())} models).{did_you_mean} "
        "`pos-geometry models` (or pos_geometry.registry.known_names()) lists every name; a hub repo id or a "
        "local path that is not in the table can still be loaded directly.",
        name=name,
        suggestions=hints,
    )


# --- revisions ------------------------------------------------------------------
def _as_spec(spec_or_name: ModelSpec | str) -> ModelSpec:
    return spec_or_name if isinstance(spec_or_name, ModelSpec) else get_spec(spec_or_name)


def revisions(spec_or_name: ModelSpec | str) -> tuple[str, ...]:
    """Every published revision of a row: its checkpoint schedule, or ``("main",)`` without one."""
    spec = _as_spec(spec_or_name)
    schedule = spec.schedule
    return schedule.revisions if schedule is not None else (spec.default_revision,)


def check_revision(spec: ModelSpec | str, revision: str | None) -> str:
    """The revision to load for ``spec``: ``revision``, or the row's default when None.

    For a row with a checkpoint schedule, a checkpoint-style revision (``checkpoint-N`` /
    ``stepN``) must be one that was published, with the row's own prefix; otherwise
    :class:`RevisionNotFoundError` names the nearest valid ones. Any other string (a
    branch, tag or commit hash) is returned unchanged for the hub to validate.
    """
    spec = _as_spec(spec)
    if revision is None:
        return spec.default_revision
    if not isinstance(revision, str) or not revision.strip():
        raise InvalidArgumentError(
            f"revision must be a non-empty string (a branch, tag, commit hash or checkpoint name) or None; "
            f"got {revision!r}."
        )
    check_revision_name(revision)
    schedule = spec.schedule
    parsed = parse_checkpoint(revision)
    if schedule is None or parsed is None or revision in schedule:
        return revision
    prefix, step = parsed
    nearest = schedule.nearest(step)
    if prefix != schedule.prefix:
        rule = f"{spec.name}'s checkpoints are named '{schedule.prefix}N', not '{prefix}N'"
        if schedule.revision(step) in schedule:
            nearest = (schedule.revision(step),)
    else:
        rule = f"{spec.name} has no checkpoint at step {step}"
    raise RevisionNotFoundError(
        f"revision {revision!r} does not exist: {rule} ({len(schedule)} checkpoints, "
        f"{schedule.revisions[0]}..{schedule.revisions[-1]}). Use {' or '.join(nearest)}; "
        f"pos_geometry.registry.revisions({spec.name!r}) lists them all."
    )


# --- kind detection from a config.json -------------------------------------------
LEARNED_MODEL_TYPES: frozenset[str] = frozenset(
    {
        "gpt2",
        "openai-gpt",
        "opt",
        "gpt_neo",
        "bert",
        "roberta",
        "distilbert",
        "xlm-roberta",
        "electra",
        "camembert",
        "albert",
        "gpt_bigcode",
        "biogpt",
        "bart",
        "mvp",
        "plbart",
        "roberta-prelayernorm",
        "xlm-roberta-xl",
        "longformer",
        "ibert",
        "xmod",
        "mpnet",
        "mbart",
        "ernie",
        "data2vec-text",
    }
)
ROTARY_MODEL_TYPES: frozenset[str] = frozenset(
    {
        "gpt_neox",
        "gpt_neox_japanese",
        "gptj",
        "codegen",
        "llama",
        "mistral",
        "mixtral",
        "qwen2",
        "qwen2_moe",
        "qwen3",
        "qwen3_moe",
        "gemma",
        "gemma2",
        "gemma3_text",
        "phi",
        "phi3",
        "stablelm",
        "olmo",
        "olmo2",
        "persimmon",
        "starcoder2",
        "cohere",
        "internlm2",
        "deepseek_v2",
        "granite",
        "falcon",
    }
)
ALIBI_MODEL_TYPES: frozenset[str] = frozenset({"bloom"})
NO_TABLE_MODEL_TYPES: frozenset[str] = frozenset({"t5", "mt5", "transfo-xl", "xlnet"})
#: Models whose positions come from a fixed sinusoidal table (a non-persistent buffer, or frozen
#: weights computed from the formula), not a learned one: ``transformers``' ``*SinusoidalPositionalEmbedding``.
SINUSOIDAL_MODEL_TYPES: frozenset[str] = frozenset(
    {"xglm", "m2m_100", "nllb-moe", "speech_to_text", "marian", "pegasus", "pegasus_x", "fsmt"}
)
#: Leading rows of a learned table that are not positions, by ``model_type``: a number of rows, or the
#: name of the config field whose value + 1 it is (RoBERTa-style tables start at ``padding_idx + 1``).
#: The number-valued entries are ``transformers``' ``*LearnedPositionalEmbedding.offset`` (fairseq's 2).
ROW_OFFSET_BY_MODEL_TYPE: Mapping[str, int | str] = {
    "opt": 2,
    "bart": 2,
    "mbart": 2,
    "biogpt": 2,
    "mvp": 2,
    "plbart": 2,
    "roberta": "pad_token_id",
    "roberta-prelayernorm": "pad_token_id",
    "xlm-roberta": "pad_token_id",
    "xlm-roberta-xl": "pad_token_id",
    "camembert": "pad_token_id",
    "data2vec-text": "pad_token_id",
    "longformer": "pad_token_id",
    "ibert": "pad_token_id",
    "xmod": "pad_token_id",
    "mpnet": "pad_token_id",
}

_ROTARY_FIELDS = (
    "rope_parameters",
    "rope_theta",
    "rotary_emb_base",
    "rotary_pct",
    "partial_rotary_factor",
    "rotary_dim",
    "rope_scaling",
)
_LEARNED_FIELDS = ("n_positions", "n_ctx", "max_position_embeddings")


def _alibi(config: Mapping[str, Any]) -> bool:
    if config.get("alibi"):  # falcon-style
        return True
    attn = config.get("attn_config")  # mpt-style
    return isinstance(attn, Mapping) and bool(attn.get("alibi"))


def kind_from_config(config: Mapping[str, Any]) -> str:
    """``"learned"`` or ``"rotary"``: how the model described by a config.json encodes position.

    Decided by ``model_type`` when it is a known one, else by which fields are present.
    Models with no positional table of either kind (ALiBi: BLOOM, MPT or Falcon with
    ``alibi``; relative position biases: T5; BERT-likes with a relative
    ``position_embedding_type``; fixed sinusoidal tables: XGLM, Marian, Pegasus, M2M-100 ...)
    raise :class:`NoLearnedTableError`, as does a config with no positional information at all.
    """
    if not isinstance(config, Mapping):
        raise InvalidArgumentError(
            f"config must be a mapping (the parsed config.json); got {type(config).__name__}."
        )
    model_type = str(config.get("model_type", "")).lower()
    label = f"model_type {model_type!r}" if model_type else "a config without model_type"
    if model_type in ALIBI_MODEL_TYPES or _alibi(config):
        raise NoLearnedTableError(
            f"{label} uses ALiBi attention biases: it has no positional embedding table, learned or rotary. "
            "There is nothing for pos_geometry to load; pick a model with learned or rotary positions."
        )
    if model_type in SINUSOIDAL_MODEL_TYPES:
        raise NoLearnedTableError(
            f"{label} uses a fixed sinusoidal positional table, not a learned one, so there is no learned "
            "matrix to load. For the analytic table use pos_geometry.sinusoidal(n_positions, d_model)."
        )
    if model_type in NO_TABLE_MODEL_TYPES:
        raise NoLearnedTableError(
            f"{label} encodes position with relative attention biases, not an embedding table; "
            "there is no positional matrix to load."
        )
    pet = config.get("position_embedding_type")
    if isinstance(pet, str) and pet not in ("absolute", "rope", "rotary"):
        raise NoLearnedTableError(
            f"{label} has position_embedding_type={pet!r} (relative positions): its absolute table is not "
            "used by the model. Only position_embedding_type='absolute' models have a meaningful table."
        )
    if model_type == "mpt":
        if config.get("learned_pos_emb", True):
            return "learned"
        raise NoLearnedTableError(
            f"{label} has learned_pos_emb=false and no alibi: it has no positional table."
        )
    if model_type in ROTARY_MODEL_TYPES or pet in ("rope", "rotary"):
        return "rotary"
    if model_type in LEARNED_MODEL_TYPES:
        return "learned"
    if any(config.get(f) is not None for f in _ROTARY_FIELDS):
        return "rotary"
    if any(config.get(f) is not None for f in _LEARNED_FIELDS):
        return "learned"
    raise NoLearnedTableError(
        f"cannot tell how {label} encodes position: it has none of the fields {_ROTARY_FIELDS + _LEARNED_FIELDS}. "
        "If the model has a learned table, load the checkpoint file with an explicit tensor key; if it is "
        "rotary, build the table with pos_geometry.encodings.rotary_embedding from the rotary parameters."
    )


def row_offset_from_config(config: Mapping[str, Any]) -> int:
    """Leading rows of the stored learned table that are not positions, for a config.json dict.

    2 for OPT, BART, mBART, BioGPT, MVP and PLBart (fairseq's offset); ``pad_token_id + 1`` for
    RoBERTa-style encoders (XLM-R, CamemBERT, Longformer, MPNet ...; 2 with the usual
    ``pad_token_id`` of 1); 0 otherwise.

    >>> row_offset_from_config({"model_type": "opt"}), row_offset_from_config({"model_type": "gpt2"})
    (2, 0)
    """
    if not isinstance(config, Mapping):
        raise InvalidArgumentError(
            f"config must be a mapping (the parsed config.json); got {type(config).__name__}."
        )
    rule = ROW_OFFSET_BY_MODEL_TYPE.get(str(config.get("model_type", "")).lower(), 0)
    if isinstance(rule, int):
        return rule
    value = config.get(rule)
    value = 1 if value is None else value
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgumentError(
            f"config {rule} must be a non-negative integer (the padding row; positions start after it); "
            f"got {value!r}. Fix the config.json."
        )
    return value + 1
