"""pg.intervene / intervene_sweep on tiny GPT-2 and Llama causal LMs written by transformers.

Independent references: scikit-learn's PCA for the rank-k table; the model's own forward with
``position_ids`` for shifts; transformers' own linear rope init for position interpolation; the
exact invariances of the edits (identity; rank d; a rotary model's shift; position 0 under any
rotary edit, where every rotation is the identity).
"""

from __future__ import annotations

import _pos_geometry_tests_planted as planted
import numpy as np
import pytest
import torch
import transformers
from sklearn.decomposition import PCA

import pos_geometry as pg
from pos_geometry.errors import InvalidArgumentError, MissingTensorError, NotApplicableError
from pos_geometry.hidden.opening import open_model
from pos_geometry.interventions import (
    Helix,
    Identity,
    MeanTable,
    Rank,
    RemovePlanes,
    RopeScaling,
    ScaleFrequencies,
    Shift,
    ShuffleRows,
    SwapPairing,
)
from pos_geometry.interventions.target import EditTarget

CPU = {"device": "cpu", "n_bootstrap": 200}


def _state(folder):
    return transformers.AutoModelForCausalLM.from_pretrained(folder).state_dict()


def test_identity_gives_exactly_zero(tiny_gpt2, tiny_llama, tokens):
    for folder in (tiny_gpt2, tiny_llama):
        r = pg.intervene(folder, tokens, Identity(), **CPU)
        assert r.delta == 0.0 and r.delta_interval == (0.0, 0.0)
        assert np.array_equal(r.base_loss_by_position, r.edited_loss_by_position)
        np.testing.assert_array_equal(r.base_attention.mean_probability, r.edited_attention.mean_probability)
        assert r.base_loss > 0 and r.base_loss_by_position.shape == (tokens.shape[1] - 1,)


def test_rank_d_reconstruction_is_the_table_and_rank_k_is_sklearns(tiny_gpt2, tokens):
    loaded = open_model(tiny_gpt2, device="cpu", head=True)
    target = EditTarget(loaded)
    original = target.table().detach().clone()
    with target.editing():
        Rank(32).apply(target)
        torch.testing.assert_close(target.table().detach(), original, atol=2e-6, rtol=0)
    with target.editing():
        Rank(3).apply(target)
        x = original.double().numpy()
        pca = PCA(3).fit(x)
        np.testing.assert_allclose(target.table().detach().double().numpy(),
                                   pca.inverse_transform(pca.transform(x)), atol=1e-5)  # fmt: skip
    assert torch.equal(target.table().detach(), original)  # undone
    full = pg.intervene(tiny_gpt2, tokens, Rank(32), attention=False, **CPU)
    assert abs(full.delta) < 1e-5


def test_the_model_is_left_unchanged(tiny_llama, tokens):
    model = transformers.AutoModelForCausalLM.from_pretrained(tiny_llama).eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    freq = model.model.rotary_emb.inv_freq.clone()
    pg.intervene_sweep(
        model,
        tokens,
        [SwapPairing(), RemovePlanes(slowest=3), RopeScaling({"rope_type": "yarn", "factor": 2.0})],
        n_bootstrap=50,
    )
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert (
        torch.equal(model.model.rotary_emb.inv_freq, freq) and model.model.rotary_emb.attention_scaling == 1.0
    )


def test_a_result_does_not_depend_on_the_batch_size(tiny_llama, tokens):
    one = pg.intervene(tiny_llama, tokens, SwapPairing(), batch_size=1, attention=False, **CPU)
    four = pg.intervene(tiny_llama, tokens, SwapPairing(), batch_size=4, attention=False, **CPU)
    np.testing.assert_allclose(one.sequence_delta, four.sequence_delta, atol=1e-5)
    np.testing.assert_allclose(one.edited_loss_by_position, four.edited_loss_by_position, atol=1e-5)
    assert one.delta_interval == pytest.approx(four.delta_interval, abs=1e-5)


