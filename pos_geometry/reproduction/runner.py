"""``reproduce_blog_post``: measure every claim of the post on what is available, write figures and a report.

The steps: find each table (:mod:`~pos_geometry.reproduction.availability`), measure the claims
(:mod:`~pos_geometry.reproduction.claims`), draw the figures
(:mod:`~pos_geometry.reproduction.figures`), write them and ``report.md`` / ``report.json``
(:mod:`~pos_geometry.reproduction.report`). It works offline unless ``online=True``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from pos_geometry._device import Device, resolve_device
from pos_geometry._files import atomic_write
from pos_geometry.analysis._results import to_jsonable
from pos_geometry.analysis.pca import pca
from pos_geometry.analysis.pipeline import analyze
from pos_geometry.embedding import TokenEmbedding
from pos_geometry.encodings.sinusoidal import sinusoidal
from pos_geometry.errors import ExportError, InvalidArgumentError, MissingTensorError, NotCachedError
from pos_geometry.loading import load_token_embedding
from pos_geometry.plotting.export import find_browser, save_figure
from pos_geometry.reproduction import claims as C
from pos_geometry.reproduction.figures import blog_figures
from pos_geometry.reproduction.located import Located, locate
from pos_geometry.reproduction.models import (
    COMPARISON_MODELS,
    NINE_GPT2S,
    REPRODUCED_MODELS,
    ROTARY_MODELS,
    parse_model_paths,
)
from pos_geometry.reproduction.published import published_vs_measured
from pos_geometry.reproduction.report import FigureEntry, render_json, render_markdown
from pos_geometry.reproduction.uncertainty import (
    column_sine_nulls,
    top3_intervals,
    top3_nulls,
    truncation_null,
)
from pos_geometry.sources.locations import find_data_dir

__all__ = [
    "COMPARISON_MODELS",
    "NINE_GPT2S",
    "REPRODUCED_MODELS",
    "ROTARY_MODELS",
    "ReproductionResult",
    "parse_model_paths",
    "reproduce_blog_post",
]

ROTARY_POSITIONS = 1024  # rows of the rotary tables: the same as GPT-2's, for side-by-side figures

StageReporter = Callable[[str, int, int], None]
"""``on_stage(label, done, total)``: a stage starts with ``done`` of ``total`` stages before it (``total`` is fixed
for the whole run); ``("done", total, total)`` at the end."""

_STAGES = (
    "analysing GPT-2 small: PCA, helix and periodicity against their nulls",
    "analysing the GPT-2 family: PCA and helix of each",
    "analysing the comparison tables",
    "uncertainty: jackknife over positions, column sinusoids on the nulls",
    "drawing the figures",
    "reading the rotary models' query/key weights (frequency atlas)",
    "reading GPT-2 small's attention weights (does a head look back N tokens?)",
    "writing the figures",
    "writing the report",
)
"""The stages after the models are looked for, in order."""


@dataclass(frozen=True)
class ReproductionResult:
    """What a reproduction run measured and wrote."""

    out: Path
    claims: tuple[C.Claim, ...]
    located: tuple[Located, ...]
    figures: tuple[FigureEntry, ...]
    report: Path

    @property
    def missing(self) -> tuple[Located, ...]:
        return tuple(loc for loc in self.located if not loc.found)

    def summary_text(self) -> str:
        """A few lines for the terminal: one per claim, the missing models, where the report is."""
        width = max(len(c.key) for c in self.claims)
        lines = [f"{c.key.ljust(width)}  {c.verdict:<17}  {_headline(c.measured)}" for c in self.claims]
        if self.missing:
            lines.append(f"missing ({len(self.missing)}): " + ", ".join(loc.name for loc in self.missing))
            lines += [f"  fetch {loc.name}: {loc.fetch}" for loc in self.missing]
        n_files = sum(len(f.files) for f in self.figures)
        lines.append(f"wrote {self.report} and {n_files} figure file(s) to {self.out}")
        return "\n".join(lines)


def _headline(text: str, limit: int = 100) -> str:
    """The first clause of a claim's measurement (up to ``;``), cut at a word boundary."""
    head = text.split("; ")[0]
    return head if len(head) <= limit else head[: head.rfind(" ", 0, limit)] + " …"


