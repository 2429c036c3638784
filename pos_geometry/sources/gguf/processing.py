"""What transformers' GGUF tensor processor does to each tensor a reader asks for, remembered per model.

transformers' loader passes every GGUF tensor through its architecture's processor
(``transformers.modeling_gguf_pytorch_utils.TENSOR_PROCESSORS``): Llama's un-permutes the q/k rows llama.cpp's
converter permuted, others transpose, split or offset. That processor is the truth pos_geometry reads by,
but importing it costs most of a second and 60 MiB. So the first read of a tensor kind runs the processor
and compares its output with the two things it usually is, the stored rows unchanged or the converter's
per-head permutation undone (:func:`unpermute_heads`); when the output equals exactly one of them, that
effect is remembered on disk (:mod:`pos_geometry._disk_memo`, keyed by the architecture, the tensor's
name with its block number dropped, the rows' shape, the heads they hold, the processor's class and the
model's config). Later reads of that kind apply the remembered effect without importing transformers; a
processor that does anything else is run every time.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from pos_geometry._disk_memo import recall, remember

__all__ = ["EFFECTS", "as_tensor", "learn_effect", "processor_name", "recalled_effect", "unpermute_heads"]

EFFECTS = ("unchanged", "heads_unpermuted")
"""The effects that are remembered (anything else runs the processor)."""

_SOURCES = (Path(__file__).resolve(),)
_BLOCK = re.compile(r"^blk\.\d+\.")


def processor_name(arch: str) -> str | None:
    """The class name of transformers' tensor processor for GGUF architecture ``arch`` (None: it has none, or
    transformers is not installed), remembered so that asking again imports nothing."""
    inputs = json.dumps({"arch": arch})
    answer = recall("gguf_processors", inputs, _SOURCES)
    if isinstance(answer, dict) and "name" in answer:
        return answer["name"]
    try:
        from transformers.modeling_gguf_pytorch_utils import TENSOR_PROCESSORS
    except ImportError:
        return None
    cls = TENSOR_PROCESSORS.get(arch)
    name = None if cls is None else cls.__name__
    remember("gguf_processors", inputs, _SOURCES, {"name": name})
    return name


def _inputs(
    arch: str, processor: str, name: str, shape: tuple[int, ...], heads: int | None, config: dict
) -> str:
    kind = _BLOCK.sub("blk.#.", name)
    return json.dumps(
        {"arch": arch, "processor": processor, "tensor": kind, "shape": list(shape), "heads": heads,
         "config": config},
        sort_keys=True, default=repr,
    )  # fmt: skip


def recalled_effect(arch: str, processor: str, name: str, shape: tuple[int, ...], heads: int | None,
                    config: dict) -> str | None:  # fmt: skip
    """The remembered effect (one of :data:`EFFECTS`) of the processor on these rows, or None."""
    answer = recall("gguf_effects", _inputs(arch, processor, name, shape, heads, config), _SOURCES)
    return answer if answer in EFFECTS else None


def learn_effect(arch: str, processor: str, name: str, array: np.ndarray, heads: int | None, config: dict,
                 out: np.ndarray) -> None:  # fmt: skip
    """Remember what the processor made of ``array`` (``out``) when it is exactly one of :data:`EFFECTS`."""
    if out.shape != array.shape:
        return
    same = [
        effect
        for effect, candidate in (
            ("unchanged", array),
            ("heads_unpermuted", unpermute_heads(array, heads) if heads is not None else None),
        )
        if candidate is not None
        and np.array_equal(np.asarray(out, np.float32), np.asarray(candidate, np.float32))
    ]
    if len(same) == 1:
        remember(
            "gguf_effects", _inputs(arch, processor, name, array.shape, heads, config), _SOURCES, same[0]
        )


def unpermute_heads(array: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's q/k permutation undone: stored row ``2j + s`` of each of ``heads`` heads becomes row
    ``s · half + j`` (``array`` ``(heads · 2 · half, ...)``)."""
    half = array.shape[0] // heads // 2
    return array.reshape(-1, half, 2, *array.shape[1:]).swapaxes(1, 2).reshape(array.shape)


def as_tensor(values: Any) -> Any:
    """``values`` as a contiguous float32 torch tensor."""
    import torch

    return torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32))
