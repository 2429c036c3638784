"""Synthetic training runs served by the loopback hub: GPT-2-shaped checkpoints whose positional table
moves from a random initialisation to the real GPT-2 small table (``training_run``), and a rotary run
(``rotary_training_run``, a tiny GPT-NeoX: see ``rotary_run.py``).

``training_run`` (module scope) writes the checkpoints and starts the server; ``hub`` (per test) points
huggingface_hub at it with fresh caches and an empty request log. The run is the repo
:data:`REPO` with branches ``checkpoint-N`` for 40 log-spaced steps of the Stanford CRFM schedule, plus
``checkpoint-<CORRUPT>`` (a safetensors header that does not parse) and ``checkpoint-<NAN>`` (a NaN in the
table); ``main`` points at the final checkpoint. Each file holds GPT-2 small's 148 tensor names (so the
header is GPT-2's size, ~15 KB) with tiny tensors, except ``transformer.wpe.weight`` (1024 x 768 float32).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import _pos_geometry_tests_hub_server as hub_server  # registered by tests/conftest.py
import _pos_geometry_tests_rotary_run as rotary_run
import numpy as np
import pytest
import torch
from safetensors.torch import save_file

REPO = "test-crfm/gpt2-run"
N_GOOD = 40
CORRUPT_STEP = 250
NAN_STEP = 550


def gpt2_state(wpe: np.ndarray, n_layer: int = 12) -> dict[str, torch.Tensor]:
    """GPT-2's tensor names; every tensor tiny except the positional table."""
    tiny = torch.zeros(4)
    state = {"transformer.wpe.weight": torch.from_numpy(np.ascontiguousarray(wpe, dtype=np.float32))}
    state |= {
        "transformer.wte.weight": torch.zeros(4, 4),
        "transformer.ln_f.weight": tiny.clone(),
        "transformer.ln_f.bias": tiny.clone(),
    }
    for i in range(n_layer):
        for name in ("ln_1", "ln_2", "attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"):
            state[f"transformer.h.{i}.{name}.weight"] = tiny.clone()
            state[f"transformer.h.{i}.{name}.bias"] = tiny.clone()
    return state


def table_at(step: int, last: int, real: np.ndarray, init: np.ndarray) -> np.ndarray:
    """The table at ``step``: the random init blended into the real table, progress linear in log step."""
    t = np.log1p(step) / np.log1p(last)
    return ((1 - t) * init + t * real).astype(np.float32)


@dataclass
class TrainingRun:
    server: object
    repo: str
    good: tuple[str, ...]  # the 40 good revisions, in step order
    corrupt: str
    nonfinite: str
    commits: dict[str, str] = field(default_factory=dict)

    @property
    def all(self) -> tuple[str, ...]:
        """Every served checkpoint, in step order."""
        return tuple(sorted((*self.good, self.corrupt, self.nonfinite), key=lambda r: int(r.split("-")[1])))


def _steps() -> list[int]:
    from pos_geometry.registry.schedules import get_schedule

    steps = np.asarray(get_schedule("stanford-crfm").steps)
    picks = np.unique(np.round(np.geomspace(1, len(steps), N_GOOD + 30)).astype(int) - 1)
    chosen = [int(s) for s in steps[picks] if s not in (CORRUPT_STEP, NAN_STEP)]
    return sorted(set([*chosen[: N_GOOD - 1], int(steps[-1])]))


@pytest.fixture(scope="module")
def training_run(tmp_path_factory, gpt2_wpe) -> TrainingRun:
    root = tmp_path_factory.mktemp("training_run")
    steps = _steps()
    assert len(steps) == N_GOOD
    init = np.random.default_rng(0).normal(0.0, 0.02, gpt2_wpe.shape)
    config = {
        "model_type": "gpt2",
        "n_positions": 1024,
        "n_embd": 768,
        "n_layer": 12,
        "n_head": 12,
        "vocab_size": 4,
    }
    (root / "config.json").write_text(json.dumps(config))
    server = hub_server.HubServer().start()
    run = TrainingRun(
        server,
        REPO,
        tuple(f"checkpoint-{s}" for s in steps),
        f"checkpoint-{CORRUPT_STEP}",
        f"checkpoint-{NAN_STEP}",
    )
    for step in [*steps, CORRUPT_STEP, NAN_STEP]:
        path = root / f"step{step}.safetensors"
        table = table_at(step, steps[-1], gpt2_wpe, init)
        if step == NAN_STEP:
            table[7, 3] = np.nan
        save_file(gpt2_state(table), str(path))
        if step == CORRUPT_STEP:
            rotary_run.corrupt_header(path)
        refs = (f"checkpoint-{step}", "main") if step == steps[-1] else (f"checkpoint-{step}",)
        run.commits[f"checkpoint-{step}"] = server.add_revision(
            REPO, {"config.json": root / "config.json", "model.safetensors": path}, refs=refs
        )
    yield run
    server.stop()


@pytest.fixture
def hub(training_run, monkeypatch, tmp_path) -> TrainingRun:
    hub_server.point_hub_at(monkeypatch, training_run.server, tmp_path)
    training_run.server.fault = None
    training_run.server.clear_log()
    return training_run


@pytest.fixture(scope="module")
def rotary_training_run(tmp_path_factory):
    """The rotary training run of ``tests/sweeps/rotary_run.py`` (a tiny GPT-NeoX as ``stepN`` branches), served."""
    with hub_server.HubServer() as server:
        yield rotary_run.build(server, tmp_path_factory.mktemp("rotary_run"))


@pytest.fixture
def dask_client():
    """``(cluster, client)``: an in-process Dask ``LocalCluster`` (2 workers × 2 threads) and its client."""
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=2, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield cluster, client
