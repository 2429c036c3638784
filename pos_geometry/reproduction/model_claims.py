"""The post's claims about the helix and the models: GPT-2 small's helix, the nine GPT-2s, tokens against the
positional subspace, and the rotary models' 'W_pos'.

Like :mod:`pos_geometry.reproduction.claims`, each function reads fitted results and returns a :class:`Claim`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pos_geometry.analysis.helix import HelixFit
from pos_geometry.analysis.pca import PCAResult
from pos_geometry.analysis.pipeline import Analysis
from pos_geometry.analysis.subspace import subspace_overlap
from pos_geometry.embedding import TokenEmbedding
from pos_geometry.reproduction.claim import Claim
from pos_geometry.reproduction.claim import missing as _missing

__all__ = ["claim_family", "claim_helix", "claim_rotary", "claim_tokens", "helix_verdict", "helix_words"]


def _null_words(tests) -> str:
    return "; ".join(f"vs {t.null_description}: p = {t.p_value:.3g}" for t in tests) or "no null run"


def helix_words(fit: HelixFit) -> str:
    shape = (
        f"best shape {fit.shape} (ΔBIC {fit.bic['line'] - fit.bic[fit.shape]:.0f} over a line, "
        f"{fit.bic['ellipse'] - fit.bic[fit.shape]:.0f} over an ellipse)"
    )
    if fit.period is None:
        return f"{shape}; helix period: does not apply ({fit.reason})"
    return (
        f"{shape}; {float(fit.turns[0]):.2f} turns of period {fit.period:.0f} positions, R² {fit.r2:.3f}; "
        f"rotation share {fit.rotation_share:.3f} ({_null_words(fit.tests)}); verdict: {fit.verdict}"
    )


def helix_verdict(fit: HelixFit) -> str:
    """reproduced: fit_helix says "helix" (shape and every null); partly: the shape wins and some null is beaten."""
    if fit.verdict == "helix":
        return "reproduced"
    shape_wins = fit.shape in ("helix", "circular_helix") and fit.applies
    if shape_wins and any(t.significant for t in fit.tests):
        return "partly reproduced"
    return "not reproduced"


_HELIX_RULE = (
    "fit_helix's verdict: the helix shape beats a line and an ellipse by ΔBIC > 10, and its rotation share (the "
    "share of the detrended top-3 trajectory that turns in one plane) beats whole-table surrogates through the "
    "same PCA -- random walks of the table's own steps, smooth Gaussian-process curves of its length scale, and "
    "stationary curves with its own pooled spectrum -- at α = 0.01 (199 surrogates each). Reproduced when every "
    "null is beaten, partly reproduced when the shape wins and at least one null is beaten"
)


def claim_helix(gpt2: Analysis | None) -> Claim:
    """The top-3 trajectory is a helix, not a line, a closed loop, or a smooth random curve."""
    statement = "In its top 3 principal components, GPT-2 small's positional matrix traces a helix."
    fit = gpt2.helix if gpt2 is not None else None
    if gpt2 is None or fit is None:
        return _missing("helix", statement, _HELIX_RULE, "GPT-2 small's table")
    values = {
        "shape": fit.shape,
        "verdict": fit.verdict,
        "reason": fit.reason,
        "bic": dict(fit.bic),
        "turns": float(fit.turns[0]) if fit.period is not None else None,
        "period": fit.period,
        "r2": fit.r2,
        "pitch": fit.pitch,
        "rotation_share": fit.rotation_share,
        "nulls": {
            t.null: {"p_value": t.p_value, "n_surrogates": t.n_surrogates, "null_q95": t.null_q95}
            for t in fit.tests
        },
        "pc_vs_cosine_basis_abs_r": [float(v) for v in fit.dct_correlation],
        "harmonics": [
            {"period": float(p), "turns": float(n), "radius": float(r), "pinned": bool(pin)}
            for p, n, r, pin in zip(fit.periods, fit.turns, fit.radii, fit.pinned, strict=True)
        ]
        if fit.applies
        else [],
    }
    harmonics = (
        "; harmonics' periods "
        + ", ".join(
            f"{p:.0f}" + (" (pinned on a search bound: the grid's value, not a finding)" if pin else "")
            for p, pin in zip(fit.periods, fit.pinned, strict=True)
        )
        if fit.applies
        else ""
    )
    measured = (
        helix_words(fit)
        + harmonics
        + (
            "; |r| of PC1–3 with cos(πjt/n): "
            + ", ".join(f"{v:.2f}" for v in fit.dct_correlation)
            + " (a random walk's are > 0.95)"
        )
    )
    return Claim("helix", statement, _HELIX_RULE, measured, helix_verdict(fit), values, (gpt2.provenance,))


def claim_family(analyses: Mapping[str, Analysis | None]) -> Claim:
    """All nine GPT-2s (four OpenAI sizes, five CRFM replicas) trace helices."""
    statement = "All nine GPT-2s (the four OpenAI sizes and five Stanford CRFM replicas) show the same helix."
    criterion = (
        "each table available is judged as in the helix claim (its verdict against its three nulls): reproduced "
        "when all nine are available and each is a helix; not reproduced when an available one is not (partly "
        "when some are); undecidable from these tables when every available one is a helix but some of the nine "
        "are missing; not measured when none is available"
    )
    fits = {name: a.helix if a is not None else None for name, a in analyses.items()}
    measured_fits = {name: fit for name, fit in fits.items() if fit is not None}
    missing = [name for name, fit in fits.items() if fit is None]
    if not measured_fits:
        return _missing(
            "family",
            statement,
            criterion,
            "the nine tables",
            sentence="Not one of the nine tables is available here",
        )
    verdicts = {name: helix_verdict(fit) for name, fit in measured_fits.items()}
    parts = [
        f"{name}: {fit.verdict} (largest p = {max((t.p_value for t in fit.tests), default=float('nan')):.3g})"
        for name, fit in measured_fits.items()
    ]
    measured = f"{len(measured_fits)} of {len(fits)} available; " + "; ".join(parts)
    if missing:
        measured += f"; not available here: {', '.join(missing)}"
    helices = sum(v == "reproduced" for v in verdicts.values())
    if helices == len(fits):
        verdict = "reproduced"
    elif helices == len(verdicts):
        verdict = "undecidable from this table"
    else:
        verdict = "partly reproduced" if helices else "not reproduced"
    provs = tuple(a.provenance for a in analyses.values() if a is not None)
    values = {
        name: {"verdict": f.verdict, "shape": f.shape, "p_values": {t.null: t.p_value for t in f.tests}}
        for name, f in measured_fits.items()
    }
    return Claim(
        "family", statement, criterion, measured, verdict, {"models": values, "missing": missing}, provs
    )


def claim_tokens(gpt2: PCAResult | None, tokens: TokenEmbedding | None, k: int = 3) -> Claim:
    """Token embeddings are concentrated away from the positional subspace."""
    statement = "Token embeddings lie mostly outside the subspace spanned by the positional helix."
    criterion = (
        f"share of (centred) token-embedding variance in the top-{k} positional PCA subspace below k/d, the share "
        "a random subspace of that dimension would hold"
    )
    if gpt2 is None or tokens is None:
        what = "GPT-2 small's table" if gpt2 is None else "GPT-2 small's token embedding (wte)"
        return _missing("tokens", statement, criterion, what)
    ov = subspace_overlap(
        gpt2, tokens.matrix.to(gpt2.components_.device), k, token_provenance=tokens.provenance
    )
    angles = ", ".join(f"{float(a):.1f}°" for a in ov.principal_angles_deg)
    measured = (
        f"{100 * ov.token_variance_fraction:.2f}% of token variance lies in the top-{k} positional subspace "
        f"(random: {100 * ov.random_fraction:.2f}%, i.e. {ov.variance_fraction_vs_random:.2f}× random); "
        f"principal angles to the tokens' own top-{k} subspace: {angles}"
    )
    values = {
        "token_variance_fraction": ov.token_variance_fraction,
        "random_fraction": ov.random_fraction,
        "principal_angles_deg": [float(a) for a in ov.principal_angles_deg],
    }
    verdict = "reproduced" if ov.token_variance_fraction < ov.random_fraction else "not reproduced"
    return Claim(
        "tokens", statement, criterion, measured, verdict, values, (gpt2.provenance, tokens.provenance)
    )


def claim_rotary(analyses: Sequence[Analysis]) -> Claim:
    """Pythia and Mistral have no learned matrix; their exact rotary tables are shown instead."""
    statement = "A (later retracted) comment plotted a positional matrix 'W_pos' for Pythia and Mistral."
    criterion = (
        "does not apply when every such model uses rotary embeddings: it has no learned positional matrix, so any "
        "'W_pos' drawn for it is zeros or initial weights. Each is shown instead as its exact rotary table "
        "cos(p·θ_i), sin(p·θ_i), built from its config and labelled kind='rotary'"
    )
    parts, values = [], {}
    for a in analyses:
        prov = a.provenance
        ratio = a.top3
        parts.append(
            f"{prov.model_id}: rotary table {a.n_positions}×{a.d_model} from "
            + ", ".join(f"{k}={v}" for k, v in sorted(prov.config_dict.items()))
            + f"; top-3 ratio {ratio:.4f}"
        )
        values[prov.model_id] = {"kind": prov.kind, "shape": [a.n_positions, a.d_model], "top3": ratio}
    shapes = ", ".join(f"{a.provenance.model_id} {a.n_positions}×{a.d_model}" for a in analyses)
    measured = (
        f"no learned positional matrix: both use rotary embeddings, shown as their rotary tables ({shapes}); "
        + "; ".join(parts)
        if parts
        else "no rotary model was built"
    )
    verdict = (
        "does not apply" if parts and all(a.provenance.kind == "rotary" for a in analyses) else "not measured"
    )
    return Claim(
        "rotary", statement, criterion, measured, verdict, values, tuple(a.provenance for a in analyses)
    )
