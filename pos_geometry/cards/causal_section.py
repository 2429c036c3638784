"""The card's causal section: does the model use its positions? Δloss of a default set of edits, each with a
bootstrap interval over the corpus's sequences, against one shared base pass
(:func:`~pos_geometry.intervene_sweep`).

The default edits are a row per kind (:data:`DEFAULT_EDITS`), each with a control: for a learned table, its
rank-3 reconstruction (only the helix's subspace kept), its fitted helix, and every row replaced by the
mean (position removed: the control that must hurt); for a rotary model, the 4 fastest and the 8 slowest
planes stilled (at most a quarter of the planes each), and the rotation pairing swapped (the control that
must hurt).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pos_geometry.cards.corpus import CorpusPlan
from pos_geometry.cards.identity import Subject
from pos_geometry.cards.model_sections import UNAVAILABLE
from pos_geometry.cards.result import Section, Verdict, not_run, ran, short_reason
from pos_geometry.errors import MissingTensorError, NotApplicableError, NotCachedError

__all__ = ["DEFAULT_EDITS", "causal_section", "default_edits"]

KEY = "causal"


def _learned(n_planes: int) -> list[Any]:
    from pos_geometry.interventions import Helix, MeanTable, Rank

    return [Rank(3), Helix(), MeanTable()]


def _rotary(n_planes: int) -> list[Any]:
    from pos_geometry.interventions import RemovePlanes, SwapPairing

    quarter = max(1, n_planes // 4)  # never more than a quarter of the planes at each end
    return [RemovePlanes(fastest=min(4, quarter)), RemovePlanes(slowest=min(8, quarter)), SwapPairing()]


DEFAULT_EDITS: Mapping[str, Callable[[int], list[Any]]] = {
    "learned table": _learned,
    "rotary": _rotary,
    "rotary, per layer type": _rotary,
}
"""The card's default edits per kind of position, given the number of rotation planes per head (a kind that
is not here has no default edits). Rotary: the 4 fastest and the 8 slowest planes (at most a quarter each)."""


def default_edits(kind: str, n_planes: int = 0) -> list[Any]:
    """Fresh :class:`~pos_geometry.interventions.Edit` objects for ``kind`` (empty when it has none)."""
    make = DEFAULT_EDITS.get(kind)
    return make(n_planes) if make is not None else []


def _line(result: Any, seq_len: int | None) -> Verdict:
    """One edit's Δloss with its bootstrap interval; the interval decides (0 outside it: the edit has an effect)."""
    low, high = result.delta_interval
    if low <= 0.0 <= high:
        effect = f"no measurable cost: {result.delta:+.4f} nats/token"
    else:
        effect = f"{'costs' if result.delta > 0 else 'lowers the loss by'} {abs(result.delta):.4f} nats/token"
    caveat = ""
    if "slowest" in result.edit:
        caveat = (
            f"; the slowest planes turn little within {seq_len or 'these'}-token contexts, so a small cost here says "
            "nothing of what they do over longer ones"
        )
    return Verdict(
        f"causal: {result.edit}: {effect} [{low:+.4f}, {high:+.4f}] ({result.confidence:.0%} bootstrap over "
        f"{result.n_sequences} sequences, resampled as if independent{caveat})",
        "not significant" if low <= 0.0 <= high else "beats its null",
        null="no effect (Δloss 0 inside the interval)",
        interval=(float(low), float(high)),
    )


def causal_section(
    s: Subject, plan: CorpusPlan, *, fast: bool, device: Any, random_state: int, progress: Any,
    edits: list[Any] | None = None, unavailable: str = "", analysis: Any = None,
) -> tuple[Section, Any]:  # fmt: skip
    """The causal section and the :class:`~pos_geometry.InterventionSweep` behind it (None when it did not run).

    ``unavailable``: why the model could not be run for the other sections (it is not tried again).
    ``analysis``: the table section's :class:`~pos_geometry.Analysis`; the helix edit needs its helix, and
    is listed as not applying when the table is not one."""
    if fast:
        return not_run(KEY, "skipped", "fast card: the causal edits were not run"), None
    if s.no_model:
        return not_run(KEY, "does not apply", f"a bare table has no model to run ({s.no_model})"), None
    if unavailable:
        return not_run(KEY, "not available", unavailable), None
    n_planes = min((t.d_model // 2 for t in s.tables.values()), default=0)
    dropped: list[Verdict] = []
    if edits is None:
        edits = default_edits(s.kind, n_planes)
        helix = getattr(analysis, "helix", None)
        if any(type(e).__name__ == "Helix" for e in edits) and (helix is None or helix.verdict != "helix"):
            why = (
                helix.reason
                if helix is not None
                else getattr(analysis, "notes", {}).get("helix", "no helix fit")
            )
            edits = [e for e in edits if type(e).__name__ != "Helix"]
            dropped.append(
                Verdict(f"causal: the table's fitted helix: does not apply: {why}", "does not apply")
            )
    edits = list(edits)
    if not edits:
        why = f"there is no positional table or rotation to edit ({short_reason(s.reason)})"
        return not_run(KEY, "does not apply", why), None
    if plan.tokens is None:
        why = f"the corpus is {plan.note}; random tokens have no structure for a loss to measure, so a loss says nothing. Pass a corpus"
        return not_run(KEY, "not available", why), None
    from pos_geometry.interventions.run import intervene_sweep
    from pos_geometry.plotting import plot_intervention_sweep

    try:
        sweep = intervene_sweep(
            s.opened(device), plan.tokens, edits, seq_len=plan.seq_len, n_sequences=plan.n_sequences,
            device=device, random_state=random_state, progress=progress,
        )  # fmt: skip
    except (MissingTensorError, NotCachedError) as exc:
        return not_run(KEY, "not available", f"{UNAVAILABLE}: {exc}"), None
    except NotApplicableError as exc:
        return not_run(KEY, "does not apply", str(exc)), None
    verdicts = (*(_line(r, plan.seq_len) for r in sweep.results), *dropped)
    rows = (("corpus", sweep.results[0].corpus), *sweep.summary_rows())
    values = {
        "base_loss": sweep.base_loss,
        "objective": sweep.results[0].objective,
        "edits": [
            {"edit": r.edit, "delta": r.delta, "interval": r.delta_interval, "base_loss": r.base_loss,
             "edited_loss": r.edited_loss, "confidence": r.confidence, "n_sequences": r.n_sequences}
            for r in sweep.results
        ],
    }  # fmt: skip
    figures = (
        ("causal_sweep", plot_intervention_sweep(sweep), "Δloss of each edit with its bootstrap interval."),
    )
    return ran(KEY, verdicts, rows, values, (sweep.provenance,), figures), sweep
