"""The card's sections that read the model beyond its table: how attention reads position, and position in
the residual stream.

One :func:`~pos_geometry.hidden_positions` pass on the corpus gives both the residual-stream decomposition
and attention by offset. For learned tables, :func:`~pos_geometry.position_qk_atlas` adds the QK view of the
table against its null (every layer's ``W_k`` rows permuted), judged by the reproduction's own look-back
rule (:func:`~pos_geometry.reproduction.lookback_section.claim_lookback`): the same code, not a copy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pos_geometry.cards.corpus import CorpusPlan
from pos_geometry.cards.identity import Subject
from pos_geometry.cards.result import Section, Verdict, not_run, ran, short_reason
from pos_geometry.errors import MissingTensorError, NotApplicableError, NotCachedError

__all__ = [
    "LOCAL_WIDTH",
    "UNAVAILABLE",
    "ModelRun",
    "attention_section",
    "local_mass",
    "residual_section",
    "run_hidden",
]

LOCAL_WIDTH = 4
"""Offsets ``0 .. LOCAL_WIDTH - 1`` count as "the nearest tokens" in the attention-by-offset verdict."""

_UNAVAILABLE = (MissingTensorError, NotCachedError)
UNAVAILABLE = "the model's weights are not all here"
"""How :func:`run_hidden`'s reason starts when the model could not be read (the causal section then says the same)."""


@dataclass(frozen=True)
class ModelRun:
    """The one model pass of a card: ``hidden`` (a :class:`~pos_geometry.HiddenPositions`, or None and
    ``why`` says why), the corpus ``plan`` it read, and ``attention_why`` when attention could not be read."""

    hidden: Any
    plan: CorpusPlan
    why: str = ""
    attention_why: str = ""


def run_hidden(s: Subject, plan: CorpusPlan, *, device: Any, random_state: int, progress: Any) -> ModelRun:
    """One pass of the model on the corpus: hidden states and attention by offset together.

    A text corpus on a model without a tokenizer falls back to random tokens (the plan's note says so); a
    model whose attention cannot be read is read for its hidden states alone (``attention_why`` says why).
    """
    if s.no_model:
        return ModelRun(None, plan, f"a bare table has no model to run ({s.no_model})")
    if s.unavailable:
        return ModelRun(None, plan, f"{UNAVAILABLE}: {s.unavailable}")
    from pos_geometry.hidden.corpus import NoTokenizerError
    from pos_geometry.hidden.decomposition import hidden_positions

    def run(p: CorpusPlan) -> ModelRun:
        options = dict(seq_len=p.seq_len, n_sequences=p.n_sequences, device=device, random_state=random_state,
                       progress=progress)  # fmt: skip
        model = s.opened(device)  # opened once for the card (the causal edits run the same one)
        try:
            return ModelRun(hidden_positions(model, p.tokens, attention=True, **options), p)
        except NotApplicableError as exc:
            if "attention=False" not in str(exc):
                raise
            return ModelRun(hidden_positions(model, p.tokens, attention=False, **options), p, "", str(exc))

    try:
        try:
            return run(plan)
        except NoTokenizerError:
            return run(plan.random("the model has no tokenizer for the text corpus"))
    except _UNAVAILABLE as exc:
        return ModelRun(None, plan, f"{UNAVAILABLE}: {exc}")
    except NotApplicableError as exc:
        return ModelRun(None, plan, str(exc))


def both_ways(att: Any) -> bool:
    """Whether the model attended to later keys too (pairs counted at negative offsets ``Δ = query − key``)."""
    offsets, counts = np.asarray(att.offsets), np.asarray(att.counts)
    return bool(np.any(counts[offsets < 0] > 0))