def test_rotary_edits_leave_position_0_alone_and_a_shift_changes_nothing(tiny_llama, tokens):
    """At position 0 every rotation is the identity and the query sees only itself: no rotary edit can
    change its prediction. A shift of every position changes no offset: a rotary model cannot see it."""
    sweep = pg.intervene_sweep(tiny_llama, tokens, [SwapPairing(), RemovePlanes(slowest=4), Shift(37)], **CPU)
    swap, nope, shift = sweep.results
    for r in (swap, nope):
        assert abs(r.delta_by_position[0]) < 1e-5 and np.abs(r.delta_by_position[1:]).max() > 1e-3
    assert swap.delta > 0  # the control hurts
    assert abs(shift.delta) < 1e-4 and np.abs(shift.delta_by_position).max() < 1e-4
    assert "edit: positions shifted by 37" in shift.provenance.processing


def test_a_shift_of_a_learned_table_is_the_models_own_position_ids(tiny_gpt2, tokens):
    r = pg.intervene(tiny_gpt2, tokens, Shift(5), attention=False, **CPU)
    model = transformers.AutoModelForCausalLM.from_pretrained(tiny_gpt2).eval()
    ids = torch.from_numpy(tokens)
    with torch.no_grad():
        logits = model(ids, position_ids=torch.arange(5, 5 + ids.shape[1]).expand_as(ids)).logits
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
    np.testing.assert_allclose(r.edited_loss_by_position, loss.mean(0).double().numpy(), atol=1e-5)
    with pytest.raises(
        InvalidArgumentError, match="a shift of 20 needs positions up to 59; the table has 48"
    ):
        pg.intervene(tiny_gpt2, tokens, Shift(20), attention=False, **CPU)


def test_removing_planes_stills_the_chosen_frequencies(tiny_llama):
    target = EditTarget(open_model(tiny_llama, device="cpu", head=True))
    theta = target.inverse_frequencies()  # 4 planes, fastest first
    for edit, stilled in ((RemovePlanes(slowest=1), [3]), (RemovePlanes(fastest=2), [0, 1]),
                          (RemovePlanes(indices=(2,)), [2]),
                          (RemovePlanes(band=(float(2 * np.pi / theta[1]) - 1, float(2 * np.pi / theta[1]) + 1)), [1])):  # fmt: skip
        with target.editing():
            edit.apply(target)
            now = target.inverse_frequencies()
            assert [i for i in range(4) if now[i] == 0] == stilled, edit
            assert torch.equal(now[now != 0], theta[now != 0])
    assert torch.equal(target.inverse_frequencies(), theta)


def test_position_interpolation_equals_transformers_linear_rope(tiny_llama, tokens):
    sweep = pg.intervene_sweep(
        tiny_llama,
        tokens,
        [ScaleFrequencies(2.0), RopeScaling({"rope_type": "linear", "factor": 2.0})],
        **CPU,
    )
    a, b = sweep.results
    np.testing.assert_allclose(a.edited_loss_by_position, b.edited_loss_by_position, atol=1e-6)
    assert sweep.parameters.tolist() == [2.0, 2.0] and "rope factor=2.0, rope_type=linear" in sweep.labels


def test_table_edits_on_a_learned_model(tiny_gpt2, tokens):
    sweep = pg.intervene_sweep(tiny_gpt2, tokens, [Rank(1), Rank(8), MeanTable(), ShuffleRows(10)], **CPU)
    rank1, rank8, mean, shuffle = sweep.results
    assert mean.delta > rank1.delta > rank8.delta > -0.05  # less of the table, more loss (wpe ×20 here)
    assert shuffle.delta_by_position[:9] == pytest.approx(0.0, abs=1e-6) and shuffle.delta > 0
    for r in sweep.results:
        low, high = r.delta_interval
        assert low <= r.delta <= high
    assert sweep.delta.shape == (4,) and sweep.delta_interval.shape == (4, 2)