def _tokens(path: Path | None, online: bool, device: torch.device) -> tuple[TokenEmbedding | None, str]:
    if path is not None:
        return load_token_embedding(path, model_id="gpt2", device=device), f"{path} (given with --tokens)"
    try:
        return load_token_embedding("gpt2", offline=not online, device=device), "local cache"
    except (NotCachedError, MissingTensorError):
        return None, (
            "GPT-2 small's token embedding (wte) is not available here; pass --tokens CHECKPOINT, or fetch it "
            "with `python -c \"import pos_geometry as pg; pg.load_token_embedding('gpt2')\"`"
        )


def _write(
    figures: Mapping,
    out: Path,
    formats: Sequence[str],
    on_stage: StageReporter,
    done: int,
    total: int,
    plotlyjs: str,
) -> list[FigureEntry]:
    """Write every figure; one stage (``done`` stages before it, of ``total``), its label counting the figures."""
    static = [f for f in formats if f != "html"]
    skipped = ""
    if static:
        try:
            find_browser()
        except ExportError as exc:
            skipped = f"{', '.join(static)} skipped: {exc}"
            static = []
    fmts = [f for f in formats if f == "html" or f in static]
    entries = []
    for i, (stem, (fig, caption)) in enumerate(figures.items()):
        on_stage(f"{_STAGES[7]} ({i + 1} of {len(figures)}: {stem})", done, total)
        files = tuple(
            save_figure(fig, out / "figures" / f"{stem}.{fmt}", format=fmt, plotlyjs=plotlyjs) for fmt in fmts
        )
        entries.append(FigureEntry(stem, caption, files, skipped))
    return entries


