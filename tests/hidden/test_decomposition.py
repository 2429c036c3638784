"""hidden_positions against independent values: the real GPT-2 table, and numpy on output_hidden_states."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.linalg
import torch
from sklearn.decomposition import PCA

import pos_geometry as pg
from pos_geometry.errors import DeviceMismatchError, InvalidArgumentError, NotApplicableError
from pos_geometry.hidden import METRIC_NAMES


def latin_square(n: int, seq_len: int) -> np.ndarray:
    """tokens[c, t] = (c + t) mod n: every position sees every token exactly once across the n contexts."""
    return (np.arange(n)[:, None] + np.arange(seq_len)[None, :]) % n


def test_layer0_of_gpt2_with_the_real_wpe_is_the_centred_real_table(gpt2_real_wpe, gpt2_wpe):
    # with a Latin square the token part of the embedding output is the same mean at every position,
    # so pos[t] at layer 0 is exactly wpe[t] centred over positions
    res = pg.hidden_positions(gpt2_real_wpe, latin_square(16, 1024), layers=0, batch_size=16)
    pos = res.positional[0]
    expected = gpt2_wpe.astype(np.float64) - gpt2_wpe.astype(np.float64).mean(axis=0)
    np.testing.assert_allclose(pos.numpy(), expected, atol=1e-5, rtol=0)
    assert round(float(res.metric("top_k_ratio")[0]), 4) == 0.9039
    # the same tables go through the table analyses unchanged
    assert round(float(pg.pca(pos, n_components=3).explained_variance_ratio_.sum()), 4) == 0.9039
    assert pos.kind == "hidden" and pos.shape == (1024, 768)
    config = pos.provenance.config_dict
    assert config["layer"] == 0 and config["hook_point"] == "h.0 (input)"
    assert config["n_sequences"] == 16 and config["positional_encoding"] == "learned"
    assert "token array: 16 x 1024" in config["corpus"]


def _numpy_metrics(states: np.ndarray, k: int, n_freq: int) -> dict[str, float]:
    """Song & Zhong's decomposition and every metric, written out in numpy/scipy/sklearn."""
    h = states.astype(np.float64)  # (C, T, d)
    c, t, _ = h.shape
    mu = h.mean(axis=(0, 1))
    pos = h.mean(axis=0) - mu
    ctx = h.mean(axis=1) - mu
    total = np.square(h - mu).sum()
    pos_ss, ctx_ss = c * np.square(pos).sum(), t * np.square(ctx).sum()
    pca_pos = PCA(n_components=k).fit(pos)
    pca_ctx = PCA(n_components=k).fit(ctx)
    sv = np.linalg.svd(pos, compute_uv=False)
    n = np.arange(t)
    dct = np.sqrt(2.0 / t) * np.cos(np.pi * (2 * n[None, :] + 1) * n[:, None] / (2 * t))
    dct[0] /= np.sqrt(2.0)
    energy = np.square(dct @ (pos @ pos.T) @ dct.T)
    angles = np.degrees(scipy.linalg.subspace_angles(pca_pos.components_.T, pca_ctx.components_.T))
    norms = np.linalg.norm(pos, axis=1)
    rest = h[:, 2:]  # the first two positions left out, everything re-centred
    mu2 = rest.mean(axis=(0, 1))
    pos2, ctx2 = rest.mean(axis=0) - mu2, rest.mean(axis=1) - mu2
    late = {"total": np.square(rest - mu2).sum(), "pos": c * np.square(pos2).sum()}
    late["res"] = late["total"] - late["pos"] - (t - 2) * np.square(ctx2).sum()
    return {
        "positional_share": pos_ss / total,
        "context_share": ctx_ss / total,
        "residual_share": 1 - (pos_ss + ctx_ss) / total,
        "relative_norm": np.sqrt(pos_ss / total),
        "top_k_ratio": pca_pos.explained_variance_ratio_.sum(),
        "stable_rank": np.square(sv).sum() / sv[0] ** 2,
        "smoothness": energy[:n_freq, :n_freq].sum() / energy.sum(),
        "max_cosine": np.cos(np.radians(angles.min())),
        "position0_norm_ratio": norms[0] / np.median(norms[1:]),
        "top_k_ratio_without_0": PCA(n_components=k).fit(pos[1:]).explained_variance_ratio_.sum(),
        "positional_floor": (total - pos_ss - ctx_ss) / ((c - 1) * total),
        "positional_over_floor": (pos_ss / total) / ((total - pos_ss - ctx_ss) / ((c - 1) * total)),
        "positional_share_late": late["pos"] / late["total"],
        "positional_floor_late": late["res"] / ((c - 1) * late["total"]),
        "angles": np.sort(angles),
    }


