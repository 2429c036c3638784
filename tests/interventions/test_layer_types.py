"""Rotary edits of one layer type, or of some layers, on models whose layer types rotate differently.

Models: the tiny Gemma-2 (one rotary module for every layer; layer 0 slides, layer 1 does not) and
Gemma-3 (one module keeping ``sliding_attention_inv_freq`` base 10000 for layers 0-4 and
``full_attention_inv_freq`` base 1e6 for layer 5) of ``tests/data/gguf_parity``. Oracles: the same
weights under a config.json that states the edited rope parameters, run by transformers itself; and
the two mechanisms (a type's own buffer, or a pre-hook on chosen blocks) against each other.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import pos_geometry as pg
from pos_geometry.errors import InvalidArgumentError, NotApplicableError
from pos_geometry.interventions import Identity, RemovePlanes, RopeScaling, ScaleFrequencies

DATA = Path(__file__).resolve().parents[1] / "data" / "gguf_parity"
TOKENS = np.random.default_rng(1).integers(0, 256, size=(3, 40))
RUN = {"attention": False, "device": "cpu", "n_bootstrap": 50}


def _loss(folder, edit=None) -> np.ndarray:
    r = pg.intervene(folder, TOKENS, edit or Identity(), **RUN)
    return r.edited_loss_by_position


def _with_rope(tmp_path: Path, arch: str, layer_type: str, params: dict) -> Path:
    """The fixture's weights under a config whose ``layer_type`` rotates with ``params``."""
    folder = tmp_path / arch
    shutil.copytree(DATA / arch, folder)
    config = json.loads((folder / "config.json").read_text())
    config["rope_parameters"][layer_type] = {**config["rope_parameters"][layer_type], **params}
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize(
    "edit, layer_type, params",
    [
        (RopeScaling({"rope_type": "default", "rope_theta": 1e6}, layer_type="sliding_attention"),
         "sliding_attention", {"rope_theta": 1e6}),
        (ScaleFrequencies(2.0, layer_type="full_attention"), "full_attention", {"rope_type": "linear", "factor": 2.0}),
        (RopeScaling({"rope_type": "linear", "factor": 4.0}, layer_type="full_attention"), "full_attention",
         {"rope_type": "linear", "factor": 4.0}),
    ],
)  # fmt: skip
def test_a_layer_types_own_buffer_is_edited_as_its_config_would_state_it(tmp_path, edit, layer_type, params):
    """Gemma-3: re-basing the sliding layers, or interpolating the full ones, gives the loss of the same
    weights under a config.json that says so (transformers builds that model itself)."""
    edited = _loss(DATA / "gemma3", edit)
    oracle = _loss(_with_rope(tmp_path, "gemma3", layer_type, params))
    np.testing.assert_allclose(edited, oracle, rtol=0, atol=1e-5)
    assert np.abs(edited - _loss(DATA / "gemma3")).max() > 1e-6  # the edit changed the model


def test_editing_some_layers_by_hook_equals_editing_their_types_buffer():
    """Layer 5 is Gemma-3's only full-attention layer: ``layers=(5,)`` (its blocks handed edited cos/sin)
    and ``layer_type="full_attention"`` (the type's buffer) are the same edit."""
    by_type = _loss(DATA / "gemma3", ScaleFrequencies(3.0, layer_type="full_attention"))
    by_layer = _loss(DATA / "gemma3", ScaleFrequencies(3.0, layers=(5,)))
    np.testing.assert_allclose(by_layer, by_type, rtol=0, atol=1e-6)


def test_a_shared_buffer_is_edited_for_one_type_through_its_layers():
    """Gemma-2 keeps one buffer for both types: a sliding-layer edit changes layer 0 only (its hook), and
    every layer by hook equals the buffer edit."""
    everywhere = _loss(DATA / "gemma2", RemovePlanes(slowest=2))
    by_hooks = _loss(DATA / "gemma2", RemovePlanes(slowest=2, layers=(0, 1)))
    np.testing.assert_allclose(by_hooks, everywhere, rtol=0, atol=1e-6)
    sliding = pg.intervene(
        DATA / "gemma2", TOKENS, RemovePlanes(slowest=2, layer_type="sliding_attention"), **RUN
    )
    first = pg.intervene(DATA / "gemma2", TOKENS, RemovePlanes(slowest=2, layers=(0,)), **RUN)
    np.testing.assert_allclose(
        sliding.edited_loss_by_position, first.edited_loss_by_position, rtol=0, atol=1e-7
    )
    assert "layer type sliding_attention" in sliding.edit
    assert np.abs(sliding.edited_loss_by_position - everywhere).max() > 1e-7  # layer 1 untouched


@pytest.mark.parametrize(
    "model, edit, error, words",
    [
        ("gemma3", ScaleFrequencies(2.0, layer_type="local"), NotApplicableError, "full_attention"),
        ("llama", ScaleFrequencies(2.0, layer_type="sliding_attention"), NotApplicableError, "one shared set"),
        ("gemma3", RemovePlanes(slowest=1, layers=(9,)), InvalidArgumentError, r"\[0, 6\)"),
        ("gemma3", RemovePlanes(slowest=1, layer_type="full_attention", layers=(0,)), InvalidArgumentError,
         "not of type"),
        ("gemma3", RopeScaling({"rope_type": "linear"}, layer_type="full_attention"), InvalidArgumentError,
         "transformers refuses"),
    ],
)  # fmt: skip
def test_an_edit_that_cannot_apply_is_refused_before_the_base_pass(monkeypatch, model, edit, error, words):
    import pos_geometry.interventions.run as run

    passes = []
    real = run._run_pass
    monkeypatch.setattr(run, "_run_pass", lambda *a, **k: passes.append(1) or real(*a, **k))
    with pytest.raises(error, match=words):
        pg.intervene_sweep(DATA / model, TOKENS, [Identity(), edit], device="cpu", n_bootstrap=10)
    assert passes == []


def test_layers_must_be_indices():
    with pytest.raises(InvalidArgumentError, match="layer indices"):
        ScaleFrequencies(2.0, layers=(-1,))


def test_one_sequence_is_enough_for_a_loss():
    r = pg.intervene(DATA / "gemma3", TOKENS[:1], ScaleFrequencies(2.0), **RUN)
    assert r.n_sequences == 1 and np.isfinite(r.delta) and np.isnan(r.delta_interval).all()
    assert "no interval: one sequence" in r.summary()


def test_edit_specs_take_a_scope():
    from pos_geometry.interventions.specs import parse_edits

    assert parse_edits(["scale:2,4@full_attention"]) == [
        ScaleFrequencies(2.0, layer_type="full_attention"), ScaleFrequencies(4.0, layer_type="full_attention"),
    ]  # fmt: skip
    assert parse_edits(["planes-slow:3@layers=0-2,5"]) == [RemovePlanes(slowest=3, layers=(0, 1, 2, 5))]
    assert parse_edits(["rebase:1e6@sliding_attention"]) == [
        RopeScaling({"rope_type": "default", "rope_theta": 1e6}, layer_type="sliding_attention")
    ]
    for spec, words in (
        ("swap@full_attention", "scopes a rotary frequency edit"),
        ("scale:2@layers=x", "layers="),
    ):
        with pytest.raises(InvalidArgumentError, match=words):
            parse_edits([spec])