def reproduce_blog_post(
    out: str | os.PathLike[str],
    *,
    data_dir: str | os.PathLike[str] | None = None,
    paths: Mapping[str, Path] | None = None,
    tokens: str | os.PathLike[str] | None = None,
    online: bool = False,
    formats: Sequence[str] = ("html", "png"),
    device: Device = "auto",
    on_stage: StageReporter | None = None,
    plotlyjs: str = "directory",
) -> ReproductionResult:
    """Reproduce "GPT-2's positional embedding matrix is a helix" into ``out``.

    Args:
        out: folder for ``report.md``, ``report.json`` and ``figures/`` (created).
        data_dir: folder of real tables (default: ``../shared/data/real`` beside the checkout, or
            ``$POS_GEOMETRY_DATA``).
        paths: ``{model name: checkpoint}`` read instead of looking in the caches.
        tokens: a checkpoint holding GPT-2 small's ``wte`` (else the caches are tried).
        online: allow downloads of missing tables (only their bytes are fetched).
        formats: figure formats; static ones are skipped, and the report says so, without a browser.
        device: where the analysis runs.
        on_stage: called as ``on_stage(label, done, total)`` as each stage starts.
        plotlyjs: how the HTML figures get plotly.js: ``"directory"`` (one shared ``plotly.min.js`` in
            ``figures/``: offline and small), ``"inline"`` (each file self-contained) or ``"cdn"``.

    Returns:
        a :class:`ReproductionResult`. Missing models are listed with the command that fetches them.
    """
    step = on_stage or (lambda label, done, total: None)
    from pos_geometry.plotting.export import check_plotlyjs

    check_plotlyjs(plotlyjs)
    out = Path(out)
    dev = resolve_device(device)
    folder = find_data_dir(data_dir)
    if data_dir is not None and folder is None:
        raise InvalidArgumentError(
            f"--data-dir {str(data_dir)!r} holds none of the real tables (gpt2_small_wpe.npy, "
            "gpt1_openai_positions_embed.npy); point it at ../shared/data/real or leave it out."
        )
    names = list(REPRODUCED_MODELS)
    # one number per stage, over a total fixed here: each model looked for, then the fixed stages below
    total = len(names) + len(_STAGES)
    after = len(names)  # stages done before the fixed ones
    located: list[Located] = []
    for i, name in enumerate(names):
        step(f"looking for {name}", i, total)
        n_rows = ROTARY_POSITIONS if name in ROTARY_MODELS else None
        located.append(
            locate(name, paths=paths, data_dir=folder, online=online, device=dev, n_positions=n_rows)
        )
    tables = {loc.name: loc.table for loc in located}
    gpt2 = tables["gpt2"]
    token_table, token_where = _tokens(Path(tokens) if tokens is not None else None, online, dev)

    # every table is decomposed once per window; everything below reads these fitted results
    step(_STAGES[0], after, total)
    gpt2_a = analyze(gpt2, analyses=("helix", "periodicity")) if gpt2 is not None else None
    windows = C.fit_windows(gpt2, gpt2_a) if gpt2 is not None else {}
    lens = pca(gpt2.center("d_model"), 3, solver="exact") if gpt2 is not None else None
    family = {}
    step(_STAGES[1], after + 1, total)
    for name in NINE_GPT2S:
        family[name] = (
            gpt2_a if name == "gpt2" else analyze(tables[name], analyses=("helix",)) if tables[name] is not None else None
        )  # fmt: skip
    step(_STAGES[2], after + 2, total)
    # the comparison tables need their PCA and mean similarity by offset only (few surrogates)
    compare = {"analyses": ("periodicity",), "n_surrogates": 19, "alpha": 0.05}
    learned = [analyze(tables[n], **compare) for n in COMPARISON_MODELS if tables[n] is not None]
    rotary = [analyze(tables[n], **compare) for n in ROTARY_MODELS if tables[n] is not None]
    ref_table = sinusoidal(ROTARY_POSITIONS, gpt2.d_model if gpt2 is not None else 768, device=dev)
    reference = [analyze(ref_table, **compare)]
    step(_STAGES[3], after + 3, total)
    intervals = (
        top3_intervals(gpt2, {k: w for k, w in C.TRUNCATION_WINDOWS.items() if w[1] <= gpt2.n_positions},
                       differences=C.TRUNCATION_DIFFERENCES)
        if gpt2 is not None
        else None
    )  # fmt: skip
    column_nulls = column_sine_nulls(gpt2) if gpt2 is not None else None
    variance_nulls = top3_nulls(gpt2) if gpt2 is not None else None
    claims = (
        C.claim_variance(gpt2_a, lens, intervals, variance_nulls),
        C.claim_truncation(windows, intervals, truncation_null(gpt2) if gpt2 is not None else None),
        C.claim_outliers(gpt2),
        C.claim_helix(gpt2_a),
        C.claim_family(family),
        C.claim_similarity(gpt2_a.periodicity if gpt2_a is not None else None),
        C.claim_columns(gpt2_a.periodicity if gpt2_a is not None else None, column_nulls),
        C.claim_tokens(gpt2_a.pca if gpt2_a is not None else None, token_table),
        C.claim_rotary(rotary),
    )

    step(_STAGES[4], after + 4, total)
    figures = blog_figures(
        gpt2=(gpt2, gpt2_a, windows) if gpt2 is not None else None,
        family=family,
        learned=learned,
        rotary=rotary,
        rotary_tables=[tables[n] for n in ROTARY_MODELS if tables[n] is not None],
        reference=reference,
        tokens=token_table,
    )
    step(_STAGES[5], after + 5, total)
    from pos_geometry.reproduction.atlas_section import atlas_section

    rotary_atlas = atlas_section(ROTARY_MODELS, paths=paths, online=online, device=dev)
    figures.update(rotary_atlas.figures)
    step(_STAGES[6], after + 6, total)
    from pos_geometry.reproduction.lookback_section import lookback_section

    lookback = lookback_section(folder, online=online, device=dev)
    figures.update(lookback.figures)
    claims = (*claims, lookback.claim)
    out.mkdir(parents=True, exist_ok=True)
    entries = _write(figures, out, formats, step, after + 7, total, plotlyjs)
    step(_STAGES[8], after + 8, total)

    notes = [
        f"Token embedding: {token_where}.",
        f"Rotary tables are built for the first {ROTARY_POSITIONS} positions (GPT-2's context length) so they can "
        "be compared side by side; their configs allow more.",
        "The sinusoidal table (Vaswani et al.) is included as an analytic reference.",
    ]
    if folder is None:
        notes.append(
            "No folder of real tables was found (../shared/data/real beside the checkout, or $POS_GEOMETRY_DATA)."
        )
    report_md = out / "report.md"
    published = published_vs_measured(gpt2, tuple(windows.values()))
    md = render_markdown(
        claims,
        located,
        entries,
        notes=notes,
        out=out,
        published=published,
        sections=(rotary_atlas.markdown, lookback.markdown),
    )
    atomic_write(report_md, md)
    data = render_json(claims, located, entries, out=out)
    data["notes"] = notes
    data["published_vs_measured"] = [c.to_dict() for c in published]
    atomic_write(out / "report.json", json.dumps(to_jsonable(data), indent=2, allow_nan=False))
    step("done", total, total)
    return ReproductionResult(out, claims, tuple(located), tuple(entries), report_md)
