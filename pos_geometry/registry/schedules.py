"""Training-checkpoint schedules, as data.

Some model families publish their intermediate training checkpoints as hub revisions
(branches): the Stanford CRFM GPT-2 replicas as ``checkpoint-N``, Pythia as ``stepN``.
A schedule is the exact set of steps that were published, written down here once as
inclusive arithmetic segments plus any loose steps, and expanded into a
:class:`CheckpointSchedule` on first use.

Sources for the numbers:

* ``stanford-crfm``: 0..100 every 10, 150..2000 every 50, 2100..20000 every 100,
  21000..400000 every 1000 (609 checkpoints). Matches TransformerLens'
  ``STANFORD_CRFM_CHECKPOINTS`` and the ``checkpoint-N contents`` commit history of
  e.g. ``stanford-crfm/arwen-gpt2-medium-x21`` (checkpoint-10, -950, -9900, -10200, ...).
* ``pythia``: step0, the log-spaced step1, 2, 4, ..., 512, then step1000..step143000
  every 1000 (154 checkpoints), as on the Pythia model cards ("154 intermediate
  checkpoints") and TransformerLens' ``PYTHIA_CHECKPOINTS``.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from pos_geometry.errors import InvalidArgumentError

__all__ = ["SCHEDULE_DATA", "CheckpointSchedule", "get_schedule", "schedule_names", "parse_checkpoint"]

# name -> {"prefix": revision prefix, "segments": [(first, last, stride), ...] inclusive, "steps": [loose steps]}
SCHEDULE_DATA: dict[str, dict[str, Any]] = {
    "stanford-crfm": {
        "prefix": "checkpoint-",
        "segments": [(0, 100, 10), (150, 2000, 50), (2100, 20000, 100), (21000, 400000, 1000)],
        "steps": [],
        "description": "Stanford CRFM GPT-2 replicas (Mistral project): 609 checkpoints, checkpoint-0..checkpoint-400000",
    },
    "pythia": {
        "prefix": "step",
        "segments": [(1000, 143000, 1000)],
        "steps": [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512],
        "description": "EleutherAI Pythia: 154 checkpoints, step0, log-spaced step1..step512, step1000..step143000",
    },
}

_CHECKPOINT_RE = re.compile(r"^(checkpoint-|step)(\d+)$")


def parse_checkpoint(revision: str) -> tuple[str, int] | None:
    """Split a checkpoint-style revision into ``(prefix, step)``; None when it is not one.

    >>> parse_checkpoint("checkpoint-400"), parse_checkpoint("step1000"), parse_checkpoint("main")
    (('checkpoint-', 400), ('step', 1000), None)
    """
    match = _CHECKPOINT_RE.match(revision)
    return (match.group(1), int(match.group(2))) if match else None


@dataclass(frozen=True)
class CheckpointSchedule:
    """The published checkpoints of one training run.

    Attributes:
        name: the schedule's name (``"stanford-crfm"``, ``"pythia"``).
        prefix: what precedes the step number in a revision name (``"checkpoint-"``, ``"step"``).
        steps: every published step, ascending.
        description: one line for humans.
    """

    name: str
    prefix: str
    steps: tuple[int, ...]
    description: str = ""

    @property
    def revisions(self) -> tuple[str, ...]:
        """Every revision name, in step order (``("checkpoint-0", "checkpoint-10", ...)``)."""
        return tuple(self.revision(s) for s in self.steps)

    def revision(self, step: int) -> str:
        """The revision name of ``step`` (not checked against the schedule)."""
        return f"{self.prefix}{step}"

    def __len__(self) -> int:
        return len(self.steps)

    def __contains__(self, revision: object) -> bool:
        if not isinstance(revision, str):
            return False
        parsed = parse_checkpoint(revision)
        return parsed is not None and parsed[0] == self.prefix and self._has(parsed[1])

    def _has(self, step: int) -> bool:
        i = bisect.bisect_left(self.steps, step)
        return i < len(self.steps) and self.steps[i] == step

    def nearest(self, step: int, k: int = 2) -> tuple[str, ...]:
        """The ``k`` published revisions whose steps are closest to ``step`` (ties: the smaller first)."""
        ranked = sorted(self.steps, key=lambda s: (abs(s - step), s))[:k]
        return tuple(self.revision(s) for s in sorted(ranked))


def _expand(data: dict[str, Any]) -> tuple[int, ...]:
    steps = set(int(s) for s in data.get("steps", ()))
    for first, last, stride in data.get("segments", ()):
        steps.update(range(int(first), int(last) + 1, int(stride)))
    return tuple(sorted(steps))


@cache
def get_schedule(name: str) -> CheckpointSchedule:
    """The schedule called ``name``; :class:`InvalidArgumentError` when there is none."""
    data = SCHEDULE_DATA.get(name)
    if data is None:
        raise InvalidArgumentError(
            f"unknown checkpoint schedule {name!r}; the known schedules are {sorted(SCHEDULE_DATA)}. "
            "Add it to pos_geometry/registry/schedules.py."
        )
    return CheckpointSchedule(name, str(data["prefix"]), _expand(data), str(data.get("description", "")))


def schedule_names() -> tuple[str, ...]:
    """Names of every known schedule."""
    return tuple(sorted(SCHEDULE_DATA))
