"""Which checkpoints a sweep reads: ``"all"``, ``"every:N"``, ``"log:N"`` or an explicit list.

A model-table row with a checkpoint schedule (:mod:`pos_geometry.registry.schedules`) names its
checkpoints without any request. Any other repo is asked for its branches once (the Hub's refs
endpoint, one bounded API call: :func:`pos_geometry.sources.hub_api.refs`) and its checkpoint-style
branches (``checkpoint-N``, ``stepN``) are the schedule. The same call also pins every branch to its commit, so the sweep
never asks the Hub "which commit is checkpoint-N" once per checkpoint.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from pos_geometry._describe import describe
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.registry.schedules import parse_checkpoint

__all__ = ["checkpoint_step", "select_revisions"]

_RULES = (
    "'all', 'every:N' (every N-th published checkpoint, the final one included), 'log:N' (N log-spaced ones)"
)


def checkpoint_step(revision: str) -> int | None:
    """The training step of ``checkpoint-N`` / ``stepN``; None for any other revision."""
    parsed = parse_checkpoint(revision)
    return parsed[1] if parsed else None


def _count(spec: str, text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise InvalidArgumentError(
            f"revisions={spec!r}: the count after ':' must be a positive integer; got {text!r}. Use {_RULES}, "
            "or a list of revision names."
        )
    return n


def _every(published: tuple[str, ...], n: int) -> tuple[str, ...]:
    picked = list(published[::n])
    if picked[-1] != published[-1]:
        picked.append(published[-1])  # the final checkpoint anchors the drift to final
    return tuple(picked)


def _log(published: tuple[str, ...], n: int) -> tuple[str, ...]:
    """About ``n`` checkpoints spaced evenly in log(step + 1) (the first and last always included)."""
    steps = [checkpoint_step(r) or 0 for r in published]
    lo, hi = math.log1p(steps[0]), math.log1p(steps[-1])
    chosen: list[int] = []
    for j in range(n):
        target = lo + (hi - lo) * j / max(n - 1, 1)
        best = min(range(len(steps)), key=lambda i: (abs(math.log1p(steps[i]) - target), i))
        if best not in chosen:
            chosen.append(best)
    return tuple(published[i] for i in sorted(chosen))


def select_revisions(
    revisions: str | Sequence[str | int], published: Sequence[str], *, model: str = "the model"
) -> tuple[str, ...]:
    """The revisions to sweep, in training order.

    Args:
        revisions: ``"all"`` (every published checkpoint), ``"every:N"`` (every N-th, counting from the
            first; the final checkpoint is always added), ``"log:N"`` (about N checkpoints evenly spaced in
            log step: dense early, where the table changes fastest), or a list of revision names (any
            branch, tag or commit) and/or steps (ints, named with the schedule's prefix).
        published: the model's published checkpoint revisions, in step order (may be empty for a list).
        model: named in errors.

    A list keeps its order (duplicates dropped); names not published are kept (they are recorded as
    missing by the sweep, not dropped silently).
    """
    published = tuple(published)
    if isinstance(revisions, str):
        rule, _, arg = revisions.strip().partition(":")
        if rule not in ("all", "every", "log") or (rule == "all") != (arg == ""):
            raise InvalidArgumentError(
                f"revisions must be {_RULES}, or a list of revision names; got {revisions!r}."
            )
        if not published:
            raise InvalidArgumentError(
                f"revisions={revisions!r} needs the published checkpoints of {model}, and it has none (no "
                "checkpoint schedule in the model table and no 'checkpoint-N'/'stepN' branches on the Hub). "
                "Pass the revision names as a list."
            )
        if rule == "all":
            return published
        n = _count(revisions, arg)
        return _every(published, n) if rule == "every" else _log(published, n)
    if not isinstance(revisions, Sequence) or isinstance(revisions, bytes) or not revisions:
        raise InvalidArgumentError(
            f"revisions must be {_RULES}, or a non-empty list of revision names or steps; got {describe(revisions)}."
        )
    prefix = _prefix(published)
    out: list[str] = []
    for item in revisions:
        if isinstance(item, bool) or not isinstance(item, str | int) or item == "":
            raise InvalidArgumentError(
                f"each revision must be a name (str) or a training step (int); got {describe(item)}."
            )
        if isinstance(item, int):
            if prefix is None:
                raise InvalidArgumentError(
                    f"revision {item} is a step, but {model} has no checkpoint schedule to name it with; pass "
                    "the revision name (e.g. 'checkpoint-400' or 'step1000')."
                )
            item = f"{prefix}{item}"
        if item not in out:
            out.append(item)
    return tuple(out)


def _prefix(published: tuple[str, ...]) -> str | None:
    for revision in published:
        parsed = parse_checkpoint(revision)
        if parsed:
            return parsed[0]
    return None


def published_from_refs(refs: Mapping[str, str]) -> tuple[str, ...]:
    """The checkpoint-style branch names among ``refs`` (name -> commit), in step order."""
    found = [(parse_checkpoint(name), name) for name in refs]
    return tuple(name for parsed, name in sorted((p, n) for p, n in found if p is not None))