def local_mass(att: Any, width: int = LOCAL_WIDTH) -> tuple[np.ndarray, float]:
    """``((n_layers, n_heads) mean attention on the nearest offsets, the same for uniform attention)``.

    Both are the same estimator: the mean over queries of the probability at offset ``Δ = query − key``, summed
    over the near offsets: ``0 ≤ Δ < width`` for a causal model, ``|Δ| < width`` for one that attends both ways
    (:func:`both_ways`). Uniform attention puts ``1/v(q)`` on each of the ``v(q)`` keys query ``q`` may see: the
    ones within the widest offset the model attended to (its window, or the whole context), before it only or on
    both sides; a causal model over its whole context gives ``1/(q + 1)``.
    """
    offsets, counts = np.asarray(att.offsets), np.asarray(att.counts)
    t = int(att.seq_len)
    q = np.arange(t)
    reach = int(np.max(np.abs(offsets[counts > 0]), initial=0))
    two_sided = both_ways(att)
    visible = np.minimum(q, reach) + (np.minimum(t - 1 - q, reach) if two_sided else 0) + 1
    near = (np.abs(offsets) < width) if two_sided else (offsets >= 0) & (offsets < width)
    uniform = 0.0
    for d in offsets[near].tolist():
        queries = q[max(0, d) : min(t, t + d)]  # those whose key q − Δ is in the context
        if queries.size:
            uniform += float(np.mean(1.0 / visible[queries]))
    observed = att.mean_probability[:, :, near].sum(-1)
    return observed, uniform


