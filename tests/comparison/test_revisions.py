"""A model compared at several training steps (``MODEL@REVISION``): a tiny GPT-NeoX training run served as ``stepN``
branches by the loopback hub (``tests/sweeps/rotary_run.py``: one long-wavelength plane amplified more at each
step). Each revision gets its own card, and the numbers against the step are those of each revision's atlas."""

from __future__ import annotations

import _pos_geometry_tests_hub_server as hub_server
import _pos_geometry_tests_rotary_run as rotary_run
import pytest

import pos_geometry as pg


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    with hub_server.HubServer() as server:
        yield rotary_run.build(server, tmp_path_factory.mktemp("rotary_run"))


def test_a_model_at_three_steps_gets_its_numbers_against_the_step(served, monkeypatch, tmp_path):
    hub_server.point_hub_at(monkeypatch, served.server, tmp_path)
    steps = (64, 1, 8)
    c = pg.compare([f"{rotary_run.REPO}@step{s}" for s in steps], tmp_path / "page", fast=True, device="cpu")
    assert [m.revision for m in c.models] == [f"step{s}" for s in steps]
    assert [m.label for m in c.models] == [f"neox-run@step{s}" for s in steps]
    (found,) = c.series["revisions"]
    assert found["steps"] == [1, 8, 64] and found["labels"] == [f"neox-run@step{s}" for s in (1, 8, 64)]
    shares = found["numbers"]["rotary plane use all: short_share_mean"]
    for step, share in zip(found["steps"], shares, strict=True):
        atlas = pg.rotary_atlas(rotary_run.REPO, revision=f"step{step}", fold_norm=True, device="cpu")
        assert share == pytest.approx(float(atlas.short_share.mean()), abs=1e-12)
    assert len(set(shares)) == 3  # the planted plane grows with the step: three different numbers
    page = (tmp_path / "page" / "index.html").read_text()
    assert 'id="fig-revisions"' in page
