"""select_revisions: 'all', 'every:N', 'log:N' and lists, against the published CRFM and Pythia schedules."""

from __future__ import annotations

import itertools
import math

import pytest

from pos_geometry.errors import InvalidArgumentError
from pos_geometry.registry.schedules import get_schedule
from pos_geometry.sweeps import select_revisions
from pos_geometry.sweeps.revisions import published_from_refs

CRFM = get_schedule("stanford-crfm").revisions
PYTHIA = get_schedule("pythia").revisions


def test_all_is_the_schedule():
    assert select_revisions("all", CRFM) == CRFM and len(CRFM) == 609


def test_every_n_counts_checkpoints_and_keeps_the_final_one():
    picked = select_revisions("every:100", CRFM)
    assert picked == (*[CRFM[i] for i in range(0, 609, 100)], "checkpoint-400000")
    assert select_revisions("every:2", PYTHIA)[-1] == "step143000"  # 154 is even: the last is added
    assert len(select_revisions("every:1", PYTHIA)) == 154


def test_log_n_is_dense_early_and_spans_the_run():
    picked = select_revisions("log:12", PYTHIA)
    steps = [int(r.removeprefix("step")) for r in picked]
    assert steps[0] == 0 and steps[-1] == 143000 and steps == sorted(steps)
    assert 10 <= len(picked) <= 12
    gaps = [math.log1p(b) - math.log1p(a) for a, b in itertools.pairwise(steps)]
    assert max(gaps) < 2.5 * (math.log1p(143000) / 11)  # roughly even in log step


def test_lists_keep_their_order_and_name_steps():
    assert select_revisions([400, "checkpoint-10", 400], CRFM) == ("checkpoint-400", "checkpoint-10")
    assert select_revisions(["main", "step5"], PYTHIA) == (
        "main",
        "step5",
    )  # kept; the sweep records "missing"


@pytest.mark.parametrize(
    "bad, match",
    [("every:0", "positive integer"), ("every", "every:N"), ("sometimes", "every:N"), ([], "non-empty"),
     ([1.5], "name .str. or a training step"), ("all:3", "every:N")],
)  # fmt: skip
def test_bad_rules_say_the_rule(bad, match):
    with pytest.raises(InvalidArgumentError, match=match):
        select_revisions(bad, CRFM)


def test_rules_need_a_schedule_and_steps_need_a_prefix():
    with pytest.raises(InvalidArgumentError, match="Pass the revision names as a list"):
        select_revisions("all", ())
    with pytest.raises(InvalidArgumentError, match="no checkpoint schedule"):
        select_revisions([100], ())


def test_published_from_refs_orders_by_step():
    refs = {"main": "a" * 40, "checkpoint-100": "b" * 40, "checkpoint-20": "c" * 40, "v1": "d" * 40}
    assert published_from_refs(refs) == ("checkpoint-20", "checkpoint-100")