def test_every_metric_of_every_layer_equals_numpy_on_output_hidden_states(tiny_gpt2):
    tokens = np.random.default_rng(1).integers(0, 50, size=(12, 48))
    res = pg.hidden_positions(tiny_gpt2, tokens, batch_size=5, n_components=3, n_frequencies=6)
    with torch.no_grad():
        out = tiny_gpt2(torch.from_numpy(tokens), output_hidden_states=True)
        ln_f, tiny_gpt2.ln_f = (
            tiny_gpt2.ln_f,
            torch.nn.Identity(),
        )  # layer n_layers is read before the final norm
        try:
            last = tiny_gpt2(torch.from_numpy(tokens)).last_hidden_state
        finally:
            tiny_gpt2.ln_f = ln_f
    states = [out.hidden_states[0], out.hidden_states[1], last]
    assert res.layers == (0, 1, 2)
    assert not torch.allclose(out.hidden_states[2], last)  # the final norm really is excluded
    for i, layer_states in enumerate(states):
        h = layer_states.numpy()
        expected = _numpy_metrics(h, 3, 6)
        for name in METRIC_NAMES:
            np.testing.assert_allclose(
                res.metric(name)[i], expected[name], rtol=1e-5, atol=1e-8, err_msg=name
            )
        np.testing.assert_allclose(res.principal_angles[i], expected["angles"], atol=1e-3)
        mu = h.astype(np.float64).mean(axis=(0, 1))
        np.testing.assert_allclose(res.positional[i].numpy(), h.mean(axis=0) - mu, atol=2e-5)
        np.testing.assert_allclose(res.grand_mean[i].numpy(), mu, atol=2e-5)


def test_streaming_in_batches_equals_one_big_batch(tiny_gpt2):
    tokens = np.random.default_rng(2).integers(0, 50, size=(10, 32))
    one = pg.hidden_positions(tiny_gpt2, tokens, batch_size=10)
    many = pg.hidden_positions(tiny_gpt2, tokens, batch_size=3)
    for layer in one.layers:
        np.testing.assert_allclose(many.positional[layer].numpy(), one.positional[layer].numpy(), atol=1e-6)
    for name in METRIC_NAMES:
        np.testing.assert_allclose(many.metric(name), one.metric(name), rtol=1e-6, atol=1e-9, err_msg=name)


def test_random_default_is_labelled_and_reproducible(tiny_gpt2):
    a = pg.hidden_positions(tiny_gpt2, layers=[1], n_sequences=6, seq_len=16, random_state=3)
    b = pg.hidden_positions(tiny_gpt2, layers=[1], n_sequences=6, seq_len=16, random_state=3)
    assert torch.equal(a.positional[1].matrix, b.positional[1].matrix)
    for text in (
        a.corpus,
        a.provenance.config_dict["corpus"],
        a.positional[1].provenance.config_dict["corpus"],
    ):
        assert text.startswith("random tokens (offline default") and "random_state=3" in text
    data = json.loads(a.to_json(allow_nan=False))  # strict JSON, no positional tables inside
    assert data["type"] == "HiddenPositions" and "positional" not in data
    assert set(data["metrics"]) == set(METRIC_NAMES)
    assert a.metrics_rows()[0]["layer"] == 1 and "HiddenPositions" in str(a)


