"""The query/key biases in the rotary atlas: each plane's QK form on inputs with an always-on coordinate.

A head's query on plane ``p`` is ``q_p = A x + a`` and its key ``k_p = B y + c`` (``A``, ``B``: the
plane's two rows of W_q and W_k ``(2, d_model)``; ``a``, ``c``: their biases ``(2,)``). Over inputs with
unit-variance coordinates (what an RMSNorm hands attention before its gain, which ``fold_norm`` folds
into ``A`` and ``B``), the plane's expected squared logit ``E[(q_pᵀ k_p)²]`` is the sum of four terms
(the cross terms vanish):

* ``"weights"``: ``‖Aᵀ B‖²_F = tr(G_q G_k)``, the input-input bilinear form (all the atlas measures
  without biases; ``G_q = A Aᵀ``, ``G_k = B Bᵀ``, the plane Gram matrices);
* ``"query_bias"``: ``‖Bᵀ a‖² = aᵀ G_k a``, the query bias read against the key's input: a function of
  the key alone;
* ``"key_bias"``: ``‖Aᵀ c‖² = cᵀ G_q c``, the key bias read by the query's input: the same for every key
  of a query;
* ``"constant"``: ``(aᵀ c)²``.

Their sum is ``tr(G̃_q G̃_k)`` with ``G̃ = G + a aᵀ``: the Gram matrices of the rows with the bias
appended as one more input column. With ``biases=True`` the atlas's plane shares use that sum; the same
four terms as the learned-table QK view (:mod:`~pos_geometry.atlas.position_qk`), with the
rotary atlas's weight-level statistics in place of a table's logits.
"""

from __future__ import annotations

import hashlib
import json

import torch

from pos_geometry.sources.roles import QKReader

__all__ = ["TERMS", "layer_biases", "bias_terms"]

TERMS: tuple[str, ...] = ("weights", "query_bias", "key_bias", "constant")


def layer_biases(
    reader: QKReader, index: int, qk_gains: dict[str, torch.Tensor] | None = None
) -> tuple[dict[str, torch.Tensor] | None, list[str]]:
    """``({"q": (n_heads, rotary_dim), "k": (n_kv_heads, rotary_dim)} float64, keys)``: layer ``index``'s
    query/key biases on the rotating rows of each head (times the q/k norm's row gains when ``qk_gains``
    is given, as the rows are), or ``(None, [])`` when the projections have no bias.

    Whether they have one is read from the checkpoint's keys, or from the hub asked of transformers (the
    model built from the config on the meta device); only the rotating entries are read (:meth:`~pos_geometry.sources.tensor_set.Checkpoint.visit_rows`:
    nothing goes to the tensor cache), and from the hub they are kept as a small result, so a second
    atlas of the same commit reads nothing."""
    if reader.layout.latent is not None:  # a biased MLA layout is not derived: none here
        return None, []
    biased = _has_biases(reader, index)
    if biased is False:
        return None, []
    out: dict[str, torch.Tensor] = {}
    keys: list[str] = []
    for which in ("q", "k"):
        found = _rotating_entries(
            reader, _bias_key(reader, index, which), reader.head_starts(which), biased is None
        )
        if found is None:
            return None, []
        rows, spelled = found
        out[which] = rows * qk_gains[which].to(torch.float64) if qk_gains is not None else rows
        if spelled not in keys:
            keys.append(spelled)
    return out, keys


def _has_biases(reader: QKReader, index: int) -> bool | None:
    """Whether layer ``index``'s q/k projections add a bias. The checkpoint's key list answers when it is on this
    machine (a local folder or GGUF file, or a hub checkpoint whose header the q/k reads fetched); when the
    sums all came from the cache, transformers' own model built from the config answers, so nothing is
    requested (None: it cannot say, and the checkpoint's keys decide when the biases are read)."""
    from pos_geometry.registry.architecture import qk_biases

    if reader.checkpoint.knows_keys():
        return reader.checkpoint.has(reader.spelled(_bias_key(reader, index, "q")))
    return qk_biases(reader.config)


