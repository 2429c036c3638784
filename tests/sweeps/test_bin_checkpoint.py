"""A repo shipping pytorch_model.bin (as the Stanford CRFM replicas do) is swept through the zip reader."""

from __future__ import annotations

import _pos_geometry_tests_hub_server as hub_server
import numpy as np
import pytest
import torch

import pos_geometry as pg
from pos_geometry.sources.hub import read_hub_tensor_pinned


def test_bin_checkpoint_by_name_and_by_fallback(monkeypatch, tmp_path):
    rng = np.random.default_rng(0)
    tables = {s: rng.normal(size=(64, 16)).astype(np.float32) for s in (0, 10)}
    with hub_server.HubServer() as server:
        commits = {}
        for step, table in tables.items():
            path = tmp_path / f"{step}.bin"
            torch.save({"transformer.wpe.weight": torch.from_numpy(table), "other": torch.zeros(8)}, path)
            (tmp_path / "config.json").write_text('{"model_type": "gpt2", "n_positions": 64, "n_embd": 16}')
            commits[step] = server.add_revision(
                "org/bin-run", {"pytorch_model.bin": path, "config.json": tmp_path / "config.json"},
                refs=(f"checkpoint-{step}",),
            )  # fmt: skip
        hub_server.point_hub_at(monkeypatch, server, tmp_path)
        direct = read_hub_tensor_pinned("org/bin-run", commits[0], filename="pytorch_model.bin", cache=False)
        assert np.array_equal(direct.tensor.numpy(), tables[0])
        res = pg.sweep(
            "org/bin-run", "all", analyses=["norms"], store=tmp_path / "store"
        )  # tries model.safetensors
        assert [r.status for r in res.records] == ["ok", "ok"]
        for step, table in tables.items():
            assert res[f"checkpoint-{step}"].metrics["table_norm"] == pytest.approx(
                np.linalg.norm(table.astype(np.float64)), rel=1e-12
            )