def test_file_inputs_npy_and_text(tiny_gpt2, tmp_path):
    tokens = np.random.default_rng(4).integers(0, 50, size=(4, 16))
    np.save(tmp_path / "ids.npy", tokens)
    from_file = pg.hidden_positions(tiny_gpt2, tmp_path / "ids.npy", layers=[0])
    from_array = pg.hidden_positions(tiny_gpt2, tokens, layers=[0])
    assert torch.equal(from_file.positional[0].matrix, from_array.positional[0].matrix)
    assert "ids.npy" in from_file.corpus
    (tmp_path / "corpus.txt").write_text("some words " * 50)
    with pytest.raises(NotApplicableError, match="no tokenizer"):
        pg.hidden_positions(tiny_gpt2, tmp_path / "corpus.txt", layers=[0])

    class CharTokenizer:  # any callable returning input_ids works
        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": [ord(ch) % 50 for ch in text]}

    res = pg.hidden_positions(
        tiny_gpt2, tmp_path / "corpus.txt", layers=[0], seq_len=20, tokenizer=CharTokenizer()
    )
    assert res.n_sequences == len("some words " * 50) // 20 and res.seq_len == 20
    assert "corpus.txt" in res.corpus and "tokenised" in res.corpus


@pytest.mark.parametrize(
    ("tokens", "kwargs", "match"),
    [
        (np.zeros((4, 8)), {}, "integer token ids"),
        (np.zeros(8, dtype=int), {}, "2-D int array"),
        (np.full((4, 8), 50), {}, r"\[0, vocab_size=50\)"),
        (np.zeros((4, 8), dtype=int), {"layers": [3]}, "layers 0..2"),
        (np.zeros((4, 8), dtype=int), {"batch_size": 0}, "batch_size"),
        (np.zeros((4, 200), dtype=int), {}, "longer than the model's context"),
        (None, {"n_components": 0}, "n_components"),
    ],
)
def test_bad_input_gets_a_clear_typed_error(tiny_gpt2, tokens, kwargs, match):
    with pytest.raises(InvalidArgumentError, match=match):
        pg.hidden_positions(tiny_gpt2, tokens, **kwargs)


def test_loaded_model_is_not_moved_and_paths_load(tiny_gpt2, tmp_path):
    with pytest.raises(DeviceMismatchError, match="lives on cpu"):
        pg.hidden_positions(tiny_gpt2, np.zeros((2, 4), dtype=int), device="meta")
    tiny_gpt2.save_pretrained(tmp_path / "model")
    tokens = np.random.default_rng(5).integers(0, 50, size=(3, 8))
    from_path = pg.hidden_positions(tmp_path / "model", tokens, layers=[2], device="cpu")
    in_memory = pg.hidden_positions(tiny_gpt2, tokens, layers=[2])
    np.testing.assert_allclose(from_path.positional[2].numpy(), in_memory.positional[2].numpy(), atol=1e-6)
    assert from_path.provenance.model_id == str(tmp_path / "model")
    with pytest.raises(InvalidArgumentError, match=r"no config\.json"):
        pg.hidden_positions(tmp_path, tokens)


def test_sampling_floor_is_the_share_of_states_without_position():
    """With no positional signal (i.i.d. states plus a per-context offset), the positional share is its floor:
    about 1/C, whatever C; with a planted position term it is far above."""
    from pos_geometry.hidden.metrics import layer_metrics
    from pos_geometry.hidden.running_sums import PositionSums

    rng = np.random.default_rng(0)

    def metrics(states: np.ndarray) -> dict:
        sums = PositionSums(skip=2)
        sums.update(torch.from_numpy(states))
        return layer_metrics(sums.finish(), n_components=3, n_frequencies=4)

    for n_contexts in (8, 64):
        plain = [metrics(rng.standard_normal((n_contexts, 32, 16))) for _ in range(20)]
        assert np.mean([m["positional_share"] for m in plain]) == pytest.approx(1 / n_contexts, rel=0.15)
        # a strong per-context offset shrinks every share below 1/C; the floor follows, 1/C would not
        offset = [
            metrics(rng.standard_normal((n_contexts, 32, 16)) + 3 * rng.standard_normal((n_contexts, 1, 16)))
            for _ in range(20)
        ]
        for runs in (plain, offset):
            assert np.mean([m["positional_over_floor"] for m in runs]) == pytest.approx(1.0, abs=0.1)
            assert np.mean([m["positional_share_late"] / m["positional_floor_late"] for m in runs]) == (
                pytest.approx(1.0, abs=0.1)
            )
        assert np.mean([m["positional_share"] for m in offset]) < 0.5 / n_contexts
    states = rng.standard_normal((8, 32, 16))
    assert metrics(states + 3 * np.sin(np.arange(32) / 3)[None, :, None])["positional_over_floor"] > 20
