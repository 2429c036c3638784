"""data/reference: the published numbers parse, carry citations, and sit beside what we measure."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import pos_geometry as pg
from pos_geometry.reference import REFERENCE_ENV, published_value, reference, reference_dir
from pos_geometry.reproduction.published import published_vs_measured
from pos_geometry.reproduction.report import render_markdown

REPO_ROOT = Path(__file__).resolve().parents[1]
FILES = sorted((REPO_ROOT / "data" / "reference").glob("*.json"))


def test_the_folder_is_found_from_the_checkout(monkeypatch, tmp_path):
    monkeypatch.delenv(REFERENCE_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert reference_dir() == REPO_ROOT / "data" / "reference"
    assert {p.stem for p in FILES} >= {"helix_post", "song_zhong_2023"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_each_file_parses_and_every_value_says_where_it_was_read(path: Path):
    data = json.loads(path.read_text())
    cite = data["citation"]
    assert (
        cite["title"]
        and (cite.get("url") or cite.get("arxiv"))
        and (cite.get("author") or cite.get("authors"))
    )
    assert data["values"]
    for key, entry in data["values"].items():
        assert isinstance(entry["value"], int | float), key
        assert (
            entry["definition"] and entry["verified"] and entry.get("where", "") != ""
        ) or "claim" in entry, key
        assert published_value(path.stem, key).value == entry["value"]


def test_song_zhong_numbers_as_read_from_their_notebook():
    srank = published_value("song_zhong_2023", "gpt2_pos_stable_rank_layer0")
    screenot = published_value("song_zhong_2023", "gpt2_pos_screenot_rank_layer0")
    assert (srank.value, screenot.value, srank.rows) == (2.05, 15, (1, 512))
    assert "metrics.ipynb" in srank.where and "Song & Zhong (2023)" in srank.source


def test_stable_rank_is_compared_with_numpy_and_with_2_05(gpt2_wpe):
    pe = pg.load("gpt2=" + str(REPO_ROOT.parent / "shared" / "data" / "real" / "gpt2_small_wpe.npy"))
    rows = gpt2_wpe[1:512].astype(np.float64)
    s = np.linalg.svd(rows - rows.mean(0), compute_uv=False)
    oracle = float((s**2).sum() / s[0] ** 2)
    top = gpt2_wpe.astype(np.float64) - gpt2_wpe.mean(0)
    ev = np.linalg.svd(top, compute_uv=False) ** 2
    by_quantity = {c.quantity: c for c in published_vs_measured(pe)}
    stable = by_quantity["GPT-2 small: positional stable rank"]
    assert stable.measured == pytest.approx(oracle, rel=1e-6)
    assert stable.published.value == 2.05 and round(stable.measured, 2) == 2.05  # Song & Zhong, reproduced
    assert by_quantity["GPT-2 small: top-3 variance share"].measured == pytest.approx(
        ev[:3].sum() / ev.sum(), rel=1e-6
    )
    screenot = by_quantity["GPT-2 small: ScreeNOT rank"]
    try:
        import screenot as _  # noqa: F401 - the authors' package, an optional extra
    except ImportError:
        assert screenot.measured is None and "pos-geometry[screenot]" in screenot.how
    else:  # their call on the same centred rows gives their published rank
        assert screenot.measured == 15 == screenot.published.value and "k=20, strategy='i'" in screenot.how
    md = render_markdown([], [], [], out=REPO_ROOT, published=tuple(by_quantity.values()))
    assert "## Published vs measured" in md
    assert (
        "| GPT-2 small: positional stable rank | Song & Zhong (2023)" in md
        and f"| 2.05 | {oracle:.4f} |" in md
    )
    assert (
        "| 15 | 15 | screenot.adaptiveHardThresholding" in md or "| 15 | – | not measured: the authors'" in md
    )


def test_without_the_folder_nothing_is_compared_and_nothing_fails(monkeypatch, tmp_path):
    monkeypatch.setenv(REFERENCE_ENV, str(tmp_path / "absent"))
    assert reference_dir() is None and reference("song_zhong_2023") is None
    assert published_vs_measured(None) == ()
    monkeypatch.setenv(REFERENCE_ENV, str(tmp_path))
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(pg.CheckpointFormatError, match="not valid JSON"):
        reference("broken")
