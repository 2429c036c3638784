"""A GGUF file as a checkpoint: a transformers-style config from its metadata, tensors by their transformers names.

:class:`GGUFWeights` sits where a safetensors :class:`~pos_geometry.sources.weight_file.WeightFile`
sits in a :class:`~pos_geometry.sources.tensor_set.Checkpoint`, so the rotary atlas and ``load``
read a ``.gguf`` file (local, HF cache, or hub range reads) the way they read a model folder:

* **config**: :func:`~pos_geometry.sources.gguf.config.gguf_config`: the metadata renamed as
  transformers renames it, built by the architecture's own transformers config class (its defaults,
  such as Gemma-3's layer types and per-type bases, apply).
* **names**: a transformers key (``model.layers.3.self_attn.q_proj.weight``) is translated by the
  ``gguf`` package's own name table (``gguf.get_tensor_name_map``) to ``blk.3.attn_q.weight``.
* **values**: only the tensor's bytes are read and decoded by ``gguf.quants.dequantize`` (every
  quantisation type the package supports), to float32.
* **corrections**: llama.cpp's converter changes some tensors on the way in: it permutes the
  query/key rows of each Llama head from rotate-half order (dims ``i`` and ``i + d/2`` form a plane)
  into adjacent pairs (``LlamaModel.permute``), stores Gemma's norm gains with the ``1 +`` added,
  transposes GPT-2's Conv1D weights. Every tensor read goes through transformers' own GGUF tensor
  processor for the architecture (``TENSOR_PROCESSORS``, the code ``from_pretrained(gguf_file=...)``
  runs), so it comes back in the layout and with the values of the transformers model the config
  describes. A reader that skipped this would pair the wrong rows into every rotation plane, or count
  a norm's offset twice.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from pos_geometry.errors import CheckpointFormatError, MissingTensorError
from pos_geometry.sources.byte_source import ByteSource
from pos_geometry.sources.gguf.config import gguf_config
from pos_geometry.sources.gguf.header import read_header
from pos_geometry.sources.gguf.processing import (
    as_tensor,
    learn_effect,
    processor_name,
    recalled_effect,
    unpermute_heads,
)

__all__ = ["PERMUTED_QK", "POSITION_TENSOR", "GGUFWeights", "tensor_processor"]

POSITION_TENSOR = "position_embd.weight"
"""The GGUF name of a learned absolute position table (gguf's ``MODEL_TENSOR.POS_EMBD``; GPT-2's ``wpe``)."""

#: transformers' tensor processors that change a tensor's rows as a whole (a permutation within each head,
#: a transpose, a per-head regrouping): a row range of such a tensor is read whole (or, for Llama's per-head
#: permutation, as whole heads) before processing. Every other processor acts element by element.
_WHOLE_TENSOR = frozenset({"LlamaTensorProcessor", "BloomTensorProcessor", "GPT2TensorProcessor"})


def tensor_processor(arch: str, config: dict[str, Any]) -> Any:
    """transformers' own GGUF tensor processor for ``arch`` (``TENSOR_PROCESSORS``), or None when it has none
    or transformers is not installed (then only llama's q/k permutation is undone, by :data:`PERMUTED_QK`)."""
    try:
        from transformers.modeling_gguf_pytorch_utils import TENSOR_PROCESSORS
    except ImportError:
        return None
    cls = TENSOR_PROCESSORS.get(arch)
    return None if cls is None else cls(config=dict(config))


#: GGUF architectures whose q/k rows llama.cpp's converter permutes into adjacent pairs, undone here only
#: when transformers (whose ``LlamaTensorProcessor`` undoes them otherwise) is not installed.
PERMUTED_QK: frozenset[str] = frozenset({"llama"})


_UNSET = object()


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
        self._tensor_processor: Any = _UNSET

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
            blocks = self.header.fields.get(f"{self.arch}.block_count")
            blocks = blocks if isinstance(blocks, int) and not isinstance(blocks, bool) and blocks > 0 else 0
            self._names = get_tensor_name_map(arch, blocks)
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
        """``key`` decoded to float32 in the transformers layout (transformers' own tensor processor for this
        architecture applied: q/k rows un-permuted, norm offsets taken back out, transposes undone)."""
        info = self._info(key)
        return (
            self._processed(info, self._decode(info, 0, info.shape[0]), None)
            if info.shape
            else torch.empty(0)
        )

    def read_rows(self, key: str, start: int, stop: int) -> torch.Tensor:
        """Rows ``[start, stop)`` of ``key`` along its first dimension (after processing): only the bytes of
        those rows are read, of the whole heads holding them for a per-head permuted q/k projection, and of the
        whole tensor for a processor that moves rows across the tensor."""
        info = self._info(key)
        heads = self._permuted_heads(info)
        if heads is not None:
            size = info.shape[0] // heads
            lo, hi = start // size * size, -(-stop // size) * size
            return self._processed(info, self._decode(info, lo, hi), (hi - lo) // size)[
                start - lo : stop - lo
            ]
        if processor_name(self.arch) in _WHOLE_TENSOR:
            return self.read(key)[start:stop]
        return self._processed(info, self._decode(info, start, stop), None)

    @property
    def _processor(self) -> Any:
        if self._tensor_processor is _UNSET:
            self._tensor_processor = tensor_processor(self.arch, self.config)
        return self._tensor_processor

    def _processed(self, info: Any, array: np.ndarray, heads: int | None) -> torch.Tensor:
        """``array`` (rows of ``info``) through transformers' tensor processor; ``heads``: the number of whole
        q/k heads the rows hold, for the per-head permutation. Without transformers, llama's q/k permutation
        is undone here by the converter's formula (module docstring)."""
        name = processor_name(self.arch)
        if name is None:  # no processor (or no transformers): llama's permutation undone by the formula
            return torch.from_numpy(
                np.ascontiguousarray(array if heads is None else unpermute_heads(array, heads))
            )
        whole = self._permuted_heads(info) if heads is None and array.shape == info.shape else heads
        effect = recalled_effect(self.arch, name, info.name, array.shape, whole, self.config)
        if effect is not None and (effect == "unchanged" or whole is not None):  # learnt on an earlier read
            return as_tensor(array if effect == "unchanged" else unpermute_heads(array, whole))
        processor = self._processor
        stored, array = array, array.copy()  # (the processor may work in place)
        if heads is not None:  # the processor permutes per head: tell it how many heads these rows hold
            processor = type(processor)(config={**processor.config, "num_attention_heads": heads,
                                                "num_key_value_heads": heads})  # fmt: skip
        parsed: dict[str, Any] = {"tensors": {}}
        out = processor.process(array, info.name, parsed_parameters=parsed, tensor_key_mapping=None)
        values = out.weights if out.name is not None else next(iter(parsed["tensors"].values()), None)
        if values is None:
            raise CheckpointFormatError(
                f"{self.src.name!r}: transformers' {type(processor).__name__} does not turn {info.name!r} into one "
                "tensor (it merges it with others), so it cannot be read on its own."
            )
        values = values.numpy() if isinstance(values, torch.Tensor) else values
        learn_effect(self.arch, name, info.name, stored, whole, self.config, np.asarray(values))
        return as_tensor(values)

    def _decode(self, info: Any, start: int, stop: int) -> np.ndarray:
        """Rows ``[start, stop)`` of ``info`` as stored (dequantised to float32, before any processing)."""
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
        return np.array(values, dtype=np.float32).reshape(stop - start, *info.shape[1:])

    def _permuted_heads(self, info: Any) -> int | None:
        """The number of heads whose rows llama.cpp permuted in this tensor (module docstring), or None."""
        which = info.name.split(".")[-2] if info.name.count(".") >= 2 else ""
        name = processor_name(self.arch)
        permuted = name == "LlamaTensorProcessor" if name is not None else self.arch in PERMUTED_QK
        if not permuted or len(info.shape) != 2 or which not in ("attn_q", "attn_k"):
            return None
        heads = self.config.get("num_attention_heads" if which == "attn_q" else "num_key_value_heads")
        heads = heads or self.config.get("num_attention_heads")
        if not isinstance(heads, int) or heads < 1 or info.shape[0] % (2 * heads):
            raise CheckpointFormatError(
                f"{self.src.name!r}: {info.name!r} has {info.shape[0]} rows, not a whole number of row pairs for "
                f"{heads!r} heads; the file's head counts and tensors disagree."
            )
        return heads