def _bias_key(reader: QKReader, index: int, which: str) -> str:
    """The bias beside the weight holding layer ``index``'s ``which`` rows (the fused one's for a qkv layout),
    as the layout names it."""
    role = "qkv" if reader.layout.qkv_key is not None else which
    return reader.layout.keys(index, norm=False)[role].removesuffix("weight") + "bias"


def _rotating_entries(
    reader: QKReader, key: str, starts: list[int], probe: bool
) -> tuple[torch.Tensor, str] | None:
    """``((n_heads, rotary_dim) float64, spelled key)``: the entries ``[start, start + rotary_dim)`` of the
    bias ``key`` (as the layout names it); None when ``probe`` and the checkpoint has no such tensor."""
    ckpt, n = reader.checkpoint, reader.rotary.rotary_dim
    ranges = tuple((s, s + n) for s in starts)
    spec = json.dumps({"bias": "rotary-qk-bias/2", "key": key, "ranges": ranges}, separators=(",", ":"))
    name = f"rotary-qk-bias/{key}/{hashlib.sha256(spec.encode()).hexdigest()[:16]}"
    hit = ckpt.cached_result(name, spec)
    if hit is not None and tuple(hit[0].get("bias", torch.empty(0)).shape) == (len(starts), n):
        return hit[0]["bias"], hit[1].get("key", key)
    spelled = reader.spelled(key)
    if probe and not ckpt.has(spelled):  # no model to ask: the checkpoint's keys decide
        return None
    order = sorted(range(len(ranges)), key=lambda i: ranges[i])
    rows = torch.empty(len(starts), n, dtype=torch.float64)

    def visit(i: int, values: torch.Tensor) -> None:
        rows[order[i]] = values.to(torch.float64)

    ckpt.visit_rows(spelled, [ranges[i] for i in order], visit)
    if not bool(torch.isfinite(rows).all()):
        from pos_geometry.errors import NonFiniteError

        raise NonFiniteError(
            f"the bias {spelled!r} holds NaN or infinite values in its rotating entries; the atlas of such weights "
            "would be NaN. Check or re-export the checkpoint."
        )
    ckpt.store_result(name, {"bias": rows}, spec, {"key": spelled})
    return rows, spelled


def _pairs(bias: torch.Tensor, planes: torch.Tensor) -> torch.Tensor:
    """``(n, n_planes, 2)``: each plane's two entries of ``bias`` ``(n, rotary_dim)``."""
    return torch.stack((bias[:, planes[:, 0]], bias[:, planes[:, 1]]), dim=-1)


def augmented(gram: torch.Tensor, bias: torch.Tensor, planes: torch.Tensor) -> torch.Tensor:
    """``G + b bᵀ`` per head and plane: ``gram`` ``(n, n_planes, 2, 2)``, ``bias`` ``(n, rotary_dim)``."""
    pair = _pairs(bias, planes)
    return gram + pair[..., :, None] * pair[..., None, :]


def bias_terms(
    gq: torch.Tensor, gk: torch.Tensor, bq: torch.Tensor, bk: torch.Tensor, planes: torch.Tensor
) -> torch.Tensor:
    """``(n_heads, n_planes, 4)`` the :data:`TERMS` of each plane (module docstring): ``gq``/``gk``
    ``(n_heads, n_planes, 2, 2)`` plane Grams (keys matched to queries), ``bq``/``bk`` ``(n_heads,
    rotary_dim)`` biases (keys matched)."""
    a, c = _pairs(bq, planes), _pairs(bk, planes)
    weights = (gq * gk).sum(dim=(-1, -2))
    query_bias = torch.einsum("hpi,hpij,hpj->hp", a, gk, a)
    key_bias = torch.einsum("hpi,hpij,hpj->hp", c, gq, c)
    constant = (a * c).sum(-1).square()
    return torch.stack((weights, query_bias, key_bias, constant), dim=-1)
