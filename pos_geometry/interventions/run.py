"""``intervene``: does the model use its positional geometry? The loss with and without one positional edit.

The model runs over a corpus twice (more for a sweep): as it is, and with an :mod:`edit
<pos_geometry.interventions.edits>` applied where the model computes position. Both passes share
the tokenised corpus and its batches; each pass streams it, keeping per sequence the summed loss
and per position the summed loss (memory does not grow with the corpus). The result holds

* the mean loss of each pass (nats per predicted token) and their difference, with a bootstrap interval
  over sequences (the sequences are resampled, not the tokens: tokens of one context are not independent).
  The loss is the model's objective, which its attention direction decides: the next-token loss of a causal
  decoder, the masked-token loss of a model that attends both ways (:mod:`~pos_geometry.interventions.masking`
  states its masking rule);
* the loss by position (next-token: position ``t`` predicts token ``t + 1``; masked-token: the masked
  position's own token, averaged over the contexts that mask it);
* with ``attention``, :func:`~pos_geometry.attention_by_offset` of both passes, measured in them.

The model is left exactly as it was (every change is undone, whatever happens).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Unpack

import numpy as np
import torch

from pos_geometry import _progress
from pos_geometry._device import Device
from pos_geometry.analysis._results import Result
from pos_geometry.embedding import Provenance
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.hidden.attention import AttentionByOffset, OffsetCollector
from pos_geometry.hidden.run import Run, RunOptions, start
from pos_geometry.interventions.edits import Edit
from pos_geometry.interventions.masking import Masking, masking_for
from pos_geometry.interventions.target import EditTarget

__all__ = ["Intervention", "InterventionSweep", "intervene", "intervene_sweep"]


@dataclass(frozen=True, eq=False, repr=False)
class Intervention(Result):
    """The loss of a model with and without one positional edit.

    Attributes:
        edit: the edit's label; ``parameter``: the number a sweep varies (or None).
        base_loss, edited_loss: mean loss (nats per predicted token) of each pass, of the model's
            ``objective``: ``"next-token"`` or ``"masked-token"``.
        delta: ``edited_loss - base_loss``; ``delta_interval``: its bootstrap interval over sequences
            at ``confidence``, from ``n_bootstrap`` resamples.
        sequence_delta: ``(n_sequences,)`` each sequence's mean loss difference.
        base_loss_by_position, edited_loss_by_position: mean loss at each position: ``(seq_len - 1,)`` for
            the next-token loss, ``(seq_len,)`` for the masked-token loss (NaN where no context masks it).
        n_sequences, seq_len, corpus: the corpus.
        base_attention, edited_attention: :class:`AttentionByOffset` of each pass, or None.
        provenance: the model and corpus; ``processing`` names the edit.
    """

    edit: str
    parameter: float | None
    base_loss: float
    edited_loss: float
    delta: float
    delta_interval: tuple[float, float]
    confidence: float
    n_bootstrap: int
    sequence_delta: np.ndarray
    base_loss_by_position: np.ndarray
    edited_loss_by_position: np.ndarray
    n_sequences: int
    seq_len: int
    corpus: str
    provenance: Provenance
    base_attention: AttentionByOffset | None = field(default=None, metadata={"serialize": False})
    edited_attention: AttentionByOffset | None = field(default=None, metadata={"serialize": False})
    objective: str = "next-token"

    @property
    def delta_by_position(self) -> np.ndarray:
        """Edited minus base loss at each position (shaped as the losses by position)."""
        return self.edited_loss_by_position - self.base_loss_by_position

    def summary_rows(self) -> list[tuple[str, str]]:
        low, high = self.delta_interval
        trained = self.provenance.config_dict.get("context_length")
        beyond = (
            f"; past the {trained}-position training context" if trained and self.seq_len > trained else ""
        )
        return [
            ("edit", self.edit),
            ("corpus", self.corpus + beyond),
            (f"{self.objective} loss (nats/token)", f"{self.base_loss:.4f} -> {self.edited_loss:.4f}"),
            (
                f"Δloss, {self.confidence:.0%} interval over sequences",
                f"{self.delta:+.4f} " + _bracket(low, high),
            ),
        ]


@dataclass(frozen=True, eq=False, repr=False)
class InterventionSweep(Result):
    """Several edits against one base pass: the curve Δloss vs the edits' parameter.

    Attributes:
        results: one :class:`Intervention` per edit, in order (they share the base pass).
        base_loss: the unedited model's mean loss.
        provenance: the model and corpus.
    """

    results: tuple[Intervention, ...]
    base_loss: float
    provenance: Provenance

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(r.edit for r in self.results)

    @property
    def parameters(self) -> np.ndarray:
        """``(n_edits,)`` each edit's parameter (NaN where it has none)."""
        return np.array([np.nan if r.parameter is None else r.parameter for r in self.results])

    @property
    def delta(self) -> np.ndarray:
        """``(n_edits,)`` Δloss of each edit."""
        return np.array([r.delta for r in self.results])

    @property
    def delta_interval(self) -> np.ndarray:
        """``(n_edits, 2)`` bootstrap interval of each Δloss."""
        return np.array([r.delta_interval for r in self.results])

    def summary_rows(self) -> list[tuple[str, str]]:
        rows = [(f"base {self.results[0].objective} loss (nats/token)", f"{self.base_loss:.4f}")]
        for r in self.results:
            low, high = r.delta_interval
            rows.append((r.edit, f"Δloss {r.delta:+.4f} " + _bracket(low, high)))
        return rows


