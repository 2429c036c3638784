"""A GGUF file's transformers config: its metadata renamed, then built by the architecture's own config class.

A GGUF header holds only what llama.cpp's converter writes: sizes, the rope base, a sliding window,
sometimes a second base for sliding-window layers. Everything else a model's ``config.json`` would say
(which layers are of which type, the per-type rotation, the sliding-window pattern) comes from the
defaults of transformers' config class for that architecture, exactly as transformers' own GGUF loader
gets them (``from_pretrained(..., gguf_file=...)`` builds the class from the renamed metadata). So:

1. **rename**: ``{arch}.<key>`` -> config field, by transformers' own renames for the architecture
   (``transformers.integrations.ggml.GGUF_CONFIG_MAPPING``) and by the meaning gguf's own constants
   give llama.cpp's standard keys (:data:`CONFIG_FIELDS`), for the fields transformers' table leaves
   out (it has no ``rope.freq_base`` for Starcoder2 and no ``attention.key_length`` for Qwen3, so its
   own loader builds those models with the class's default base and head size). Rope scaling becomes
   ``rope_scaling``; special token ids come from the tokenizer metadata (a class default outside the
   file's vocabulary would break the embedding); ``tie_word_embeddings`` from whether ``output.weight``
   exists; transformers' GGUF defaults (``GGUF_CONFIG_DEFAULTS_MAPPING``) fill the rest.
2. **build**: ``transformers.AutoConfig.for_model(model_type, **fields).to_dict()``: the class's
   defaults apply (Gemma-3's layer types and per-type ``rope_parameters``, Gemma-2's alternating
   sliding window), so every path reads the same config a folder's ``config.json`` gives.

The built config is kept on disk (:mod:`pos_geometry._disk_memo`, keyed by the metadata it reads and the
installed transformers), so reading the same model again imports none of transformers' config machinery.

``config["gguf"]`` records the file's own facts and ``config_source``: which transformers version built
it, or why none did (transformers not installed; an architecture transformers has no config class for,
whose config is then the renamed metadata alone, and the atlas or a model built from it say so by
refusing what they cannot derive).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from pos_geometry._disk_memo import recall, remember
from pos_geometry.errors import CheckpointFormatError
from pos_geometry.sources.gguf.header import GGUFHeader, LargeArray

__all__ = ["CONFIG_FIELDS", "MODEL_TYPES", "config_renames", "gguf_config"]

#: llama.cpp's standard ``{arch}.<key>`` (gguf's ``Keys.LLM``/``Keys.Attention``/``Keys.Rope``) -> the
#: transformers config field with the same meaning. transformers' own renames for an architecture are
#: applied on top (they may add a field under another name, e.g. GPT-2's ``n_ctx``).
CONFIG_FIELDS: dict[str, str] = {
    "context_length": "max_position_embeddings",
    "block_count": "num_hidden_layers",
    "feed_forward_length": "intermediate_size",
    "embedding_length": "hidden_size",
    "attention.head_count": "num_attention_heads",
    "attention.head_count_kv": "num_key_value_heads",
    "attention.key_length": "head_dim",
    "rope.freq_base": "rope_theta",
    "rope.freq_base_swa": "rope_local_base_freq",
    "attention.layer_norm_rms_epsilon": "rms_norm_eps",
    "attention.layer_norm_epsilon": "layer_norm_eps",
    "attention.sliding_window": "sliding_window",
    "vocab_size": "vocab_size",
}

#: GGUF ``general.architecture`` -> transformers ``model_type`` where the two differ (as transformers maps them).
MODEL_TYPES: dict[str, str] = {
    "gemma3": "gemma3_text",
    "gemma4": "gemma4_text",
    "qwen2moe": "qwen2_moe",
    "qwen3moe": "qwen3_moe",
    "command-r": "cohere",
    "gpt-oss": "gpt_oss",
    "minimax-m2": "minimax_m2",
}

_SCALING = {  # {arch}.rope.scaling.<key> -> rope_scaling field
    "factor": "factor",
    "original_context_length": "original_max_position_embeddings",
    "yarn_beta_fast": "beta_fast",
    "yarn_beta_slow": "beta_slow",
}

_SPECIAL_TOKENS = {  # tokenizer.ggml.<key> -> config field
    "bos_token_id": "bos_token_id",
    "eos_token_id": "eos_token_id",
    "padding_token_id": "pad_token_id",
}

_TIED_ANYWAY = ("falcon", "bloom")  # transformers ties these whatever the file holds


def config_renames(arch: str, model_type: str) -> dict[str, str | None]:
    """``<key>`` -> config field for ``{arch}.<key>``: transformers' own renames for this architecture
    (``GGUF_CONFIG_MAPPING``; ``None`` or ``-1``: ignored), else :data:`CONFIG_FIELDS`."""
    try:
        from transformers.integrations.ggml import GGUF_CONFIG_MAPPING
    except ImportError:  # transformers is an optional extra
        return dict(CONFIG_FIELDS)
    renames = GGUF_CONFIG_MAPPING.get(model_type, GGUF_CONFIG_MAPPING.get(arch))
    return dict(renames) if renames is not None else dict(CONFIG_FIELDS)


def _as_written(value: Any) -> Any:
    """A float32 metadata value as the decimal it was written from: the shortest decimal that rounds to the
    same float32 (``1e-05``, not ``9.999999747378752e-06``); other values unchanged."""
    if isinstance(value, float) and math.isfinite(value):
        single = np.float32(value)
        if float(single) == value:
            return float(np.format_float_positional(single, unique=True, trim="-"))
    return value


def _renamed(header: GGUFHeader, arch: str, model_type: str) -> dict[str, Any]:
    """The metadata's fields under their config names (step 1 of the module docstring)."""
    fields = header.fields
    config: dict[str, Any] = {"model_type": model_type}
    prefix = f"{arch}."
    ours, theirs = dict(CONFIG_FIELDS), config_renames(arch, model_type)
    for key, value in fields.items():
        if not key.startswith(prefix) or isinstance(value, LargeArray):
            continue
        short = key[len(prefix) :]
        for table in (ours, theirs):
            target = table.get(short)
            if isinstance(target, str):
                config[target] = _as_written(value)
    if config.get("sliding_window") == 0:  # llama.cpp writes 0 for "no sliding window"
        config["sliding_window"] = None
    for field in (
        "num_key_value_heads",
        "num_attention_heads",
    ):  # per-layer counts: transformers keeps the largest
        if isinstance(config.get(field), tuple):
            config[field] = max(config[field])
    tokens = fields.get("tokenizer.ggml.tokens")
    if "vocab_size" not in config and isinstance(tokens, LargeArray | tuple):
        config["vocab_size"] = tokens.count if isinstance(tokens, LargeArray) else len(tokens)
    for key, target in _SPECIAL_TOKENS.items():
        value = fields.get(f"tokenizer.ggml.{key}")
        config[target] = value if isinstance(value, int) and not isinstance(value, bool) else None
    config["tie_word_embeddings"] = "output.weight" not in header.tensors or arch in _TIED_ANYWAY
    rotary = fields.get(f"{arch}.rope.dimension_count")
    hidden, heads = config.get("hidden_size"), config.get("num_attention_heads")
    head_dim = config.get("head_dim") or (hidden // heads if isinstance(hidden, int) and heads else None)
    if isinstance(rotary, int) and isinstance(head_dim, int) and 0 < rotary < head_dim:
        config["partial_rotary_factor"] = rotary / head_dim
    scaling_type = fields.get(f"{arch}.rope.scaling.type")
    if isinstance(scaling_type, str) and scaling_type not in ("", "none"):
        scaling: dict[str, Any] = {"rope_type": scaling_type}
        for key, target in _SCALING.items():
            if f"{arch}.rope.scaling.{key}" in fields:
                scaling[target] = fields[f"{arch}.rope.scaling.{key}"]
        config["rope_scaling"] = scaling
    try:
        from transformers.integrations.ggml import GGUF_CONFIG_DEFAULTS_MAPPING
    except ImportError:
        GGUF_CONFIG_DEFAULTS_MAPPING = {}
    for key, value in GGUF_CONFIG_DEFAULTS_MAPPING.get(
        model_type, GGUF_CONFIG_DEFAULTS_MAPPING.get(arch, {})
    ).items():
        config.setdefault(key, value)
    return config


def _built(config: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """``config`` through transformers' config class for its ``model_type`` (step 2), and what built it."""
    try:
        import transformers
    except ImportError:
        return config, "the GGUF metadata alone (transformers is not installed, so no config class applied)"
    model_type = config["model_type"]
    fields = {k: v for k, v in config.items() if k != "model_type"}
    try:
        built = transformers.AutoConfig.for_model(model_type, **fields)
    except ValueError as exc:
        if model_type in str(exc) and "Unrecognized" in str(exc):
            return config, (
                f"the GGUF metadata alone (transformers {transformers.__version__} has no config class for "
                f"{model_type!r}, so no class defaults applied)"
            )
        raise CheckpointFormatError(
            f"transformers' {model_type} config class refuses this file's metadata: {str(exc)[:300]}"
        ) from None
    except (TypeError, KeyError) as exc:
        raise CheckpointFormatError(
            f"transformers' {model_type} config class refuses this file's metadata: "
            f"{type(exc).__name__}: {str(exc)[:300]}"
        ) from None
    full = built.to_dict()
    full.pop("transformers_version", None)
    full["model_type"] = model_type
    return full, f"transformers {transformers.__version__}'s {type(built).__name__} from the GGUF metadata"


_KIND = "gguf_configs"
_SOURCES = (Path(__file__).resolve(),)


def _inputs(header: GGUFHeader, arch: str, model_type: str) -> str:
    """Everything of the header that :func:`_renamed` reads, as canonical JSON (the key of the built config)."""
    fields = header.fields
    kept = {
        k: v
        for k, v in fields.items()
        if (k.startswith(f"{arch}.") or k.startswith("tokenizer.ggml.")) and not isinstance(v, LargeArray)
    }
    tokens = fields.get("tokenizer.ggml.tokens")
    count = (
        tokens.count if isinstance(tokens, LargeArray) else len(tokens) if isinstance(tokens, tuple) else None
    )
    kept |= {"~model_type": model_type, "~tokens": count, "~output": "output.weight" in header.tensors}
    return json.dumps(kept, sort_keys=True, default=repr)


def gguf_config(header: GGUFHeader, name: str = "") -> dict[str, Any]:
    """The transformers config dict of a GGUF header (see the module docstring).

    ``config["gguf"]`` records the architecture, the file type, the model name, the format version and
    ``config_source`` (what built the config).

    Raises:
        CheckpointFormatError: no ``general.architecture``, a size or rope value that is not one (a head count
            of 0), or transformers' config class refuses the metadata.
    """
    fields = header.fields
    arch = fields.get("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise CheckpointFormatError(f"{name!r} has no general.architecture; it is not a model GGUF file.")
    model_type = MODEL_TYPES.get(arch, arch)
    general_name = fields.get("general.name")
    if arch == "llama" and isinstance(general_name, str) and "mistral" in general_name.lower():
        model_type = "mistral"  # llama.cpp files Mistral under llama; transformers renames it so
    inputs = _inputs(header, arch, model_type)
    answer = recall(_KIND, inputs, _SOURCES)  # the same metadata built before: no transformers import
    if isinstance(answer, list) and len(answer) == 2 and isinstance(answer[0], dict):
        config, source = dict(answer[0]), str(answer[1])
        if isinstance(config.get("id2label"), list):  # stored as pairs: JSON keys are strings, its keys ints
            config["id2label"] = {k: v for k, v in config["id2label"]}
    else:
        renamed = _renamed(header, arch, model_type)
        from pos_geometry._config_values import check_config_values

        keys = {field: f"{arch}.{key}" for key, field in CONFIG_FIELDS.items()} | {
            "rope_scaling": f"{arch}.rope.scaling.type"
        }
        check_config_values(renamed, f"{name!r} (GGUF metadata)", keys)  # before transformers' class reads it
        config, source = _built(renamed)
        labels = config.get("id2label")
        pairs = [[k, v] for k, v in labels.items()] if isinstance(labels, dict) else labels
        remember(
            _KIND, inputs, _SOURCES, [{**config, "id2label": pairs} if labels is not None else config, source]
        )
    config["gguf"] = {
        "architecture": arch,
        "file_type": fields.get("general.file_type"),
        "name": general_name,
        "version": header.version,
        "config_source": source,
    }
    return config
