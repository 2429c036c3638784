"""A rotary sweep over checkpoints published as GGUF files (``gguf_file=``): each record equals
``rotary_atlas(repo, revision=..., gguf_file=...)``, and another GGUF file of the same checkpoints is not
answered by the stored results of the first."""

from __future__ import annotations

import _pos_geometry_tests_gguf_files as gguf_files
import _pos_geometry_tests_hub_server as hub_server
import pytest
import torch
import transformers

import pos_geometry as pg
from pos_geometry.errors import InvalidArgumentError

REPO = "tiny/llama-run-gguf"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("gguf_run")
    config = transformers.LlamaConfig(
        hidden_size=64, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2,
        vocab_size=64, max_position_embeddings=256,
    )  # fmt: skip
    with hub_server.HubServer() as server:
        for step in (1, 2):
            torch.manual_seed(step)
            model = transformers.LlamaForCausalLM(config)
            folder = root / f"step{step}"
            folder.mkdir()
            f32 = gguf_files.llama_to_gguf(model, folder / "m.F32.gguf", "F32")
            q8 = gguf_files.llama_to_gguf(model, folder / "m.Q8_0.gguf", "Q8_0")
            server.add_revision(REPO, {f32.name: f32, q8.name: q8}, refs=(f"step{step}",))
        yield server


def test_a_gguf_sweep_equals_the_atlas_of_each_checkpoint(served, monkeypatch, tmp_path):
    hub_server.point_hub_at(monkeypatch, served, tmp_path)
    result = pg.sweep(REPO, ["step1", "step2"], gguf_file="m.F32.gguf", out=tmp_path / "out")
    assert [r.revision for r in result.ok] == ["step1", "step2"] and result.config.gguf_file == "m.F32.gguf"
    for record in result.ok:
        atlas = pg.rotary_atlas(REPO, revision=record.revision, gguf_file="m.F32.gguf")
        assert torch.equal(result.atlas(record.revision).qk_share, atlas.qk_share)
        assert record.metrics["helix_verdict"] == "does not apply"
    f32 = result.atlas("step1").qk_share
    # the Q8_0 file of the same checkpoints is another sweep: nothing is resumed from the F32 results
    q8 = pg.sweep(REPO, ["step1", "step2"], gguf_file="m.Q8_0.gguf", out=tmp_path / "out")
    assert not any(r.resumed for r in q8.records)
    assert not torch.equal(q8.atlas("step1").qk_share, f32)
    torch.testing.assert_close(q8.atlas("step1").qk_share, f32, rtol=0, atol=0.02)  # quantised, close


def test_gguf_sweeps_check_the_file_name(served, monkeypatch, tmp_path):
    hub_server.point_hub_at(monkeypatch, served, tmp_path)
    with pytest.raises(InvalidArgumentError, match="gguf_file"):
        pg.sweep(REPO, ["step1"], gguf_file="../m.gguf", out=tmp_path / "out")


def test_the_sweep_command_reads_gguf_files(served, monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from pos_geometry.cli import app

    hub_server.point_hub_at(monkeypatch, served, tmp_path)
    out = tmp_path / "cli"
    result = CliRunner().invoke(app, ["sweep", REPO, "--revisions", "step1,step2", "--gguf-file", "m.F32.gguf",
                                      "--out", str(out)])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert (out / "metrics.csv").is_file() and (out / "usage.html").is_file()