def test_the_helix_edit_needs_a_helix(tiny_gpt2, tokens):
    with pytest.raises(NotApplicableError, match="the helix edit does not apply"):
        pg.intervene(tiny_gpt2, tokens, Helix(), attention=False, **CPU)  # a random table has no helix


@pytest.mark.parametrize(
    "model, edit, words",
    [
        ("tiny_llama", Rank(2), "applies to learned position embeddings"),
        ("tiny_gpt2", RemovePlanes(slowest=1), "applies to rotary position embeddings"),
        ("tiny_gpt2", SwapPairing(), "applies to rotary"),
    ],
)
def test_an_edit_the_model_has_nothing_for_does_not_apply(request, model, edit, words, tokens):
    with pytest.raises(NotApplicableError, match=words):
        pg.intervene(request.getfixturevalue(model), tokens, edit, **CPU)


def test_a_partial_checkpoint_or_no_corpus_is_refused(real_data_dir, tiny_gpt2, tokens):
    with pytest.raises(InvalidArgumentError, match="needs a corpus"):
        pg.intervene(tiny_gpt2, None, Identity(), **CPU)
    folder = real_data_dir / "gpt2_small_attention"
    if not folder.is_dir():
        pytest.skip(f"the real GPT-2 attention folder is not at {folder}")
    with pytest.raises(MissingTensorError, match=r"lacks \d+ weight\(s\) the whole model needs"):
        pg.intervene(folder, tokens, Rank(3), **CPU)


@pytest.mark.parametrize(
    "edit, words",
    [
        (lambda: Rank(0), "k must be an int >= 1"),
        (lambda: RemovePlanes(), "exactly one of"),
        (lambda: ScaleFrequencies(0), "factor must be a number > 0"),
        (lambda: RopeScaling({"rope_type": "dynamic", "factor": 2}), "not a fixed edit"),
        (lambda: Shift(-1), "offset must be an int >= 0"),
        # edit parameters meet the rules a config's rope parameters meet
        (lambda: ScaleFrequencies(float("nan")), "factor must be a number > 0"),
        (lambda: ScaleFrequencies(1e-300), r"factor .* between 1e-06 and 1e\+06"),
        (lambda: ScaleFrequencies(float("inf")), "finite number"),
        (lambda: RopeScaling({"rope_type": "linear", "factor": 0.0}), "factor"),
        (lambda: RopeScaling({"rope_type": "yarn", "factor": float("nan")}), "finite number"),
        (lambda: RopeScaling({"rope_type": "default", "rope_theta": 1e-300}), "rope_theta"),
        (
            lambda: RopeScaling({"rope_type": "yarn", "factor": 2, "beta_fast": 1, "beta_slow": 32}),
            "greater than",
        ),
    ],
)
def test_bad_edits_are_refused_with_the_rule(edit, words):
    with pytest.raises(InvalidArgumentError, match=words):
        edit()


def test_edits_compose(tiny_llama, tokens):
    both = SwapPairing() + RemovePlanes(fastest=1)
    assert (
        both.label
        == "rotation pairing swapped (q/k rows reordered within each head) + the 1 fastest rotation planes removed"
    )
    r = pg.intervene(tiny_llama, tokens, both, attention=False, **CPU)
    assert "+" in r.provenance.processing[-1] and r.delta > 0


def test_a_rotary_model_may_run_past_its_training_context_and_a_learned_table_may_not(tiny_llama, tiny_gpt2):
    """Position interpolation is tested where the unedited model runs out of context; a table has no row there."""
    long = np.tile(np.arange(61), (2, 3))[:, :150]  # 150 tokens: past tiny_llama's 128 and tiny_gpt2's 48
    r = pg.intervene(tiny_llama, long, ScaleFrequencies(2.0), attention=False, **CPU)
    assert r.seq_len == 150 and "past the 128-position training context" in r.summary()
    with pytest.raises(InvalidArgumentError, match="longer than the model's context"):
        pg.intervene(tiny_gpt2, long, Rank(2), attention=False, **CPU)


