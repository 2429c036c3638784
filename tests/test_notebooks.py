"""Both notebooks run headlessly (nbclient, the venv's python3 kernel, cwd = notebooks/) without error."""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
REAL_GPT2 = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "real" / "gpt2_small_wpe.npy"


def _kernel_name() -> str:
    try:
        spec = KernelSpecManager().get_kernel_spec("python3")
    except NoSuchKernel:
        pytest.skip("no 'python3' Jupyter kernel is installed (pip install ipykernel)")
    # jupyter_client swaps a bare "python" for sys.executable; any other interpreter must be this one.
    if spec.argv[0] not in ("python", "python3", sys.executable):
        pytest.skip(f"the python3 kernel runs {spec.argv[0]!r}, not this interpreter {sys.executable!r}")
    return "python3"


def _top3(path: Path, start: int = 0) -> float:
    """The oracle: scikit-learn's top-3 explained-variance ratio of the rows ``start:`` of the table."""
    import numpy as np
    from sklearn.decomposition import PCA

    rows = np.load(path).astype(np.float64)[start:]
    return float(PCA(3, svd_solver="full").fit(rows).explained_variance_ratio_.sum())


def _run(name: str) -> nbformat.NotebookNode:
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), (
        f"{name} is committed with outputs"
    )
    NotebookClient(
        nb, kernel_name=_kernel_name(), timeout=300, resources={"metadata": {"path": str(NOTEBOOKS)}}
    ).execute()
    return nb


def _text(nb: nbformat.NotebookNode) -> str:
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                parts.append(out["text"])
            elif "data" in out:
                parts.append(str(out["data"].get("text/plain", "")))
    return "\n".join(parts)


def _has_plotly(nb: nbformat.NotebookNode) -> bool:
    return any(
        "application/vnd.plotly.v1+json" in out.get("data", {})
        or "plotly" in str(out.get("data", {}).get("text/html", ""))
        for cell in nb.cells
        for out in cell.get("outputs", [])
    )


@pytest.mark.slow
def test_gpt2_helix_notebook():
    nb = _run("01_gpt2_helix.ipynb")
    text = _text(nb)
    if not REAL_GPT2.is_file():
        assert "not available here" in text
        return
    top3 = _top3(REAL_GPT2)
    assert f"top-3 explained variance ratio: {top3:.3f}" in text
    truncated = _top3(REAL_GPT2, start=100)
    assert f"rows 100-1023: {truncated:.4f}" in text and truncated > top3  # the post's truncation claim
    assert "best shape: helix" in text
    assert _has_plotly(nb)
    assert any(
        "text/html" in out.get("data", {}) and "HelixFit" in out["data"]["text/html"]
        for c in nb.cells
        for out in c.get("outputs", [])
    )


@pytest.mark.slow
def test_learned_vs_rotary_notebook():
    nb = _run("02_learned_vs_rotary.ipynb")
    text = _text(nb)
    assert "rotary (pythia-160m): 1024 positions" in text and "kind=rotary" in text
    assert "sinusoidal: 1024 positions × 768 columns" in text
    assert "periods" in text and _has_plotly(nb)
    if REAL_GPT2.is_file():
        assert f"learned (gpt2): top-3 {_top3(REAL_GPT2):.3f}" in text
