"""Progress bars (issue 26): shown in a terminal or Jupyter, silent otherwise, under --quiet and with
--json/--csv; the work inside a live bar adds its line to it, and every surrogate is counted."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

import pos_geometry as pg
from pos_geometry import _progress
from pos_geometry.cli import app


class RecordingBar:
    """Stands in for the rich bar: records each line's total and how far it got."""

    def __init__(self) -> None:
        import threading

        self.lock = threading.Lock()  # the analyses' threads report side by side (rich's bar has a lock too)
        self.totals: dict[str, float] = {}
        self.done: dict[str, float] = {}
        self.removed: list[str] = []

    def __enter__(self) -> RecordingBar:
        self._token = _progress._bar.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _progress._bar.reset(self._token)

    def add_task(self, description: str, total: float) -> str:
        self.totals[description], self.done[description] = total, 0
        return description

    def update(self, task: str, advance: int) -> None:
        with self.lock:
            self.done[task] += advance

    def remove_task(self, task: str) -> None:
        self.removed.append(task)


@pytest.fixture
def recording(monkeypatch):
    bar = RecordingBar()
    monkeypatch.setattr(_progress, "new_bar", lambda *a, **k: bar)
    return bar


def _walk() -> np.ndarray:
    return np.cumsum(np.random.default_rng(0).standard_normal((256, 16)), axis=0)


def test_no_bar_when_stderr_is_not_a_terminal(recording):
    # pytest captures stderr: not a terminal, not Jupyter, so the default shows nothing
    assert _progress.shown(None) is False
    pg.analyze(_walk(), n_surrogates=99)
    assert recording.totals == {}


def _helix() -> np.ndarray:
    t = np.arange(384.0)
    curve = np.stack([3 * np.cos(2 * np.pi * t / 48), 3 * np.sin(2 * np.pi * t / 48), t / 48], axis=1)
    rng = np.random.default_rng(0)
    return curve @ rng.standard_normal((3, 16)) + 0.05 * rng.standard_normal((384, 16))


def test_a_forced_bar_counts_every_surrogate_of_analyze(recording):
    result = pg.analyze(_helix(), n_surrogates=99, progress=True)
    assert len(result.helix.tests) == 3 and len(result.recurrence.tests) == 3  # every null ran
    assert result.recurrence.tests[2].statistic == "rotation_line_over_background"
    (line,) = recording.totals
    # three helix nulls, three periodicity nulls and two recurrence nulls, 99 each: all counted, once (the
    # rotation's line is tested on the smooth-GP null's own surrogates: none drawn for it)
    assert recording.totals[line] == 8 * 99 and recording.done[line] == 8 * 99
    assert recording.removed == [line]


@pytest.mark.parametrize(
    ("fit", "line", "nulls"),
    [
        (pg.fit_helix, "helix nulls", 3),
        (pg.periodicity, "periodicity nulls", 3),
        (pg.fit_recurrence, "recurrence nulls", 2),
    ],
)
def test_each_analysis_takes_progress_like_analyze(recording, monkeypatch, fit, line, nulls):
    from rich.console import Console

    fit(_helix(), n_surrogates=19, alpha=0.05, progress=True)  # forced on: every surrogate counted
    assert recording.totals == {line: nulls * 19} and recording.done == {line: nulls * 19}
    monkeypatch.setattr(Console, "is_terminal", property(lambda self: True))
    recording.totals.clear()
    fit(_helix(), n_surrogates=19, alpha=0.05, progress=False)  # forced off, even in a terminal
    assert recording.totals == {}


def test_quiet_wins_over_a_terminal(monkeypatch):
    from rich.console import Console

    monkeypatch.setattr(Console, "is_terminal", property(lambda self: True))
    assert _progress.shown(None) is True
    _progress.set_quiet(True)
    try:
        assert _progress.shown(None) is False and _progress.shown(True) is True
    finally:
        _progress.set_quiet(False)


def test_work_inside_a_live_bar_adds_one_line_to_it(recording):
    with recording, _progress.task("outer", 10) as step:
        step(3)
        with _progress.task("inner", 5):  # inside a task: counted on the outer line
            _progress.advance(2)
    assert recording.totals == {"outer": 10} and recording.done == {"outer": 5}


def test_the_cli_json_output_has_no_bar(tmp_path):
    np.save(tmp_path / "walk.npy", _walk())
    result = CliRunner().invoke(app, ["--quiet", "analyze", f"walk={tmp_path / 'walk.npy'}", "--json"])
    assert result.exit_code == 0, result.output
    assert result.stdout.lstrip().startswith("[") and "nulls of" not in result.output
    assert _progress.shown(None) is False


def test_hidden_states_and_interventions_take_progress_like_every_other_function():
    """``progress`` means the same everywhere: True/False/None for the bar (forced, off, automatic) or a
    callable; ``progress=False`` on ``hidden_positions``/``intervene`` was a TypeError."""
    from pathlib import Path

    import numpy as np

    import pos_geometry as pg
    from pos_geometry.errors import InvalidArgumentError
    from pos_geometry.interventions import SwapPairing

    model = Path(__file__).resolve().parents[1] / "data" / "gguf_parity" / "llama"
    tokens = np.random.default_rng(0).integers(0, 256, size=(2, 16))
    calls = []
    for progress in (False, True, None, lambda done, total: calls.append((done, total))):
        pg.hidden_positions(model, tokens, seq_len=16, device="cpu", progress=progress)
        pg.intervene(
            model, tokens, SwapPairing(), attention=False, device="cpu", n_bootstrap=5, progress=progress
        )
    assert calls and all(total == 2 for _, total in calls)
    with pytest.raises(InvalidArgumentError, match="progress must be True, False, None"):
        pg.hidden_positions(model, tokens, seq_len=16, device="cpu", progress="yes")