@dataclass
class _Pass:
    """The streamed sums of one pass."""

    sequence: np.ndarray  # (n_sequences,) mean loss of each sequence
    position: np.ndarray  # (seq_len - 1,) mean loss at each position
    attention: AttentionByOffset | None


def _run_pass(
    run: Run, target: EditTarget, blocks: tuple[int, ...], max_offset: int | None, masking: Masking | None
) -> _Pass:
    loaded, corpus = run.loaded, run.corpus
    n, t = corpus.n_sequences, corpus.seq_len
    limit = loaded.context_length
    if (
        target.position_offset
        and target.kind == "learned"
        and limit is not None
        and t + target.position_offset > limit
    ):
        raise InvalidArgumentError(
            f"a shift of {target.position_offset} needs positions up to {t + target.position_offset - 1}; the table has "
            f"{limit}. Use a shift <= {limit - t} or shorter contexts (seq_len)."
        )
    per_sequence = np.zeros(n, dtype=np.float64)
    per_position = np.zeros(t if masking else t - 1, dtype=np.float64)
    collector = OffsetCollector(loaded, blocks) if blocks else None
    tokens = torch.from_numpy(corpus.tokens)
    bar = _progress.task("contexts", n, show=run.show) if run.progress is None else contextlib.nullcontext()
    with (
        collector.probing() if collector is not None else contextlib.nullcontext(),
        torch.inference_mode(),
        bar as step,
    ):
        for first in range(0, n, run.batch_size):
            ids = tokens[first : first + run.batch_size].to(loaded.device)
            kwargs: dict[str, Any] = {"input_ids": ids, "use_cache": False}
            if target.position_offset:
                kwargs["position_ids"] = (
                    torch.arange(t, device=ids.device) + target.position_offset
                ).expand_as(ids)
            if masking is None:
                logits = loaded.module(**kwargs).logits[:, :-1].float()
                loss = torch.nn.functional.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1), reduction="none"
                ).view(ids.shape[0], t - 1).double().cpu()  # fmt: skip
                per_sequence[first : first + ids.shape[0]] = loss.mean(1).numpy()
                per_position += loss.sum(0).numpy()
            else:
                mask = torch.from_numpy(masking.positions[first : first + ids.shape[0]]).to(ids.device)
                kwargs["input_ids"] = ids.masked_fill(mask, masking.token_id)
                logits = loaded.module(**kwargs).logits.float()
                loss = torch.nn.functional.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]), ids.reshape(-1), reduction="none"
                ).view(ids.shape).masked_fill(~mask, 0.0).double().cpu()  # fmt: skip
                per_sequence[first : first + ids.shape[0]] = (loss.sum(1) / mask.sum(1).cpu()).numpy()
                per_position += loss.sum(0).numpy()
            if run.progress is not None:
                run.progress(min(first + run.batch_size, n), n)
            else:
                step(int(ids.shape[0]))
    attention = collector.result(run, max_offset) if collector is not None else None
    if masking is None:
        return _Pass(per_sequence, per_position / n, attention)
    counts = masking.positions.sum(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return _Pass(per_sequence, np.where(counts > 0, per_position / counts, np.nan), attention)


def _bracket(low: float, high: float) -> str:
    if not (math.isfinite(low) and math.isfinite(high)):
        return "(no interval: one sequence)"
    return f"[{low:+.4f}, {high:+.4f}]"


def _interval(
    delta: np.ndarray, n_bootstrap: int, confidence: float, random_state: int
) -> tuple[float, float]:
    if delta.size < 2:  # one sequence: no spread to resample
        return math.nan, math.nan
    rng = np.random.default_rng(random_state)
    means = delta[rng.integers(0, delta.size, size=(n_bootstrap, delta.size))].mean(axis=1)
    tail = (1 - confidence) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return float(low), float(high)


def _check(n_bootstrap: int, confidence: float, random_state: int, tokens: Any) -> None:
    if tokens is None:
        raise InvalidArgumentError(
            "intervene needs a corpus (a text file, a .npy of token ids or an int array (n_sequences, seq_len)); got "
            "None. Random tokens have no next-token structure, so their loss would say nothing about the model."
        )
    if isinstance(n_bootstrap, bool) or not isinstance(n_bootstrap, int) or n_bootstrap < 1:
        raise InvalidArgumentError(f"n_bootstrap must be an int >= 1; got {n_bootstrap!r}.")
    if isinstance(confidence, bool) or not isinstance(confidence, float | int) or not 0 < confidence < 1:
        raise InvalidArgumentError(f"confidence must be a number in (0, 1); got {confidence!r}.")
    if isinstance(random_state, bool) or not isinstance(random_state, int) or random_state < 0:
        raise InvalidArgumentError(f"random_state must be an int >= 0; got {random_state!r}.")


def _blocks(attention: bool | Sequence[int], n_layers: int) -> tuple[int, ...]:
    from pos_geometry.hidden.run import check_layers

    if attention is True:
        return tuple(range(n_layers))
    if attention is False or attention is None:
        return ()
    return check_layers(attention, n_layers - 1)


def intervene_sweep(
    model: Any,
    tokens: Any,
    edits: Sequence[Edit],
    *,
    attention: bool | Sequence[int] = False,
    max_offset: int | None = None,
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    random_state: int = 0,
    batch_size: int | None = None,
    device: Device = "auto",
    **options: Unpack[RunOptions],
) -> InterventionSweep:
    """One base pass and one pass per edit over the same corpus (arguments as in :func:`intervene`).

    Returns an :class:`InterventionSweep`; every edit is checked against the model before anything runs.
    """
    edits = list(edits)
    if not edits or not all(isinstance(e, Edit) for e in edits):
        raise InvalidArgumentError(f"edits must be a non-empty sequence of Edit objects; got {edits!r}.")
    _check(n_bootstrap, confidence, random_state, tokens)
    run = start(
        model,
        tokens,
        batch_size=batch_size,
        device=device,
        options=options,
        loss=True,
        beyond_context=True,
        min_sequences=1,  # a loss needs one sequence; its interval needs two
    )
    target = EditTarget(run.loaded)
    for edit in edits:  # every edit must apply before the base pass runs
        edit.check(target)
        if edit.rehearse:
            with target.editing():
                edit.apply(target)
    blocks = _blocks(attention, run.loaded.n_layers)
    masking = masking_for(run, random_state)
    base = _run_pass(run, target, blocks, max_offset, masking)
    results = []
    for edit in edits:
        with target.editing():
            edit.apply(target)
            edited = _run_pass(run, target, blocks, max_offset, masking)
        results.append(_result(run, edit, base, edited, n_bootstrap, confidence, random_state, masking))
    base_loss = float(base.sequence.mean())
    return InterventionSweep(tuple(results), base_loss, _provenance(run, None, masking))


def intervene(
    model: Any,
    tokens: Any,
    edit: Edit,
    *,
    attention: bool | Sequence[int] = True,
    max_offset: int | None = None,
    n_bootstrap: int = 1000,
    confidence: float = 0.95,
    random_state: int = 0,
    batch_size: int | None = None,
    device: Device = "auto",
    **options: Unpack[RunOptions],
) -> Intervention:
    """Run ``model`` on ``tokens`` as it is and with ``edit``; return the difference.

    Args:
        model: a model-table name, hub repo id, local transformers folder, ``.gguf`` file, or a loaded model
            with the head of its objective (left where it is, and left unchanged): a causal decoder is
            measured with its next-token loss, a model that attends both ways with its masked-token loss
            (:mod:`~pos_geometry.interventions.masking`: 15% of each context's positions masked with
            ``random_state``).
        tokens: a text file (the model's tokenizer), a ``.npy`` of token ids, or ``(n_sequences, seq_len)``
            ints; cut into ``seq_len`` contexts as in :func:`~pos_geometry.hidden_positions`. A rotary
            model may run contexts longer than its training context (what position interpolation is for);
            the provenance records both lengths.
        edit: an :class:`~pos_geometry.interventions.edits.Edit` (``+`` composes edits).
        attention: also measure attention by offset in both passes: True (every block), False, or block indices.
        max_offset: as in :func:`~pos_geometry.attention_by_offset`.
        n_bootstrap, confidence, random_state: the interval of Δloss over sequences (``random_state`` also
            draws the masked positions of a masked-token loss).
        batch_size, device, options: as in :func:`~pos_geometry.hidden_positions`
            (``seq_len``, ``n_sequences``, ``tokenizer``, ``revision``, ``progress``).

    Returns:
        an :class:`Intervention`.

    Raises:
        NotApplicableError: the edit changes something this model does not have (a table edit on a rotary
            model); MissingTensorError: the checkpoint is not a whole model; InvalidArgumentError: bad arguments.
    """
    sweep = intervene_sweep(
        model, tokens, [edit], attention=attention, max_offset=max_offset, n_bootstrap=n_bootstrap,
        confidence=confidence, random_state=random_state, batch_size=batch_size, device=device, **options,
    )  # fmt: skip
    return sweep.results[0]


def _provenance(run: Run, edit: Edit | None, masking: Masking | None) -> Provenance:
    loaded = run.loaded
    objective = "next-token loss" if masking is None else "masked-token loss"
    return Provenance(
        model_id=loaded.model_id,
        kind="hidden",
        source=f"{loaded.model_id}: {objective} over {run.corpus.description}",
        revision=loaded.revision,
        config=run.config(),
        original_dtype=str(next(loaded.module.parameters()).dtype).removeprefix("torch."),
        processing=(
            objective if masking is None else masking.rule,
            *(("edit: " + edit.label,) if edit is not None else ()),
        ),
    )


def _result(run: Run, edit: Edit, base: _Pass, edited: _Pass, n_bootstrap: int, confidence: float,
            random_state: int, masking: Masking | None) -> Intervention:  # fmt: skip
    delta = edited.sequence - base.sequence
    corpus = run.corpus
    return Intervention(
        edit=edit.label, parameter=edit.parameter, base_loss=float(base.sequence.mean()),
        edited_loss=float(edited.sequence.mean()), delta=float(delta.mean()),
        delta_interval=_interval(delta, n_bootstrap, confidence, random_state), confidence=float(confidence),
        n_bootstrap=n_bootstrap, sequence_delta=delta, base_loss_by_position=base.position,
        edited_loss_by_position=edited.position, n_sequences=corpus.n_sequences, seq_len=corpus.seq_len,
        corpus=corpus.description, provenance=_provenance(run, edit, masking), base_attention=base.attention,
        edited_attention=edited.attention, objective="next-token" if masking is None else "masked-token",
    )  # fmt: skip