def test_the_helix_edit_replaces_the_real_gpt2_table_by_its_fitted_helix(gpt2_wpe):
    """A one-layer GPT-2 carrying GPT-2 small's real table: the edited table lies in the table's top-3 PCA
    subspace (scikit-learn's), and there it is the helix fit_helix reports (R² = the fit's own r2)."""
    config = transformers.GPT2Config(
        vocab_size=61, n_positions=1024, n_embd=768, n_layer=1, n_head=12, n_inner=64
    )
    model = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        model.transformer.wpe.weight.copy_(torch.from_numpy(gpt2_wpe))
    target = EditTarget(open_model(model))
    with target.editing():
        Helix().apply(target)
        edited = target.table().detach().double().numpy()
    table = gpt2_wpe.astype(np.float64)
    pca = PCA(3).fit(table)
    inside = pca.inverse_transform(pca.transform(edited))
    np.testing.assert_allclose(edited, inside, atol=1e-4)  # nothing outside the top 3 PCs
    z, fitted = pca.transform(table), pca.transform(edited)
    r2 = 1 - ((z - fitted) ** 2).sum() / ((z - z.mean(0)) ** 2).sum()
    assert r2 == pytest.approx(pg.fit_helix(table, n_surrogates=0).r2, abs=1e-3) and r2 > 0.9
    assert np.array_equal(target.table().detach().numpy(), gpt2_wpe)  # undone


def test_the_pairing_swap_needs_two_planes(tmp_path, tokens):
    """With one rotation plane per head (StableLM rotating 2 of 8 dims) every reordering keeps the pair:
    the swap does not apply, and says why, rather than reporting a Δloss of exactly zero."""
    config = transformers.StableLmConfig(
        vocab_size=61, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=4, max_position_embeddings=64, partial_rotary_factor=0.25,
    )  # fmt: skip
    torch.manual_seed(0)
    transformers.StableLmForCausalLM(config).save_pretrained(tmp_path)
    with pytest.raises(NotApplicableError, match="at least two rotation planes"):
        pg.intervene(tmp_path, tokens, SwapPairing(), attention=False, **CPU)


def test_the_pairing_swap_leaves_a_gated_querys_gate_alone(tmp_path):
    """Qwen3-Next's q_proj holds ``[query | gate]`` per head: the swap reorders the query half as the keys,
    so each head's unrotated ``q·k`` form is unchanged, and leaves the gate rows where they are."""
    config = planted.qwen3_next_config(vocab_size=61)
    torch.manual_seed(0)
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(tmp_path)
    loaded = open_model(tmp_path, device="cpu", head=True)
    target = EditTarget(loaded)
    attn = loaded.module.model.layers[3].self_attn
    q0, k0 = attn.q_proj.weight.detach().clone(), attn.k_proj.weight.detach().clone()

    def forms(q, k):  # (heads, d, d): each query head's W_qᵀ W_k over its query half and its key head
        wq, wk = q.view(4, 2, 16, 64)[:, 0], k.view(2, 16, 64)
        return torch.stack([wq[h].T @ wk[h // 2] for h in range(4)])

    with target.editing():
        SwapPairing().apply(target)
        q1, k1 = attn.q_proj.weight.detach(), attn.k_proj.weight.detach()
        assert not torch.equal(q1, q0) and not torch.equal(k1, k0)
        torch.testing.assert_close(q1.view(4, 2, 16, 64)[:, 1], q0.view(4, 2, 16, 64)[:, 1], rtol=0, atol=0)
        torch.testing.assert_close(forms(q1, k1), forms(q0, k0), rtol=1e-6, atol=1e-7)
    assert torch.equal(attn.q_proj.weight, q0)
