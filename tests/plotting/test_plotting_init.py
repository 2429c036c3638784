"""The plotting package: its public names, and that importing it changes no plotly setting."""

from __future__ import annotations

import subprocess
import sys

import pytest

import pos_geometry.plotting as plotting


def test_public_names_are_callable() -> None:
    assert plotting.__all__ == sorted(plotting.__all__)
    for name in plotting.__all__:
        assert callable(getattr(plotting, name)), name


@pytest.mark.slow  # tests/core/test_public_api.py checks the same in the default suite
def test_import_has_no_global_effects() -> None:
    code = (
        "import os, plotly.io as pio\n"
        "before = (pio.renderers.default, pio.templates.default, dict(os.environ))\n"
        "import pos_geometry.plotting\n"
        "after = (pio.renderers.default, pio.templates.default, dict(os.environ))\n"
        "assert before == after, (before[:2], after[:2])\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def _every_figure() -> dict:
    """One call of every public plot_* function on a small periodic table."""
    import numpy as np

    rng = np.random.default_rng(0)
    t = np.arange(96, dtype=np.float64)[:, None]
    x = (np.cos(2 * np.pi * t / 24 + rng.uniform(0, 6, 8)) + 0.05 * rng.normal(size=(96, 8))).astype(
        np.float32
    )
    tokens = rng.normal(size=(50, 8)).astype(np.float32)
    fast = {"n_surrogates": 19, "alpha": 0.05}
    return {
        "plot_helix": lambda: plotting.plot_helix(x, fit=True),
        "plot_helix_grid": lambda: plotting.plot_helix_grid([x, 2 * x]),
        "plot_explained_variance": lambda: plotting.plot_explained_variance([x], n_components=4),
        "plot_similarity": lambda: plotting.plot_similarity(x, **fast),
        "plot_similarity_by_offset": lambda: plotting.plot_similarity_by_offset([x, x], **fast),
        "plot_spectrum": lambda: plotting.plot_spectrum(x, **fast),
        "plot_columns": lambda: plotting.plot_columns(x, 2, **fast),
        "plot_recurrence": lambda: plotting.plot_recurrence(x, n_components=4),
        "plot_token_positions": lambda: plotting.plot_token_positions(x, tokens),
        "plot_checkpoints": lambda: plotting.plot_checkpoints([x, x + 0.1 * tokens[:1]]),
        "plot_atlas_heatmap": lambda: plotting.plot_atlas_heatmap(_small_atlas()),
        "plot_atlas_usage": lambda: plotting.plot_atlas_usage(_small_atlas()),
        "plot_atlas_short_share": lambda: plotting.plot_atlas_short_share(_small_atlas()),
        "plot_atlas_head": lambda: plotting.plot_atlas_head(_small_atlas(), 0, 1),
        "plot_position_qk_offsets": lambda: plotting.plot_position_qk_offsets(_small_position_qk()),
        "plot_position_qk_shares": lambda: plotting.plot_position_qk_shares(_small_position_qk()),
        "plot_position_qk_lookback": lambda: plotting.plot_position_qk_lookback(
            _small_position_qk(), _small_position_qk(null=True)
        ),
        "plot_intervention_sweep": lambda: plotting.plot_intervention_sweep(_small_sweep_of_edits()),
        "plot_intervention_positions": lambda: plotting.plot_intervention_positions(
            _small_sweep_of_edits().results[0]
        ),
        "plot_hidden_metrics": lambda: plotting.plot_hidden_metrics(_small_hidden()[0]),
        "plot_hidden_trajectory": lambda: plotting.plot_hidden_trajectory(_small_hidden()[0]),
        "plot_attention_offsets": lambda: plotting.plot_attention_offsets(_small_hidden()[1]),
        "plot_sweep_metrics": lambda: plotting.plot_sweep_metrics([_small_sweep(x), _small_sweep(1.5 * x)]),
        "plot_sweep_helix": lambda: plotting.plot_sweep_helix(_small_sweep(x)),
        "plot_sweep_usage": lambda: plotting.plot_sweep_usage(_small_rotary_sweep()),
        **{
            f"plot_compare_{k}": (lambda k=k: getattr(plotting, f"plot_compare_{k}")(_small_series()))
            for k in ("rotary", "residual", "locality", "causal", "revisions")
        },
    }


def _small_series() -> dict:
    """A comparison's overlays (:mod:`pos_geometry.comparison.series`) for two made-up models."""
    return {
        "rotary": [{"model": m, "layer_type": None, "span": 64.0, "wavelength_over_span": [0.1, 1.0, 10.0],
                    "usage": [0.5, 0.3, 0.2], "uniform": 1 / 3} for m in ("a", "b")],
        "residual": [{"model": "a", "depth": [0.0, 0.5, 1.0], "layer": [0, 1, 2], "positional_share": [0.5, 0.2, 0.1],
                      "floor": [0.05, 0.05, 0.05]}],
        "locality": [{"model": m, "local_mass": [0.1, 0.6, 0.3], "uniform": 0.2} for m in ("a", "b")],
        "causal": [{"model": "a", "objective": "next-token", "edits": [{"edit": "swap", "delta": 0.5, "interval": [0.4, 0.6]}]}],
        "revisions": [{"model": "a", "labels": ["a@step1", "a@step2"], "steps": [1, 2], "numbers": {"x": [0.1, 0.2]}}],
    }  # fmt: skip


def _small_position_qk(null: bool = False):
    """A PositionQKAtlas of random statistics (2 layers, 3 heads, 10 positions), built without a checkpoint."""
    import torch

    from pos_geometry import PositionQKAtlas, Provenance

    gen = torch.Generator().manual_seed(int(null))
    share = torch.rand(2, 3, generator=gen, dtype=torch.float64)
    return PositionQKAtlas(
        form_share=share, logit_share=share, offset_profile=torch.randn(2, 3, 10, generator=gen, dtype=torch.float64),
        offset_r2=1 - share, logit_std=share, explained_variance_ratio=torch.full((2, 4), 0.2, dtype=torch.float64),
        layers=(0, 1), n_components=4, n_positions=10, provenance=Provenance("toy-gpt2", "learned", "synthetic"),
        peak_offset=torch.randint(0, 6, (2, 3), generator=gen), permuted_key_rows=null, toeplitz_share=share,
        rotation_fit=1 - share / 2, rotation_angle=share, plane_step=torch.tensor([0.1, 0.2], dtype=torch.float64),
    )  # fmt: skip


def _small_sweep_of_edits():
    """An InterventionSweep of three made-up edits (two of one family), built without a model."""
    import numpy as np

    from pos_geometry import Intervention, InterventionSweep, Provenance

    prov = Provenance("toy-llama", "hidden", "synthetic")

    def one(label: str, parameter, delta: float) -> Intervention:
        base = np.linspace(5.0, 3.0, 9)
        return Intervention(
            edit=label, parameter=parameter, base_loss=4.0, edited_loss=4.0 + delta, delta=delta,
            delta_interval=(delta - 0.1, delta + 0.1), confidence=0.95, n_bootstrap=10,
            sequence_delta=np.full(3, delta), base_loss_by_position=base, edited_loss_by_position=base + delta,
            n_sequences=3, seq_len=10, corpus="toy", provenance=prov,
        )  # fmt: skip

    results = (one("the 1 slowest rotation planes removed", 1.0, 0.1), one("the 4 slowest rotation planes removed", 4.0, 0.5),
               one("rotation pairing swapped", None, 2.0))  # fmt: skip
    return InterventionSweep(results=results, base_loss=4.0, provenance=prov)


def _small_hidden():
    """hidden_positions and attention_by_offset of a 1-layer GPT-2 with d_model 32 (random weights)."""
    import torch
    import transformers

    import pos_geometry as pg

    torch.manual_seed(0)
    config = transformers.GPT2Config(n_embd=32, n_layer=1, n_head=2, vocab_size=20, n_positions=16)
    model = transformers.GPT2Model(config)
    return pg.hidden_positions(model, n_sequences=4), pg.attention_by_offset(model, n_sequences=4)


def _small_sweep(x):
    """A SweepResult of three 'checkpoints' of ``x`` (noise shrinking), analysed and stored like a sweep's."""
    import tempfile

    import numpy as np

    from pos_geometry import PositionalEmbedding, Provenance
    from pos_geometry.sweeps.metrics import SweepConfig, analyse
    from pos_geometry.sweeps.record import CheckpointRecord, Outcome
    from pos_geometry.sweeps.result import SweepResult
    from pos_geometry.sweeps.store import SweepStore

    config = SweepConfig.make("cheap", n_components=4)
    store = SweepStore(tempfile.mkdtemp())
    noise = np.random.default_rng(1).normal(size=x.shape).astype(np.float32)
    records = []
    for step, scale in ((0, 1.0), (10, 0.3), (100, 0.0)):
        prov = Provenance("toy-run", "learned", "synthetic", revision=f"checkpoint-{step}")
        emb = PositionalEmbedding(x + scale * noise, prov)
        metrics, arrays = analyse(emb, config)
        record = CheckpointRecord(f"checkpoint-{step}", step, "ok", metrics=metrics, provenance=prov)
        store.put(Outcome(record, arrays), config.fingerprint())
        records.append(record)
    return SweepResult(
        model="toy-run", repo_id="toy/run", revisions=tuple(r.revision for r in records), records=tuple(records),
        config=config, executor="none", store=str(store.root), bytes_read=0, requests=0, n_computed=3, n_resumed=0,
    )  # fmt: skip


def _small_rotary_sweep():
    """A rotary SweepResult of two 'checkpoints' of the small atlas, stored like a sweep's."""
    import tempfile

    from pos_geometry.sweeps.metrics import SweepConfig
    from pos_geometry.sweeps.record import CheckpointRecord, Outcome
    from pos_geometry.sweeps.result import SweepResult
    from pos_geometry.sweeps.rotary import atlas_metrics
    from pos_geometry.sweeps.store import SweepStore

    config = SweepConfig.make("all", kind="rotary")
    store = SweepStore(tempfile.mkdtemp())
    atlas = _small_atlas()
    records = []
    for step in (0, 100):
        metrics, arrays = atlas_metrics(atlas)
        record = CheckpointRecord(f"step{step}", step, "ok", metrics=metrics, provenance=atlas.provenance)
        store.put(Outcome(record, arrays), config.fingerprint())
        records.append(record)
    return SweepResult(
        model="toy-rope", repo_id="toy/rope", revisions=("step0", "step100"), records=tuple(records), config=config,
        executor="none", store=str(store.root), bytes_read=0, requests=0, n_computed=2, n_resumed=0,
    )  # fmt: skip


def _small_atlas():
    """A RotaryAtlas of random statistics (2 layers, 2 heads, 4 planes), built without a checkpoint."""
    import torch

    from pos_geometry import Provenance, RotaryAtlas

    gen = torch.Generator().manual_seed(0)
    share = torch.rand(2, 2, 4, generator=gen, dtype=torch.float64)
    share = share / share.sum(-1, keepdim=True)
    wavelengths = 2 * torch.pi * 100.0 ** (torch.arange(4, dtype=torch.float64) / 4)
    critical = wavelengths <= 64
    return RotaryAtlas(
        q_norm=share, k_norm=share, qk_share=share, q_pair_cosine=share - 0.5, k_pair_cosine=0.5 - share,
        wavelengths=wavelengths, critical=critical, short_share=share[..., critical].sum(-1),
        layer_usage=share.mean(1), layers=(0, 1), kv_heads=(0, 1), context_length=64,
        critical_dimension=2 * int(critical.sum()), fold_norm=False, pairing="rotate_half",
        provenance=Provenance("toy-rope", "rotary", "synthetic"),
    )  # fmt: skip


def test_every_plot_function_returns_a_figure_and_never_shows_it(monkeypatch) -> None:
    import plotly.graph_objects as go
    import plotly.io as pio

    def refuse(*args, **kwargs):
        raise AssertionError("a plotting function must not show the figure")

    monkeypatch.setattr(go.Figure, "show", refuse)
    monkeypatch.setattr(pio, "show", refuse)
    calls = _every_figure()
    assert sorted(calls) == sorted(n for n in plotting.__all__ if n.startswith("plot_"))
    for name, call in calls.items():
        fig = call()
        assert isinstance(fig, go.Figure), name
        assert fig.layout.title.text, f"{name} has no title"
