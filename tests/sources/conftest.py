"""Fixtures that WRITE checkpoints, for the tests of ``pos_geometry.sources`` (formats and hub).

Each fixture returns a plain function (pytest's "factory as fixture" pattern), so any test
in ``tests/sources/`` can ask for it by name:

``write_safetensors(path, tensors: dict[str, Tensor], metadata: dict[str, str] | None = None) -> Path``
    ``safetensors.torch.save_file`` (tensors made contiguous first).

``write_torch_bin(path, tensors: dict[str, Tensor]) -> Path``
    ``torch.save`` of an ``OrderedDict`` state dict: the zip format (zip64 records included),
    exactly what ``pytorch_model.bin`` is. Views are saved with their whole storage.

``hf_gpt2_dir(directory, wpe, *, fmt="safetensors", dtype=torch.float32,
key="transformer.wpe.weight", vocab_size=None) -> Path``
    A Hugging Face GPT-2 model directory around ``wpe`` (numpy array or tensor, shape
    ``(n_positions, d_model)``): ``config.json`` plus weights. The weights hold ``key``
    (the table cast to ``dtype``), a seeded random ``transformer.wte.weight`` of
    ``(vocab_size, d_model)`` (default ``4 * n_positions`` rows, so the file is ~5x the table)
    and ``transformer.ln_f.weight``/``bias``. ``fmt`` is one of ``"safetensors"``
    (``model.safetensors``), ``"bin"`` (``pytorch_model.bin``), ``"sharded-safetensors"``
    or ``"sharded-bin"`` (two shards + ``*.index.json``; the positional table alone in the
    second shard, ``wte``/``ln_f`` in the first). Returns ``directory`` (created if needed).
"""

from __future__ import annotations

import collections
import json
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

HF_FORMATS = ("safetensors", "bin", "sharded-safetensors", "sharded-bin")

# the loopback hub (hub_server.py) and the hand-made torch pickles (torch_pickles.py) beside this file are
# registered as importable modules by tests/conftest.py, for every test folder


def _write_safetensors(path: str | Path, tensors: Mapping[str, torch.Tensor], metadata=None) -> Path:
    path = Path(path)
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path), metadata=metadata)
    return path


def _write_torch_bin(path: str | Path, tensors: Mapping[str, torch.Tensor]) -> Path:
    path = Path(path)
    torch.save(collections.OrderedDict(tensors), path)
    return path


def _hf_gpt2_dir(
    directory: str | Path,
    wpe: np.ndarray | torch.Tensor,
    *,
    fmt: str = "safetensors",
    dtype: torch.dtype = torch.float32,
    key: str = "transformer.wpe.weight",
    vocab_size: int | None = None,
) -> Path:
    if fmt not in HF_FORMATS:
        raise ValueError(f"fmt must be one of {HF_FORMATS}, got {fmt!r}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    table = (torch.from_numpy(np.asarray(wpe)) if not isinstance(wpe, torch.Tensor) else wpe).to(dtype)
    n_positions, d_model = table.shape
    vocab = vocab_size or 4 * n_positions
    gen = torch.Generator().manual_seed(0)
    others = {
        "transformer.wte.weight": torch.randn(vocab, d_model, generator=gen).to(dtype),
        "transformer.ln_f.weight": torch.ones(d_model, dtype=dtype),
        "transformer.ln_f.bias": torch.zeros(d_model, dtype=dtype),
    }
    config = {
        "model_type": "gpt2",
        "architectures": ["GPT2LMHeadModel"],
        "n_positions": n_positions,
        "n_embd": d_model,
        "n_layer": 0,
        "n_head": 1,
        "vocab_size": vocab,
    }
    (directory / "config.json").write_text(json.dumps(config))
    safetensors = fmt.endswith("safetensors")
    write = _write_safetensors if safetensors else _write_torch_bin
    if not fmt.startswith("sharded"):
        write(
            directory / ("model.safetensors" if safetensors else "pytorch_model.bin"), {key: table, **others}
        )
        return directory
    stem, ext = ("model", "safetensors") if safetensors else ("pytorch_model", "bin")
    names = [f"{stem}-0000{i}-of-00002.{ext}" for i in (1, 2)]
    write(directory / names[0], others)
    write(directory / names[1], {key: table})
    weight_map = {k: names[0] for k in others} | {key: names[1]}
    total = sum(t.numel() * t.element_size() for t in [table, *others.values()])
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (directory / f"{stem}.{ext}.index.json").write_text(json.dumps(index))
    return directory


@pytest.fixture
def write_safetensors() -> Callable[..., Path]:
    """``write_safetensors(path, tensors, metadata=None) -> Path`` (see the module docstring)."""
    return _write_safetensors


@pytest.fixture
def write_torch_bin() -> Callable[..., Path]:
    """``write_torch_bin(path, tensors) -> Path``: ``torch.save`` of a state dict (zip format)."""
    return _write_torch_bin


@pytest.fixture
def hf_gpt2_dir() -> Callable[..., Path]:
    """``hf_gpt2_dir(directory, wpe, *, fmt=..., dtype=..., key=..., vocab_size=None) -> Path``."""
    return _hf_gpt2_dir
