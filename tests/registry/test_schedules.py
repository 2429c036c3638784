"""Checkpoint schedules: exact counts, membership, nearest neighbours, and an independent oracle."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pos_geometry.errors import InvalidArgumentError
from pos_geometry.registry.schedules import get_schedule, parse_checkpoint, schedule_names


def _crfm_by_loop() -> list[int]:
    """The CRFM schedule as described in words: every 10 to 100, 50 to 2000, 100 to 20000, 1000 to 400000."""
    steps, s = [], 0
    while s <= 400000:
        steps.append(s)
        s += 10 if s < 100 else 50 if s < 2000 else 100 if s < 20000 else 1000
    return steps


def test_crfm_schedule_has_609_checkpoints_matching_the_description():
    sched = get_schedule("stanford-crfm")
    assert len(sched) == 609
    assert list(sched.steps) == _crfm_by_loop()
    assert sched.revisions[0] == "checkpoint-0" and sched.revisions[-1] == "checkpoint-400000"
    # steps seen in the hub commit history of stanford-crfm/arwen-gpt2-medium-x21
    for rev in (
        "checkpoint-10",
        "checkpoint-950",
        "checkpoint-9900",
        "checkpoint-10200",
        "checkpoint-389000",
    ):
        assert rev in sched
    for rev in ("checkpoint-105", "checkpoint-2050", "checkpoint-20100", "checkpoint-400001", "step1000"):
        assert rev not in sched


def test_pythia_schedule_has_154_checkpoints():
    sched = get_schedule("pythia")
    assert len(sched) == 154
    assert sched.revisions[0] == "step0" and sched.revisions[-1] == "step143000"
    assert [s for s in sched.steps if s < 1000] == [0] + [2**k for k in range(10)]
    assert all(b - a == 1000 for a, b in zip(sched.steps[11:], sched.steps[12:], strict=False))


def test_schedules_agree_with_transformer_lens():
    checkpoints = pytest.importorskip("transformer_lens.tools.model_registry.checkpoints")
    assert list(get_schedule("stanford-crfm").steps) == sorted(checkpoints.STANFORD_CRFM_CHECKPOINTS)
    assert list(get_schedule("pythia").steps) == sorted(checkpoints.PYTHIA_CHECKPOINTS)


@given(st.integers(min_value=0, max_value=500000))
def test_nearest_returns_the_closest_published_steps(step):
    sched = get_schedule("stanford-crfm")
    nearest = sched.nearest(step, k=2)
    best = min(sched.steps, key=lambda s: (abs(s - step), s))
    assert sched.revision(best) in nearest
    assert all(r in sched for r in nearest)
    dists = sorted(abs(s - step) for s in sched.steps)
    assert max(abs(parse_checkpoint(r)[1] - step) for r in nearest) == dists[1]


def test_parse_checkpoint_and_unknown_schedule():
    assert parse_checkpoint("checkpoint-400") == ("checkpoint-", 400)
    assert parse_checkpoint("step12") == ("step", 12)
    assert parse_checkpoint("main") is None and parse_checkpoint("step-3") is None
    assert set(schedule_names()) == {"stanford-crfm", "pythia"}
    with pytest.raises(InvalidArgumentError, match="unknown checkpoint schedule"):
        get_schedule("olmo")
    assert 5 not in get_schedule("pythia")  # only revision strings are members
