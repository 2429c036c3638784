"""What every analysis promises (issue 3): one matrix or a batch, the input's device, frozen results
that print a summary, serialise to strict JSON and carry the provenance forward.

Each analysis is run on the same two small tables, alone and as a batch, as a list of
``PositionalEmbedding`` and as a ``(batch, n, d)`` array. Devices: the CPU always, CUDA and MPS
when this machine has them (the device × dtype grid of the style guide, skipping what is absent).
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

import pos_geometry as pg
from pos_geometry.analysis._batch import BatchResult
from pos_geometry.errors import DeviceMismatchError

DEVICES = ["cpu"]
if torch.cuda.is_available():
    DEVICES.append("cuda")
if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
    DEVICES.append("mps")


def _tables() -> np.ndarray:
    """Two noisy helices ``(2, 240, 12)`` with different periods, in a random orthonormal frame."""
    rng = np.random.default_rng(0)
    t = np.arange(240.0)[:, None]
    out = []
    for period in (60.0, 80.0):
        a = 2 * np.pi * t / period
        z = np.concatenate([2 * np.cos(a), 2 * np.sin(a), t / 100], axis=1)
        q = np.linalg.qr(rng.standard_normal((12, 3)))[0]
        out.append(z @ q.T + 0.01 * rng.standard_normal((240, 12)))
    return np.stack(out).astype(np.float32)


TABLES = _tables()
TOKENS = np.random.default_rng(1).standard_normal((300, 12)).astype(np.float32)


def _embeddings(device: str = "cpu") -> list[pg.PositionalEmbedding]:
    return [
        pg.PositionalEmbedding(
            torch.from_numpy(t).to(device), pg.Provenance(f"model{i}", "learned", f"test table {i}")
        )
        for i, t in enumerate(TABLES)
    ]


ANALYSES = {
    "pca": lambda x: pg.pca(x, 3),
    "fit_helix": lambda x: pg.fit_helix(x, max_harmonics=1, n_surrogates=19, alpha=0.05),
    "periodicity": lambda x: pg.periodicity(x, n_surrogates=19, alpha=0.05),
    "fit_recurrence": lambda x: pg.fit_recurrence(x, n_components=3, n_surrogates=19, alpha=0.05),
    "identify": lambda x: pg.identify(x),
    "subspace_overlap": lambda x: pg.subspace_overlap(
        x, torch.from_numpy(TOKENS).to(x[0].device if isinstance(x, list) else x.device), 3
    ),
}
SINGLE_TYPES = {
    "pca": pg.PCAResult,
    "fit_helix": pg.HelixFit,
    "periodicity": pg.PeriodicityResult,
    "fit_recurrence": pg.RecurrenceFit,
    "identify": pg.Identification,
    "subspace_overlap": pg.SubspaceOverlap,
}


def _strict_json(text: str) -> dict:
    def refuse(constant: str):
        raise AssertionError(f"not strict JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def _items(result) -> list:
    return [result[i] for i in range(len(result))]


@pytest.mark.parametrize("name", sorted(ANALYSES))
def test_single_result_is_frozen_printable_json_and_keeps_provenance(name):
    emb = _embeddings()[1]
    result = ANALYSES[name](emb)
    assert isinstance(result, SINGLE_TYPES[name])
    field = dataclasses.fields(result)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(result, field, None)
    assert result.provenance.model_id == "model1" and result.provenance.source == "test table 1"
    text = str(result)
    assert text.startswith(f"{type(result).__name__} of model1") and len(text.splitlines()) >= 3
    assert "<table>" in result._repr_html_()
    data = _strict_json(result.to_json())
    assert data["type"] == type(result).__name__
    assert data["provenance"]["model_id"] == "model1"
    assert data["provenance"]["package_version"] == pg.__version__


@pytest.mark.parametrize("name", sorted(ANALYSES))
def test_a_batch_gives_one_result_per_matrix_in_order(name):
    embs = _embeddings()
    from_list = ANALYSES[name](embs)
    from_array = ANALYSES[name](torch.from_numpy(TABLES))
    singles = [ANALYSES[name](e) for e in embs]
    for batch in (from_list, from_array):
        assert len(batch) == 2
        assert isinstance(batch, pg.PCAResult if name == "pca" else BatchResult)
        _strict_json(batch.to_json())
        assert str(batch)
    for got, want, emb in zip(_items(from_list), singles, embs, strict=True):
        assert got.provenance == want.provenance
        assert got.provenance.model_id == emb.provenance.model_id
    # the batch computes the same numbers as one call per matrix (a number each analysis reports)
    for got, want in zip(_items(from_array), singles, strict=True):
        if name == "pca":
            torch.testing.assert_close(got.components_, want.components_, atol=1e-4, rtol=0)
        elif name == "fit_helix":
            assert got.periods[0] == pytest.approx(want.periods[0], rel=1e-4)
        elif name == "periodicity":
            torch.testing.assert_close(got.similarity, want.similarity)
            assert [p.p_value for p in got.peaks] == [p.p_value for p in want.peaks]
        elif name == "fit_recurrence":
            np.testing.assert_allclose(got.transition, want.transition, atol=1e-5)
        elif name == "identify":
            assert not got.is_formula and got.residual == pytest.approx(want.residual, rel=1e-9)
        else:
            assert got.token_variance_fraction == pytest.approx(want.token_variance_fraction, rel=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(ANALYSES))
def test_computes_on_the_input_device_and_agrees_with_the_cpu(name, device):
    """Tensors in the result live on the input's device; the numbers match the CPU run."""
    on_device = ANALYSES[name](_embeddings(device)[0])
    on_cpu = ANALYSES[name](_embeddings("cpu")[0])
    tensors = {
        f.name: getattr(on_device, f.name)
        for f in dataclasses.fields(on_device)
        if isinstance(getattr(on_device, f.name), torch.Tensor)
    }
    for field, value in tensors.items():
        assert value.device.type == torch.device(device).type, field
        assert value.shape == getattr(on_cpu, field).shape, field
    key = {
        "pca": "components_",  # sign-fixed: the same axes, signs included, on every device
        "fit_helix": "periods",
        "periodicity": "mean_similarity",
        "fit_recurrence": "angles",
        "identify": "residual",
        "subspace_overlap": "principal_angles_deg",
    }[name]
    got, want = getattr(on_device, key), getattr(on_cpu, key)
    got = got.cpu().double().numpy() if isinstance(got, torch.Tensor) else np.asarray(got)
    want = want.cpu().double().numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)


def test_mixed_devices_are_refused_not_copied():
    cpu = _embeddings()[0]
    meta = pg.PositionalEmbedding(torch.empty(240, 12, device="meta"), cpu.provenance, check_finite=False)
    for fn in (pg.pca, pg.fit_helix, pg.periodicity, pg.fit_recurrence):
        with pytest.raises(DeviceMismatchError, match="one device"):
            fn([cpu, meta])
    with pytest.raises(DeviceMismatchError, match=r"move one with \.to\(\)"):
        pg.subspace_overlap(cpu, torch.empty(300, 12, device="meta"))


@pytest.mark.parametrize("name", sorted(ANALYSES))
def test_repr_is_one_short_line_without_arrays(name):
    """A result in a REPL prints its type, source and headline numbers, never kilobytes of tensors (issue 21)."""
    embeddings = _embeddings()
    for result in (ANALYSES[name](embeddings[0]), ANALYSES[name](embeddings)):
        text = repr(result)
        assert "\n" not in text and len(text) <= 400, text
        assert (
            text.startswith(f"<{type(result).__name__} of ")
            and "tensor(" not in text
            and "array(" not in text
        )
        assert "<table>" in result._repr_html_()  # Jupyter gets the whole summary as a table
