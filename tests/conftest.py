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

if os.environ.get("PYTEST_XDIST_WORKER"):  # before numpy and torch load their thread pools (pytest_configure)
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

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


def pytest_configure(config):
    """Each of pytest-xdist's workers (``-n``, one per core) keeps torch's kernels and the BLAS libraries on one
    thread: the workers already fill the cores, and several threads per worker would oversubscribe them (BLAS
    threads that spin while another worker holds the core made some tests 50 times slower). A test that needs
    several threads sets them itself (the thread-pool tests do)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch
        from threadpoolctl import threadpool_limits

        torch.set_num_threads(1)
        threadpool_limits(1)  # the libraries loaded before the variables above were set


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


def _circle_on_a_gp(seed: int, n: int = 1024, d: int = 256, ell: float = 78.6) -> np.ndarray:
    """A circle of period n/3.4 (variance d per row) with white noise of the same variance and a smooth GP
    background (length scale ``ell``) of twice it, in ``d`` random columns: ``(n, d)`` float32
    (benchmarks/bench_calibration.py's ``rotation+gp``)."""
    rng = np.random.default_rng(seed)
    t = np.arange(n, dtype=np.float64)
    w, v = np.linalg.eigh(np.exp(-((t[:, None] - t[None, :]) ** 2) / (2 * ell**2)))
    g = (v * np.sqrt(np.clip(w, 0, None))) @ rng.standard_normal((n, d))
    g -= g.mean(0)
    g *= np.sqrt(2 * d / (g**2).sum(1).mean())
    basis = np.linalg.qr(rng.standard_normal((d, 2)))[0]
    phase = 2 * np.pi * t / (n / 3.4)
    circle = np.stack([np.cos(phase), np.sin(phase)], 1) @ basis.T * np.sqrt(d)
    return (circle + rng.standard_normal((n, d)) + g).astype(np.float32)


@pytest.fixture(scope="session")
def circle_on_a_gp():
    """``circle_on_a_gp(seed, n=1024, d=256, ell=78.6)``: a rotation of period n/3.4 on a smooth GP background."""
    return _circle_on_a_gp


# Models of every kind a card reads (the cards' and the comparison's tests), built by transformers (random
# weights), and their cards, made once. ``learned``: a GPT-2 LM (context 48) whose table is scaled up so position
# matters; ``rotary``: a Llama (head_dim 8, base 500, context 128) with sharp attention; ``per_type``: the Gemma-3
# folder of ``tests/data/gguf_parity`` (sliding layers base 1e4, window 32; a full layer base 1e6); ``no_table``: a
# Bloom (ALiBi: no table, learned or rotary); ``table_file``: a helix written as a bare ``.npy``. Each gets an
# ``.npy`` corpus of token ids (no tokenizer is needed).
CARD_DATA = Path(__file__).resolve().parent / "data" / "gguf_parity"
N_SEQUENCES, SEQ_LEN = 4, 32


def _tokens(folder: Path, vocab: int) -> Path:
    path = folder / "tokens.npy"
    np.save(path, np.random.default_rng(0).integers(0, vocab, size=(N_SEQUENCES, SEQ_LEN)))
    return path


def _save(model, folder: Path) -> Path:
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def kind_models(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """``{kind: (model path, corpus .npy)}``."""
    import torch
    import transformers

    root = tmp_path_factory.mktemp("card_models")
    torch.manual_seed(0)
    gpt2 = transformers.GPT2LMHeadModel(
        transformers.GPT2Config(vocab_size=61, n_positions=48, n_embd=32, n_layer=2, n_head=4, n_inner=64)
    ).eval()
    with torch.no_grad():
        gpt2.transformer.wpe.weight.mul_(20)
    llama = transformers.LlamaForCausalLM(
        transformers.LlamaConfig(
            vocab_size=61,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=128,
            rope_theta=500.0,
        )
    ).eval()
    with torch.no_grad():
        for block in llama.model.layers:
            block.self_attn.q_proj.weight.mul_(8)
            block.self_attn.k_proj.weight.mul_(8)
    bloom = transformers.BloomForCausalLM(
        transformers.BloomConfig(vocab_size=61, hidden_size=32, n_layer=2, n_head=4)
    )
    out = {}
    for kind, model in (("learned", gpt2), ("rotary", llama), ("no_table", bloom.eval())):
        folder = _save(model, root / kind)
        out[kind] = (folder, _tokens(folder, 61))
    per_type = root / "per_type"
    per_type.mkdir()
    out["per_type"] = (CARD_DATA / "gemma3", _tokens(per_type, 256))
    t = np.arange(300)[:, None]
    helix = np.hstack([np.cos(2 * np.pi * t / 120), np.sin(2 * np.pi * t / 120), t / 300.0])
    basis = np.linalg.qr(np.random.default_rng(1).standard_normal((24, 3)))[0].T  # orthonormal: a round helix
    table = helix @ basis + 0.01 * np.random.default_rng(2).standard_normal((300, 24))
    np.save(root / "helix.npy", table.astype(np.float32))
    out["table_file"] = (root / "helix.npy", None)
    return out


@pytest.fixture(scope="session")
def kind_cards(kind_models):
    """``{kind: Card}`` of each model, made once (device cpu, no progress)."""
    from pos_geometry.cards import card

    return {
        kind: card(path, tokens, device="cpu", progress=False) for kind, (path, tokens) in kind_models.items()
    }


HOSTILE_NAME = (
    "m<img src=x onerror=alert(1)>\n\n## Verdicts\n\n- [measured] a fake verdict [x](javascript:alert(1)) "
    "<a href=x>link <b>bold <span style=font-size:90px>big \x1b[31m`"
)
"""A name holding HTML, Markdown blocks and links, plotly's markup and a terminal escape (no ``/``: a file name)."""


@pytest.fixture(scope="session")
def hostile_cards(kind_models, tmp_path_factory):
    """Two cards made by the CLI from untrusted strings, ``{kind: (out folder, CLI output)}``: ``table`` a
    safetensors table file named :data:`HOSTILE_NAME` whose one tensor key holds backticks and markup;
    ``rotary`` the tiny Llama copied into a folder of that name, with a string config field of markup and a
    corpus file of that name (a fast card)."""
    import json
    import shutil

    from safetensors.numpy import save_file
    from typer.testing import CliRunner

    from pos_geometry.cli import app

    root = tmp_path_factory.mktemp("hostile")
    t = np.arange(200)[:, None]
    table = np.hstack([np.cos(2 * np.pi * t / 80), np.sin(2 * np.pi * t / 80), t / 200.0, 0 * t + 0.1])
    table = table + 0.01 * np.random.default_rng(3).standard_normal(table.shape)
    path = root / f"{HOSTILE_NAME}.safetensors"
    save_file({"`</script><img src=x>`.wpe.weight": table.astype(np.float32)}, str(path))
    folder = root / HOSTILE_NAME
    shutil.copytree(kind_models["rotary"][0], folder)
    config = json.loads((folder / "config.json").read_text())
    config["_name_or_path"] = "</script><script>alert(1)</script>[x](javascript:alert(1))"
    (folder / "config.json").write_text(json.dumps(config))
    corpus = root / f"{HOSTILE_NAME}.npy"
    shutil.copy(kind_models["rotary"][1], corpus)
    out = {}
    for kind, args in (("table", [str(path)]), ("rotary", [str(folder), "--corpus", str(corpus), "--fast"])):
        result = CliRunner().invoke(
            app, ["card", *args, "--out", str(root / f"out_{kind}"), "--device", "cpu"]
        )
        assert result.exit_code == 0, result.output
        out[kind] = (root / f"out_{kind}", result.output)
    return out


# A real browser for the pages' tests (the card's and the comparison's): Debian's chromium driven by Playwright


@pytest.fixture(scope="module")
def browser():
    """One headless chromium for the module (software WebGL, for the 3D figures); skips without one."""
    playwright = pytest.importorskip(
        "playwright.sync_api", reason="playwright is installed by setup.sh --dev"
    )
    from pos_geometry.errors import ExportError
    from pos_geometry.plotting.export import find_browser

    try:
        executable = str(find_browser())
    except ExportError as exc:
        pytest.skip(f"no Chromium on this machine ({exc})")
    with playwright.sync_playwright() as p:
        chromium = p.chromium.launch(
            executable_path=executable,
            headless=True,
            args=["--use-angle=swiftshader", "--enable-unsafe-swiftshader"],
        )
        yield chromium
        chromium.close()


def _load_page(browser, page_path: Path, check: str) -> tuple[dict, list[str], list[str]]:
    """Open ``page_path`` with the network blocked, wait for every plot, evaluate ``check``; also returns the
    requests made and the console errors, page errors and dialogs (an ``alert``) seen."""
    requests, errors = [], []
    page = browser.new_page()

    def route(r):
        requests.append(r.request.url)
        if r.request.url.startswith("file://"):
            r.continue_()
        else:
            r.abort()  # the network is blocked: a page needs none

    try:
        page.route("**/*", route)
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("dialog", lambda d: (errors.append(f"dialog: {d.message}"), d.dismiss()))
        page.goto(page_path.as_uri(), wait_until="load")
        page.wait_for_function(
            "() => Array.from(document.querySelectorAll('.js-plotly-plot')).every(p => p._fullLayout)",
            timeout=30_000,
        )
        return page.evaluate(check), requests, errors
    finally:
        page.close()


@pytest.fixture
def load_page():
    """:func:`_load_page`: ``(browser, page path, check script) -> (found, requests, errors)``."""
    return _load_page
