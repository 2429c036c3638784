"""A synthetic rotary training run for the sweep tests: a tiny GPT-NeoX (Pythia's architecture) written by
transformers, served by the loopback hub as ``stepN`` branches, whose long-wavelength plane in one head
is amplified more at each step (so the atlas "forms": that plane takes over the head's QK form).

Registered by ``tests/conftest.py`` as ``_pos_geometry_tests_rotary_run``; :func:`corrupt_header` and
:func:`swept` serve the learned run of ``conftest.py`` too.

Config: hidden 128, 4 heads (head_dim 32), rotary_pct 0.25 (rotary_dim 8: 4 planes), base 100, context
128: wavelengths 2π·100^(i/4) = 6.3, 19.9, 62.8, 199 positions; planes 0-2 complete a cycle within the
context (critical), plane 3 does not. Each fused q/k/v tensor (192 KiB) is longer than the range reader's
64 KiB read-ahead, and the wide MLP and embeddings make the weight file ~8x the q/k/v tensors, so "only
the q/k bytes travel" is measurable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = "test-eleuther/neox-run"
STEPS = (0, 1, 8, 64, 512)
FACTORS = (1.0, 2.0, 4.0, 8.0, 16.0)  # the planted plane's rows are multiplied by this at each step
CORRUPT_STEP, NAN_STEP = 1000, 2000
LAYER, HEAD, PLANE = 0, 1, 3  # the planted plane: long-wavelength (199 > context 128)
HIDDEN, N_HEADS, HEAD_DIM, ROTARY_DIM, N_LAYERS = 128, 4, 32, 8, 2
QKV_BYTES = N_LAYERS * 3 * HIDDEN * HIDDEN * 4  # the fused query_key_value weights, float32


def config():
    import transformers

    return transformers.GPTNeoXConfig(
        hidden_size=HIDDEN, intermediate_size=1024, num_attention_heads=N_HEADS, num_hidden_layers=N_LAYERS,
        rotary_pct=ROTARY_DIM / HEAD_DIM, rope_parameters={"rope_type": "default", "rope_theta": 100.0},
        max_position_embeddings=128, vocab_size=1000,
    )  # fmt: skip


def plane_rows(head: int, plane: int, kv: bool) -> list[int]:
    """Rows of ``query_key_value.weight`` holding (head, plane): GPT-NeoX lays rows out per head as
    ``[q_h | k_h | v_h]`` and pairs dims ``(i, i + rotary_dim/2)`` (rotate_half)."""
    base = head * 3 * HEAD_DIM + (HEAD_DIM if kv else 0)
    return [base + plane, base + plane + ROTARY_DIM // 2]


@dataclass
class RotaryRun:
    server: object
    repo: str
    folder: Path
    good: tuple[str, ...]
    corrupt: str
    nonfinite: str
    commits: dict[str, str] = field(default_factory=dict)

    @property
    def all(self) -> tuple[str, ...]:
        return (*self.good, self.corrupt, self.nonfinite)

    def weights(self, revision: str) -> dict[str, np.ndarray]:
        """The served weights of ``revision`` (read with safetensors, not by pos_geometry)."""
        from safetensors.numpy import load_file

        return load_file(self.folder / revision / "model.safetensors")


def corrupt_header(path: Path) -> None:
    """Make ``path``'s safetensors header length point far past the end of the file (it does not parse)."""
    data = bytearray(path.read_bytes())
    data[:8] = (10**12).to_bytes(8, "little")
    path.write_bytes(bytes(data))


def swept(run, tmp: Path, revisions, **kwargs):
    """``(result, log)``: a sweep of ``run`` with fresh caches under ``tmp``, and the server's log of it."""
    import _pos_geometry_tests_hub_server as hub_server
    import pytest

    from pos_geometry.sweeps import sweep

    with pytest.MonkeyPatch.context() as mp:
        hub_server.point_hub_at(mp, run.server, tmp)
        run.server.clear_log()
        result = sweep(run.repo, revisions, **kwargs)
        return result, run.server.requests()


def build(server, root: Path) -> RotaryRun:
    """Write the step-0 checkpoint with ``save_pretrained``, derive the later ones from its file (the planted
    rows scaled, by safetensors, keeping transformers' metadata) and serve them all from ``server``."""
    import torch
    import transformers
    from safetensors.torch import load_file, save_file

    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config())
    model.save_pretrained(root / "written", safe_serialization=True)
    written = root / "written" / "model.safetensors"
    state = load_file(written)
    key = f"gpt_neox.layers.{LAYER}.attention.query_key_value.weight"
    rows = plane_rows(HEAD, PLANE, False) + plane_rows(HEAD, PLANE, True)
    run = RotaryRun(
        server, REPO, root, tuple(f"step{s}" for s in STEPS), f"step{CORRUPT_STEP}", f"step{NAN_STEP}"
    )
    for step, factor in [*zip(STEPS, FACTORS, strict=True), (CORRUPT_STEP, 16.0), (NAN_STEP, 16.0)]:
        folder = root / f"step{step}"
        folder.mkdir()
        tensors = {k: v.clone() for k, v in state.items()}
        tensors[key][rows] *= factor
        if step == NAN_STEP:
            tensors["gpt_neox.layers.1.attention.query_key_value.weight"][5, 3] = float("nan")
        weights = folder / "model.safetensors"
        save_file(tensors, str(weights), metadata={"format": "pt"})
        if step == CORRUPT_STEP:
            corrupt_header(weights)
        refs = (f"step{step}", "main") if step == STEPS[-1] else (f"step{step}",)
        run.commits[f"step{step}"] = server.add_revision(
            REPO, {"config.json": root / "written" / "config.json", "model.safetensors": weights}, refs=refs
        )
    return run
