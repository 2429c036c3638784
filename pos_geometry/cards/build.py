"""``card(model)``: every analysis that applies to the model's kind of position, in one result.

The order (:data:`SECTION_KEYS`): identity (opens the model once, :func:`~pos_geometry.cards.identity.subject`),
the learned table, rotary planes, one model pass on the corpus (hidden states and attention by offset
together), how attention reads position, the residual stream, and the causal edits. Each section that
does not apply to the model, or whose inputs are not on this machine, says so with the reason; nothing is
substituted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from pos_geometry import _progress
from pos_geometry._device import Device
from pos_geometry._progress import Progress, check_progress, new_bar, shown
from pos_geometry.cards.result import SECTION_KEYS, SECTION_TITLES, Card, Section

__all__ = ["SECTION_KEYS", "SECTION_TITLES", "card"]


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def card(
    model: Any,
    corpus: Any = None,
    *,
    fast: bool = False,
    seq_len: int | None = None,
    n_sequences: int | None = None,
    revision: str | None = None,
    device: Device = "auto",
    random_state: int = 0,
    progress: Progress = None,
) -> Card:
    """The positional card of ``model``: how it handles position, each claim with its null.

    Args:
        model: a model-table name, hub repo id, local model folder, ``.gguf`` file, a table file
            (``.npy``/``.safetensors`` holding one table), or a model opened by :func:`~pos_geometry.open_model`.
            The model is opened once: the hidden-state pass and the causal edits run the same one.
        corpus: what the model-running sections read: a text file (tokenised with the model's tokenizer),
            a ``.npy`` of token ids, or an int array ``(n_sequences, seq_len)``. None: the offline default
            text (:mod:`~pos_geometry.cards.corpus`), or random tokens for a model without a tokenizer.
        fast: skip the causal edits and read fewer, shorter contexts (8 × 256 instead of 16 × 512).
        seq_len, n_sequences: the corpus's contexts (defaults as in ``fast``, capped at the model's context).
        revision: branch, tag or commit of a model read from the hub.
        device: where the model runs and the atlases reduce (``"auto"``: CUDA, then MPS, else CPU).
        random_state: seeds every null and bootstrap (and random tokens when they are used).
        progress: as everywhere: None (a bar in a terminal or Jupyter, with a line per running analysis),
            True/False, or a callable ``(sections done, total)`` called after each section.

    Returns:
        the :class:`~pos_geometry.cards.result.Card`; ``card.save(out)`` writes ``index.html``,
            ``card.json`` and ``card.md`` as one folder.

    Raises:
        what :func:`~pos_geometry.load` raises when the model cannot be found or read at all; every
        later failure to apply is a section that says why.
    """
    from pos_geometry.cards.causal_section import causal_section
    from pos_geometry.cards.corpus import check_corpus_options, plan_corpus
    from pos_geometry.cards.identity import identity_section, subject
    from pos_geometry.cards.model_sections import UNAVAILABLE, attention_section, residual_section, run_hidden
    from pos_geometry.cards.rotary_section import rotary_section
    from pos_geometry.cards.table_section import table_section

    check_corpus_options(corpus, seq_len=seq_len, n_sequences=n_sequences)  # before any work
    progress = check_progress(progress)
    report = progress if callable(progress) else None
    live = (
        _progress._bar.get() is not None
    )  # a caller's bar (the CLI's): inner analyses add their lines to it
    inner: Progress = None if live or not (callable(progress) or progress is False) else False
    total = len(SECTION_KEYS)
    sections: list[Section] = []
    with new_bar(show=shown(progress) and not live) as bar:
        tid = bar.add_task("card", total=total)

        def done(section: Section, seconds: float) -> None:
            sections.append(section.with_seconds(seconds))
            bar.update(tid, advance=1)
            if report is not None:
                report(len(sections), total)

        def step(key: str) -> None:
            bar.update(tid, description=f"card: {SECTION_TITLES[key].lower()}")

        step("identity")
        start = time.perf_counter()
        s = subject(model, revision=revision)
        done(identity_section(s), time.perf_counter() - start)
        step("table")
        (table, analysis), seconds = _timed(
            lambda: table_section(s, random_state=random_state, progress=inner)
        )
        done(table, seconds)
        step("rotary")
        (rotary, _), seconds = _timed(lambda: rotary_section(s, device=device))
        done(rotary, seconds)
        plan = plan_corpus(corpus, fast=fast, context=s.context, seq_len=seq_len, n_sequences=n_sequences)
        step("residual")
        run, run_seconds = _timed(
            lambda: run_hidden(s, plan, device=device, random_state=random_state, progress=inner)
        )
        step("attention")
        attention, seconds = _timed(lambda: attention_section(s, run, device=device))
        done(attention, seconds)
        residual, seconds = _timed(lambda: residual_section(s, run))
        done(residual, seconds + run_seconds)
        step("causal")
        (causal, _), seconds = _timed(
            lambda: causal_section(
                s,
                run.plan,
                fast=fast,
                device=device,
                random_state=random_state,
                progress=inner,
                unavailable=run.why if run.why.startswith(UNAVAILABLE) else "",
                analysis=analysis,
            )
        )
        done(causal, seconds)
    corpus_note = None
    if run.hidden is not None:
        corpus_note = f"{run.plan.note} ({run.hidden.corpus})"
    elif causal.status == "ran":
        corpus_note = run.plan.note
    return Card(
        model=s.model,
        kind=s.kind,
        sections=tuple(sections),
        corpus=corpus_note,
        fast=bool(fast),
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        provenance=s.provenance,
    )