def _offset_verdict(att: Any) -> tuple[Verdict, dict[str, Any]]:
    mass, uniform = local_mass(att)
    if both_ways(att):
        null = "uniform attention over every key (it attends both ways)"
        nearest = f"{2 * LOCAL_WIDTH - 1} nearest tokens (within {LOCAL_WIDTH - 1} either side)"
    else:
        null, nearest = "uniform causal attention", f"{LOCAL_WIDTH} nearest tokens"
    n_heads = att.n_heads
    local = mass >= 0.5
    flat = np.argsort(mass, axis=None)[::-1][:3]
    top = [(att.layers[i // n_heads], int(i % n_heads), float(mass.flat[i])) for i in flat]
    text = (
        f"attention by offset: {int(local.sum())} of {mass.size} heads put at least half their attention on the "
        f"{nearest} ({null}: {uniform:.2f}; mean over heads {mass.mean():.2f}); "
        "most local heads (attention on the nearest tokens) "
        + ", ".join(f"L{layer} H{head} ({m:.2f})" for layer, head, m in top)
    )
    values = {
        "local_mass": mass,
        "uniform_local_mass": uniform,
        "local_heads": int(local.sum()),
        "most_local": top,
    }
    return Verdict(text, null=f"{null} ({uniform:.2f})"), values


def _qk_view(s: Subject, device: Any) -> tuple[list[Verdict], list[tuple[str, str]], dict, list, list, str]:
    """The learned table's QK view beside its null; ``why`` is set when it cannot be read."""
    from pos_geometry.atlas.position_qk import position_qk_atlas
    from pos_geometry.plotting import plot_position_qk_offsets
    from pos_geometry.reproduction.lookback_section import ROTATION, claim_lookback

    try:
        view = position_qk_atlas(s.model, revision=s.revision, device=device)
        null = position_qk_atlas(s.model, revision=s.revision, device=device, permute_key_rows=True)
    except (*_UNAVAILABLE, NotApplicableError) as exc:
        return [], [], {}, [], [], str(exc)
    claim = claim_lookback(view, null)
    v = claim.values
    verdicts = [
        Verdict(
            f"how heads read the table: the position term is {v['toeplitz_share_mean']:.2f} a function of the offset "
            f"alone ({v['heads_above_null']} of {v['n_heads']} heads above their null: {v['toeplitz_null_mean']:.2f} "
            f"with W_k's rows permuted); {v['rotating_heads']} heads rotate the table's top plane (rotation fit ≥ "
            f"{ROTATION:g}; {v['rotating_heads_null']} in the null); 'look back N tokens' by that rotation: "
            f"{claim.verdict} (decided by four rules together, the reproduction's look-back criterion; the one with a "
            f"test, rotation agreeing with the logit peak more often than in the null: Fisher's exact "
            f"p = {v['agreement_vs_null_p']:.3g})",
            null="the same heads with W_k's rows permuted",
        )
    ]
    figures = [("qk_offsets", plot_position_qk_offsets(view),
                "Each head's mean positional QK logit by offset, read from the table through its norm and W_q/W_k.")]  # fmt: skip
    values = {"toeplitz_share_mean": v["toeplitz_share_mean"], "toeplitz_null_mean": v["toeplitz_null_mean"],
              "heads_above_null": v["heads_above_null"], "rotating_heads": v["rotating_heads"],
              "rotating_heads_null": v["rotating_heads_null"], "look_back": claim.verdict, "measured": claim.measured}  # fmt: skip
    return verdicts, list(view.summary_rows()), values, figures, [view.provenance, null.provenance], ""


def attention_section(s: Subject, run: ModelRun, *, device: Any = "auto") -> Section:
    """How attention reads position: the QK view (learned tables) and attention by offset on the corpus."""
    key = "attention"
    if s.kind == "table file":
        return not_run(key, "does not apply", f"a bare table has no attention weights ({s.no_model})")
    if s.unavailable:
        return not_run(key, "not available", f"{UNAVAILABLE}: {s.unavailable}")
    verdicts, rows, values, figures, provenance = [], [], {}, [], []
    notes = []
    if s.kind == "learned table":
        v, r, numbers, figs, prov, why = _qk_view(s, device)
        verdicts += v
        rows += r
        values["qk_view"] = numbers
        figures += figs
        provenance += prov
        if why:
            notes.append(f"QK view of the table: {short_reason(why)}")
    att = getattr(run.hidden, "attention", None)
    if att is not None:
        from pos_geometry.plotting import plot_attention_offsets

        v, numbers = _offset_verdict(att)
        verdicts.append(v)
        values["by_offset"] = numbers
        rows += [(f"by offset: {k}", val) for k, val in att.summary_rows() if not k.startswith("layer ")]
        figures.append(("attention_offsets", plot_attention_offsets(att, value="mean_probability", max_offset=64),
                        f"Mean attention probability by offset (query minus key), per layer and head, on the corpus: "
                        f"offsets 0–64 shown, of the {int(att.offsets[0])}–{int(att.offsets[-1])} read."))  # fmt: skip
        provenance.append(att.provenance)
    else:
        notes.append(f"attention by offset: {short_reason(run.why or run.attention_why)}")
    if not verdicts:
        return not_run(key, "not available", "; ".join(notes))
    verdicts += [Verdict(n, "not available") for n in notes]
    return ran(key, verdicts, rows, values, provenance, figures)


def residual_section(s: Subject, run: ModelRun) -> Section:
    """Position in the residual stream: each layer's positional share beside its sampling floor."""
    key = "residual"
    hidden = run.hidden
    if hidden is None:
        status = "does not apply" if s.kind == "table file" else "not available"
        return not_run(key, status, run.why)
    from pos_geometry.hidden.reading import layer_line, residual_reading
    from pos_geometry.plotting import plot_hidden_metrics, plot_hidden_trajectory

    metric_rows = hidden.metrics_rows()
    reading = residual_reading(metric_rows, hidden.skip_first)
    verdict = Verdict(
        f"residual stream: {reading['sentence']}",
        null="the positional share the same contexts give with no positional signal (the sampling floor)",
    )
    rows = [
        ("corpus", hidden.corpus),
        (
            "layer numbering",
            "layer 0 is the embedding output; layer k ≥ 1 the output of block k − 1 (blocks from 0)",
        ),
    ] + [(f"layer {r['layer']}", layer_line(r, hidden.n_components, hidden.skip_first)) for r in metric_rows]
    figures = [
        ("residual_metrics", plot_hidden_metrics(hidden), "Each layer's positional share beside its sampling floor."),
        ("residual_trajectory", plot_hidden_trajectory(hidden),
         "Each layer's positional part in its top three principal components (slider: layer)."),
    ]  # fmt: skip
    values = {"reading": reading, "metrics": metric_rows}
    return ran(key, (verdict,), rows, values, (hidden.provenance,), figures)
