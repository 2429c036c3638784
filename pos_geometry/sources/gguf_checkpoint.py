"""A GGUF file as a checkpoint: a transformers-style config from its metadata, tensors by their transformers names.

:class:`GGUFWeights` sits where a safetensors :class:`~pos_geometry.sources.weight_file.WeightFile`
sits in a :class:`~pos_geometry.sources.tensor_set.Checkpoint`, so the rotary atlas and ``load``
read a ``.gguf`` file (local, HF cache, or hub range reads) the way they read a model folder:

* **config**: the metadata ``{arch}.<key>`` is renamed to the fields a transformers config has, by
  transformers' own GGUF loader's renames for that architecture (:func:`config_renames`), the
  architecture to a ``model_type`` (:data:`MODEL_TYPES`), and ``{arch}.rope.scaling.*`` to a
  ``rope_scaling`` dict.
* **names**: a transformers key (``model.layers.3.self_attn.q_proj.weight``) is translated by the
  ``gguf`` package's own name table (``gguf.get_tensor_name_map``) to ``blk.3.attn_q.weight``.
* **values**: only the tensor's bytes are read and decoded by ``gguf.quants.dequantize`` (every
  quantisation type the package supports), to float32.
* **row order**: llama.cpp's converter reorders the query/key rows of each head of the
  architectures in :data:`PERMUTED_QK` from transformers' rotate-half order (dims ``i`` and
  ``i + d/2`` form a plane) to adjacent pairs (``2i``, ``2i+1``), for its interleaved rotation
  (``convert_hf_to_gguf.py``, ``LlamaModel.permute``). That is undone on reading, exactly as
  transformers' GGUF loader undoes it (``LlamaTensorProcessor``), so every tensor comes back in the
  layout of the transformers model the config describes. A reader that skipped this would pair
  the wrong rows into every rotation plane.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from pos_geometry.errors import CheckpointFormatError, MissingTensorError
from pos_geometry.sources.byte_source import ByteSource
from pos_geometry.sources.gguf_format import GGUFHeader, LargeArray, read_header

__all__ = [
    "CONFIG_FIELDS",
    "config_renames",
    "MODEL_TYPES",
    "PERMUTED_QK",
    "POSITION_TENSOR",
    "GGUFWeights",
    "gguf_config",
]

POSITION_TENSOR = "position_embd.weight"
"""The GGUF name of a learned absolute position table (gguf's ``MODEL_TENSOR.POS_EMBD``; GPT-2's ``wpe``)."""

#: ``{arch}.<key>`` -> transformers config field, for architectures transformers' GGUF loader does not know.
#: For the others its own per-architecture renames (``GGUF_CONFIG_MAPPING``) are used: they differ by
#: architecture (GPT-2's ``n_ctx``, BLOOM's ``layer_norm_epsilon``, Starcoder2's ``norm_epsilon``).
CONFIG_FIELDS: dict[str, str] = {
    "context_length": "max_position_embeddings",
    "block_count": "num_hidden_layers",
    "feed_forward_length": "intermediate_size",
    "embedding_length": "hidden_size",
    "attention.head_count": "num_attention_heads",
    "attention.head_count_kv": "num_key_value_heads",
    "attention.key_length": "head_dim",
    "rope.freq_base": "rope_theta",
    "attention.layer_norm_rms_epsilon": "rms_norm_eps",
    "attention.layer_norm_epsilon": "layer_norm_eps",
    "attention.sliding_window": "sliding_window",
    "vocab_size": "vocab_size",
}


def config_renames(arch: str, model_type: str) -> dict[str, str | None]:
    """``<key>`` -> config field for ``{arch}.<key>``: transformers' own renames for this architecture
    (``transformers.integrations.ggml.GGUF_CONFIG_MAPPING``), else :data:`CONFIG_FIELDS`."""
    try:
        from transformers.integrations.ggml import GGUF_CONFIG_MAPPING
    except ImportError:  # transformers is an optional extra
        return dict(CONFIG_FIELDS)
    renames = GGUF_CONFIG_MAPPING.get(model_type, GGUF_CONFIG_MAPPING.get(arch))
    return dict(renames) if renames is not None else dict(CONFIG_FIELDS)


#: GGUF ``general.architecture`` -> transformers ``model_type`` where the two differ (as transformers maps them).
MODEL_TYPES: dict[str, str] = {
    "gemma3": "gemma3_text",
    "qwen2moe": "qwen2_moe",
    "qwen3moe": "qwen3_moe",
    "command-r": "cohere",
    "gpt-oss": "gpt_oss",
}

#: GGUF architectures whose q/k rows llama.cpp's converter permutes into adjacent pairs (see the module
#: docstring); transformers' GGUF loader undoes the same permutation for exactly these.
PERMUTED_QK: frozenset[str] = frozenset({"llama"})

_SCALING = {  # {arch}.rope.scaling.<key> -> rope_scaling field
    "factor": "factor",
    "original_context_length": "original_max_position_embeddings",
    "yarn_beta_fast": "beta_fast",
    "yarn_beta_slow": "beta_slow",
}


def gguf_config(header: GGUFHeader, name: str = "") -> dict[str, Any]:
    """A transformers-style config dict from a GGUF header (see the module docstring).

    ``rope.dimension_count`` below the head size becomes ``partial_rotary_factor``; a rope scaling
    type other than ``none`` becomes ``rope_scaling``. ``gguf`` records the file's own facts: the
    architecture, the file type, the model name and the format version (each tensor's quantisation
    is :meth:`GGUFWeights.quantization`).
    """
    fields = header.fields
    arch = fields.get("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise CheckpointFormatError(f"{name!r} has no general.architecture; it is not a model GGUF file.")
    model_type = MODEL_TYPES.get(arch, arch)
    general_name = fields.get("general.name")
    if arch == "llama" and isinstance(general_name, str) and "mistral" in general_name.lower():
        model_type = "mistral"  # llama.cpp files Mistral under llama; transformers renames it so
    config: dict[str, Any] = {"model_type": model_type}
    prefix = f"{arch}."
    renames = config_renames(arch, model_type)
    for key, value in fields.items():
        target = renames.get(key[len(prefix) :]) if key.startswith(prefix) else None
        if target is not None and target != -1 and not isinstance(value, LargeArray):
            config[target] = value
    # per-layer head counts (a tuple): transformers keeps the largest
    for field in ("num_key_value_heads", "num_attention_heads"):
        if isinstance(config.get(field), tuple):
            config[field] = max(config[field])
    if "vocab_size" not in config and isinstance(fields.get("tokenizer.ggml.tokens"), LargeArray | tuple):
        tokens = fields["tokenizer.ggml.tokens"]
        config["vocab_size"] = tokens.count if isinstance(tokens, LargeArray) else len(tokens)
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
    config["gguf"] = {
        "architecture": arch,
        "file_type": fields.get("general.file_type"),
        "name": general_name,
        "version": header.version,
    }
    return config


def _ggml_name(ggml_type: int) -> str:
    from gguf.constants import GGMLQuantizationType

    return GGMLQuantizationType(ggml_type).name


class GGUFWeights:
    """A GGUF file's tensors under their transformers names (a :class:`WeightFile` stand-in).

    Attributes:
        src: the byte source.
        header: the parsed header.
        config: :func:`gguf_config` of it.
        keys: the GGUF tensor names, in file order.
    """

    fmt = "gguf"

    def __init__(self, src: ByteSource) -> None:
        self.src = src
        self.header = read_header(src)
        self.config = gguf_config(self.header, src.name)
        self.arch: str = self.config["gguf"]["architecture"]
        self.keys: tuple[str, ...] = tuple(self.header.tensors)
        self._names: Any = None

    def _name_map(self) -> Any:
        if self._names is None:
            from gguf.constants import MODEL_ARCH_NAMES
            from gguf.tensor_mapping import get_tensor_name_map

            arch = next((a for a, n in MODEL_ARCH_NAMES.items() if n == self.arch), None)
            if arch is None:
                raise CheckpointFormatError(
                    f"{self.src.name!r}: the gguf package installed does not know the architecture {self.arch!r}, "
                    "so its tensor names cannot be translated; upgrade gguf."
                )
            self._names = get_tensor_name_map(arch, int(self.config.get("num_hidden_layers", 0) or 0))
        return self._names

    def gguf_name(self, key: str) -> str | None:
        """The GGUF tensor name of transformers key ``key`` (a GGUF name is kept), or None when absent."""
        if key in self.header.tensors:
            return key
        stem, dot, suffix = key.rpartition(".")
        if suffix not in ("weight", "bias"):
            stem, dot, suffix = key, "", ""
        name = self._name_map().get_name(stem)
        full = f"{name}{dot}{suffix}" if name is not None else None
        return full if full in self.header.tensors else None

    def has(self, key: str) -> bool:
        return self.gguf_name(key) is not None

    def _info(self, key: str) -> Any:
        name = self.gguf_name(key)
        if name is None:
            raise MissingTensorError(
                f"{self.src.name!r} has no tensor for {key!r} (GGUF names it by the gguf package's table; the file "
                f"has {len(self.keys)} tensors, e.g. {', '.join(self.keys[:8])}).",
                keys=self.keys,
            )
        return self.header.tensors[name]

    def quantization(self, key: str) -> str:
        """The ggml type ``key`` is stored in (``"Q4_1"``, ``"F32"``...)."""
        return _ggml_name(self._info(key).ggml_type)

    def shape(self, key: str) -> tuple[int, ...]:
        return self._info(key).shape

    def span(self, key: str) -> None:
        """Quantised rows are not plain arrays: rows are read through :meth:`read_rows`."""
        return None

    def read(self, key: str) -> torch.Tensor:
        """``key`` decoded to float32 in the transformers layout (q/k rows un-permuted where llama.cpp permuted them)."""
        info = self._info(key)
        return self._decode(info, 0, info.shape[0]) if info.shape else torch.empty(0)

    def read_rows(self, key: str, start: int, stop: int) -> torch.Tensor:
        """Rows ``[start, stop)`` of ``key`` along its first dimension: only the bytes of those rows (of the
        whole heads holding them, for a permuted q/k projection) are read and decoded."""
        info = self._info(key)
        heads = self._permuted_heads(info)
        if heads is None:
            return self._decode(info, start, stop)
        size = info.shape[0] // heads
        lo, hi = start // size * size, -(-stop // size) * size
        return self._decode(info, lo, hi)[start - lo : stop - lo]

    def _decode(self, info: Any, start: int, stop: int) -> torch.Tensor:
        from gguf.constants import GGMLQuantizationType
        from gguf.quants import dequantize

        row_bytes = info.n_bytes // info.shape[0]
        raw = np.frombuffer(
            self.src.read(info.offset + start * row_bytes, (stop - start) * row_bytes), np.uint8
        )
        try:
            values = dequantize(raw.reshape(stop - start, row_bytes), GGMLQuantizationType(info.ggml_type))
        except NotImplementedError as exc:
            raise CheckpointFormatError(
                f"{self.src.name!r}: {info.name!r} is stored as {_ggml_name(info.ggml_type)}, which the installed gguf "
                f"package cannot decode ({exc}); upgrade gguf."
            ) from None
        array = np.array(values, dtype=np.float32).reshape(stop - start, *info.shape[1:])
        heads = self._permuted_heads(info)
        if heads is not None:  # whole heads: stored row 2j + s of a head is transformers' row s * half + j
            half = info.shape[0] // heads // 2
            array = array.reshape(-1, half, 2, array.shape[-1]).swapaxes(1, 2).reshape(array.shape)
        return torch.from_numpy(np.ascontiguousarray(array))

    def _permuted_heads(self, info: Any) -> int | None:
        """The number of heads whose rows llama.cpp permuted in this tensor (module docstring), or None."""
        which = info.name.split(".")[-2] if info.name.count(".") >= 2 else ""
        if self.arch not in PERMUTED_QK or len(info.shape) != 2 or which not in ("attn_q", "attn_k"):
            return None
        heads = self.config.get("num_attention_heads" if which == "attn_q" else "num_key_value_heads")
        heads = heads or self.config.get("num_attention_heads")
        if not isinstance(heads, int) or heads < 1 or info.shape[0] % (2 * heads):
            raise CheckpointFormatError(
                f"{self.src.name!r}: {info.name!r} has {info.shape[0]} rows, not a whole number of row pairs for "
                f"{heads!r} heads; the file's head counts and tensors disagree."
            )
        return heads
