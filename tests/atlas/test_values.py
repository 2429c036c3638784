"""Every atlas array against its definition, written out in float64 from the transformers model's own weights.

The reference reads the query/key rows of each head from the module's parameters with the test's
own knowledge of each layout (separate, GPT-NeoX per-head fused, Phi-3 block-fused, GPT-J
interleaved with partial rotary, GPT-NeoX 25% rotary) and forms each plane's ``2 × d_model``
blocks ``Q`` and ``K`` explicitly: ``‖Q‖_F``, ``‖K‖_F``, the ``d_model × d_model`` matrix ``Qᵀ K``
and its Frobenius norm, ``torch.nn.functional.cosine_similarity`` of the plane's two rows. The
atlas computes the same from the checkpoint's bytes in float32 sums (bfloat16 widened exactly).
"""

from __future__ import annotations

import pytest
import torch

from pos_geometry import rotary_atlas


def _heads(model, arch: str, layer: int) -> tuple[torch.Tensor, torch.Tensor, list[tuple[int, int]]]:
    """``(q (H, hd, d), k (H_kv, hd, d), planes)`` in float64, read from the module's parameters."""
    config = model.config
    n_heads = config.num_attention_heads
    d = config.hidden_size
    hd = d // n_heads
    n_kv = getattr(config, "num_key_value_heads", None) or n_heads
    if arch == "gpt_neox":
        w = model.gpt_neox.layers[layer].attention.query_key_value.weight.double().view(n_heads, 3, hd, d)
        q, k = w[:, 0], w[:, 1]
    elif arch == "phi3":
        w = model.model.layers[layer].self_attn.qkv_proj.weight.double()
        q = w[: n_heads * hd].view(n_heads, hd, d)
        k = w[n_heads * hd : (n_heads + n_kv) * hd].view(n_kv, hd, d)
    else:
        attn = model.transformer.h[layer].attn if arch == "gptj" else model.model.layers[layer].self_attn
        q = attn.q_proj.weight.double().view(n_heads, hd, d)
        k = attn.k_proj.weight.double().view(n_kv, hd, d)
    if arch == "gptj":  # rotate_every_two over the first rotary_dim dims
        planes = [(2 * i, 2 * i + 1) for i in range(config.rotary_dim // 2)]
    else:
        rot = int(hd * config.rope_parameters.get("partial_rotary_factor", 1.0))  # NeoX: rotary_pct
        planes = [(i, i + rot // 2) for i in range(rot // 2)]
    return q.detach(), k.detach(), planes


def _reference(q: torch.Tensor, k: torch.Tensor, planes: list[tuple[int, int]]) -> dict[str, torch.Tensor]:
    n_heads, group = q.shape[0], q.shape[0] // k.shape[0]
    out = {name: torch.zeros(n_heads, len(planes), dtype=torch.float64) for name in
           ("q_norm", "k_norm", "strength", "q_pair_cosine", "k_pair_cosine")}  # fmt: skip
    for h in range(n_heads):
        for i, (a, b) in enumerate(planes):
            qp, kp = q[h, [a, b]], k[h // group, [a, b]]
            out["q_norm"][h, i] = torch.linalg.matrix_norm(qp)
            out["k_norm"][h, i] = torch.linalg.matrix_norm(kp)
            out["strength"][h, i] = torch.linalg.matrix_norm(qp.T @ kp)  # the d_model × d_model form
            out["q_pair_cosine"][h, i] = torch.nn.functional.cosine_similarity(qp[0], qp[1], dim=0)
            out["k_pair_cosine"][h, i] = torch.nn.functional.cosine_similarity(kp[0], kp[1], dim=0)
    out["qk_share"] = out["strength"] / out["strength"].sum(-1, keepdim=True)
    return out


@pytest.mark.parametrize(
    ("arch", "dtype"),
    [
        ("llama", torch.float32),
        ("llama", torch.bfloat16),
        ("mistral", torch.bfloat16),
        ("gpt_neox", torch.float32),
        ("gptj", torch.float32),
        ("phi3", torch.float16),
    ],
)
def test_every_array_equals_its_definition(arch, dtype, tiny_model, tmp_path):
    model, _ = tiny_model(arch, tmp_path / "f32")
    model = model.to(dtype)
    model.save_pretrained(tmp_path / "stored")
    atlas = rotary_atlas(tmp_path / "stored")
    assert atlas.provenance.original_dtype == str(dtype).removeprefix("torch.")
    for layer in range(2):
        ref = _reference(*_heads(model, arch, layer))
        for name in ("q_norm", "k_norm", "qk_share"):
            torch.testing.assert_close(getattr(atlas, name)[layer], ref[name], rtol=2e-6, atol=0, msg=name)
        for name in ("q_pair_cosine", "k_pair_cosine"):
            torch.testing.assert_close(getattr(atlas, name)[layer], ref[name], rtol=0, atol=1e-6, msg=name)
