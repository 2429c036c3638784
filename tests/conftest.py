"""Shared fixtures: the real tables in ../shared/data/real (skipped with a reason when absent), and the
test helper modules every folder may import (registered here, once).

Tests are not a package (importing ``tests`` is banned), so helper modules are registered under fixed
names before any test module is imported: ``import _pos_geometry_tests_hub_server as hub_server`` (the
loopback hub, ``tests/sources/hub_server.py``) and ``import _pos_geometry_tests_torch_pickles`` (hand-made
torch checkpoints, ``tests/sources/torch_pickles.py``) and ``import _pos_geometry_tests_rotary_run`` (a
rotary training run, ``tests/sweeps/rotary_run.py``) and ``import _pos_geometry_tests_gguf_files`` (GGUF files
written with the gguf package, ``tests/sources/gguf/gguf_files.py``) and ``import _pos_geometry_tests_markdown``
(Markdown rendered as MkDocs and notebooks render it, ``tests/core/markdown_render.py``) and ``import _pos_geometry_tests_planted`` (planted-plane
helpers, ``tests/registry/planted.py``) work in every test folder.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
REAL_DATA_DIR = REPO_ROOT.parent / "shared" / "data" / "real"
REAL_MODELS_DIR = REPO_ROOT.parent / "shared" / "data" / "real_models"
SMOLLM2_GGUF = REAL_MODELS_DIR / "smollm2_135m_instruct_q4_1.gguf"
HELPER_MODULES = {
    "_pos_geometry_tests_hub_server": REPO_ROOT / "tests" / "sources" / "hub_server.py",
    "_pos_geometry_tests_torch_pickles": REPO_ROOT / "tests" / "sources" / "torch_pickles.py",
    "_pos_geometry_tests_rotary_run": REPO_ROOT / "tests" / "sweeps" / "rotary_run.py",
    "_pos_geometry_tests_gguf_files": REPO_ROOT / "tests" / "sources" / "gguf" / "gguf_files.py",
    "_pos_geometry_tests_planted": REPO_ROOT / "tests" / "registry" / "planted.py",
    "_pos_geometry_tests_markdown": REPO_ROOT / "tests" / "core" / "markdown_render.py",
}


def _register(module_name: str, path: Path) -> None:
    """Load ``path`` as the module ``module_name`` (once per process)."""
    if module_name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)


for _name, _path in HELPER_MODULES.items():
    _register(_name, _path)


@pytest.fixture(autouse=True, scope="session")
def _own_cache(tmp_path_factory):
    """The session's own pos_geometry cache (tables fetched, cards made): a test never reads or fills the
    user's, and a card made by one test is not another's cache hit unless that test asks for it."""
    before = os.environ.get("POS_GEOMETRY_CACHE")
    os.environ["POS_GEOMETRY_CACHE"] = str(tmp_path_factory.mktemp("pos_geometry_cache"))
    yield
    if before is None:
        os.environ.pop("POS_GEOMETRY_CACHE", None)
    else:
        os.environ["POS_GEOMETRY_CACHE"] = before


@pytest.fixture(autouse=True)
def _no_exported_tables(monkeypatch, tmp_path_factory):
    """Tables a developer exported to the checkout's git-ignored data/tables/ never answer in a test."""
    monkeypatch.setenv("POS_GEOMETRY_TABLES", str(tmp_path_factory.getbasetemp() / "no_exported_tables"))


@pytest.fixture(autouse=True)
def _no_remembered_hub_probes(monkeypatch):
    """Each test starts with no reachability probe remembered: a loopback port a test probed while it was
    closed is often the next test's hub server's (a remembered failure made one sweep test offline)."""
    from pos_geometry.sources import network

    monkeypatch.setattr(network, "_PROBED", {})


@pytest.fixture(scope="session")
def real_data_dir() -> Path:
    """``../shared/data/real`` beside the checkout; skips when it is not there."""
    if not (REAL_DATA_DIR / "gpt2_small_wpe.npy").is_file():
        pytest.skip(
            f"real pretrained tables not found at {REAL_DATA_DIR} (they live in ../shared/data/real "
            "beside the checkout and are never copied into the repository)"
        )
    return REAL_DATA_DIR


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    """The real SmolLM2-135M-Instruct GGUF (Q4_1) in ../shared/data/real_models; skips when it is not there."""
    if not SMOLLM2_GGUF.is_file():
        pytest.skip(
            f"the real SmolLM2 GGUF was not found at {SMOLLM2_GGUF} (it lives in ../shared/data/real_models beside "
            "the checkout and is never copied into the repository)"
        )
    return SMOLLM2_GGUF


@pytest.fixture(scope="session")
def gpt2_wpe(real_data_dir: Path) -> np.ndarray:
    """GPT-2 small's learned positional table, ``(1024, 768)`` float32."""
    return np.load(real_data_dir / "gpt2_small_wpe.npy")


@pytest.fixture(scope="session")
def gpt1_positions(real_data_dir: Path) -> np.ndarray:
    """GPT-1's learned positional table, ``(512, 768)`` float32."""
    return np.load(real_data_dir / "gpt1_openai_positions_embed.npy")


def _record_decompositions(mp: pytest.MonkeyPatch) -> list[tuple]:
    """Patch the PCA solver so every decomposition of a table (not of a null's surrogate) is recorded as
    ``(shape, (start, stop), checksum of the scaled rows)``; the same table over the same window gives the
    same key, so duplicates mean a table was decomposed twice."""
    import sys

    import pos_geometry.analysis.pca as pca_module

    calls: list[tuple] = []
    real = pca_module.fit_batch

    def counting(x, k, **kwargs):
        caller = sys._getframe(1)
        if caller.f_code.co_name == "pca":  # surrogate_coordinates (the nulls) is not a table's decomposition
            where = (int(caller.f_locals["start"]), int(caller.f_locals["stop"]))
            calls.append((tuple(x.shape), where, round(float(x.double().sum()), 4)))
        return real(x, k, **kwargs)

    mp.setattr(pca_module, "fit_batch", counting)
    return calls


@pytest.fixture(scope="session")
def record_decompositions():
    """``calls = record_decompositions(monkeypatch)``: from then on, each table decomposition is appended."""
    return _record_decompositions


def _noisy_helix(seed: int, period: float = 300.0, snr: float = 1.0, n: int = 1024, d: int = 128):
    """A helix of known ``period`` (cos, sin and a drift along the axis in a random orthonormal 3-plane of
    ``d`` dimensions) at SNR ``snr`` (signal variance per entry over the unit white noise added to every
    entry), ``n`` positions, as a ``PositionalEmbedding``."""
    import torch

    from pos_geometry.embedding import PositionalEmbedding, Provenance

    rng = np.random.default_rng(seed)
    t = np.arange(n)[:, None]
    basis = np.linalg.qr(rng.normal(size=(d, 3)))[0]
    curve = np.concatenate([np.cos(2 * np.pi * t / period), np.sin(2 * np.pi * t / period), t / n], axis=1)
    x = curve @ basis.T * np.sqrt(d * snr) + rng.normal(size=(n, d))
    return PositionalEmbedding(torch.from_numpy(x), Provenance("helix", "learned", f"seed {seed}"))


@pytest.fixture(scope="session")
def noisy_helix():
    """``noisy_helix(seed, period=300, snr=1, n=1024, d=128)``: a noisy helix of known period (the generator of
    ``benchmarks/bench_coverage.py``)."""
    return _noisy_helix
