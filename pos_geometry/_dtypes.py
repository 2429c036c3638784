"""The one dtype-name helper: ``torch.float16`` -> ``"float16"`` (provenance, messages, file metadata)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = ["dtype_name"]


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.float16`` -> ``"float16"``; ``torch.bfloat16`` -> ``"bfloat16"``."""
    return str(dtype).removeprefix("torch.")
