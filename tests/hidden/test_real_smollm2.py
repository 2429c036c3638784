"""The real SmolLM2-135M-Instruct (GGUF, Q4_1) run end to end: loss, hidden positions, attention by offset.

The model is read from ../shared/data/real_models (skipped when absent, never copied). Measured on this
machine (2 cores, the figures the assertions are built on):

* next-token loss on the opening of *A Tale of Two Cities* (tests/data/paragraph.txt, 220 tokens of the
  GGUF's own tokenizer): 2.840 nats with the q/k rows in transformers' order, 4.943 with them left in
  llama.cpp's stored order (the pairing every rotation plane gets wrong): +2.10 nats;
* 8 random-token contexts of 64: layer 0's positional share 0.1252 sits on its sampling floor 0.1231;
  layers 4, 15 and 30 reach 0.64, 0.85 and 0.55, but position 0's norm is 27-49x the median there, and
  with positions 0-1 left out every layer is back at its floor (0.127-0.155 vs 0.103-0.122).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import pos_geometry as pg

pytestmark = pytest.mark.slow
DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def smollm2(smollm2_gguf):
    from pos_geometry.sources.gguf.model import gguf_model

    return gguf_model(smollm2_gguf)


@pytest.fixture(scope="module")
def paragraph() -> torch.Tensor:
    return torch.tensor([json.loads((DATA / "paragraph_smollm2_ids.json").read_text())["ids"]])


def _converter_order(w: torch.Tensor, n_head: int) -> torch.Tensor:
    """llama.cpp's stored row order of a q/k projection (each head's rotate-half rows as adjacent pairs)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, w.shape[1]).transpose(1, 2).reshape(w.shape)


@pytest.fixture(scope="module")
def losses(smollm2, paragraph) -> tuple[float, float]:
    """``(right, swapped)``: the paragraph's loss as loaded, and with llama.cpp's stored q/k row order."""

    def loss() -> float:
        with torch.no_grad():
            return float(smollm2(paragraph, labels=paragraph).loss)

    right = loss()
    saved = [
        (a.q_proj.weight.data, a.k_proj.weight.data) for a in (b.self_attn for b in smollm2.model.layers)
    ]
    try:
        for block in smollm2.model.layers:
            attn = block.self_attn
            attn.q_proj.weight.data = _converter_order(attn.q_proj.weight.data, 9).contiguous()
            attn.k_proj.weight.data = _converter_order(attn.k_proj.weight.data, 3).contiguous()
        swapped = loss()
    finally:
        for block, (q, k) in zip(smollm2.model.layers, saved, strict=True):
            block.self_attn.q_proj.weight.data, block.self_attn.k_proj.weight.data = q, k
    assert loss() == right
    return right, swapped


def test_loss_with_the_right_pairing_is_clearly_lower_than_with_the_stored_order(losses):
    right, swapped = losses
    assert right < 3.2  # measured 2.840
    assert swapped - right > 1.5  # measured +2.10 nats


def test_the_pairing_control_of_intervene_is_the_stored_order(smollm2, paragraph, losses):
    """pg.intervene's SwapPairing on two copies of the paragraph: the same two losses, found by the tool."""
    from pos_geometry.interventions import SwapPairing

    ids = paragraph.numpy()
    result = pg.intervene(
        smollm2, np.concatenate([ids, ids]), SwapPairing(), attention=False, n_bootstrap=100
    )
    right, swapped = losses
    assert result.base_loss == pytest.approx(right, abs=1e-4)
    assert result.edited_loss == pytest.approx(swapped, abs=1e-4)
    assert result.delta > 1.5 and abs(result.delta_by_position[0]) < 1e-4


def test_hidden_positions_report_the_floor_and_the_first_positions(smollm2):
    res = pg.hidden_positions(
        smollm2, None, n_sequences=8, seq_len=64, random_state=0, layers=[0, 15], attention=[15]
    )
    share, floor = res.metrics["positional_share"], res.metrics["positional_floor"]
    assert share[0] < 1.5 * floor[0]  # layer 0: at its sampling floor (0.1252 vs 0.1231)
    assert "0" in res._at_floor().split(", ")
    assert share[1] > 20 * floor[1]  # layer 15: 0.85, 42x its floor ...
    assert res.metrics["position0_norm_ratio"][1] > 20  # ... carried by position 0's massive activation
    late, late_floor = res.metrics["positional_share_late"], res.metrics["positional_floor_late"]
    assert late[1] < 2 * late_floor[1]  # without positions 0-1 it is back at the floor
    assert "first 2 positions left out" in res.summary()
    att = res.attention
    assert att.plane_usage is not None and att.plane_usage.shape == (1, 9, 32)
    np.testing.assert_allclose(att.plane_usage.sum(-1), 1.0, rtol=1e-6)
    assert res.provenance.model_id.endswith(".gguf")
