"""The results cache of ``reproduce``: the same inputs give the stored reproduction back without running it;
any input that changes (a table file, a ``--model`` checkpoint, an option) or ``--online`` runs it again."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from pos_geometry.cli import app
from pos_geometry.reproduction.cache import cached_reproduction, reproduction_key, store_reproduction


def _fake_run(calls: list):
    """A stand-in for ``reproduce_blog_post`` that writes a whole (tiny) reproduction and counts its runs."""

    class Result:
        def __init__(self, out: Path):
            self.out = out

        def summary_text(self) -> str:
            return f"helix_3d  reproduced\nwrote {self.out / 'report.md'} and 1 figure file(s) to {self.out}"

    def run(out, **kwargs):
        calls.append(kwargs)
        out = Path(out)
        (out / "figures").mkdir(parents=True, exist_ok=True)
        (out / "figures" / "helix.html").write_text(f"<html>run {len(calls)}</html>")
        (out / "report.md").write_text(f"# run {len(calls)}")
        (out / "report.json").write_text(json.dumps({"run": len(calls)}))
        return Result(out)

    return run


def test_a_second_run_with_the_same_inputs_is_copied_from_the_cache(tmp_path: Path, monkeypatch):
    import pos_geometry.reproduction.runner as runner_module

    calls: list = []
    monkeypatch.setattr(runner_module, "reproduce_blog_post", _fake_run(calls))
    table = tmp_path / "real" / "gpt2_small_wpe.npy"
    table.parent.mkdir()
    np.save(table, np.zeros((4, 3), dtype=np.float32))
    args = ["reproduce", "--format", "html", "--data-dir", str(table.parent), "--device", "cpu"]
    first = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "a")])
    assert first.exit_code == 0 and len(calls) == 1, first.output
    # another folder, the same inputs: the stored files, not a run; the summary names the new folder
    second = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "b")])
    assert second.exit_code == 0 and len(calls) == 1, second.output
    assert (tmp_path / "b" / "report.md").read_text() == "# run 1"
    assert (tmp_path / "b" / "figures" / "helix.html").read_text() == "<html>run 1</html>"
    assert "helix_3d  reproduced" in second.stdout and "from the results cache" in second.stdout
    assert str(tmp_path / "b") in second.stdout and str(tmp_path / "a") not in second.stdout
    # --force runs it again; so does a changed table file
    assert CliRunner().invoke(app, [*args, "--out", str(tmp_path / "b"), "--force"]).exit_code == 0
    assert len(calls) == 2
    np.save(table, np.ones((4, 3), dtype=np.float32))
    assert CliRunner().invoke(app, [*args, "--out", str(tmp_path / "c")]).exit_code == 0
    assert len(calls) == 3 and (tmp_path / "c" / "report.md").read_text() == "# run 3"


def test_the_key_changes_with_every_input_and_is_none_online(tmp_path: Path):
    ckpt = tmp_path / "medium.npy"
    np.save(ckpt, np.zeros((4, 3)))
    base = dict(names=("gpt2",), data_dir=None, paths={}, tokens=None, online=False, formats=("html",),
                device="cpu", plotlyjs="directory")  # fmt: skip
    key = reproduction_key(**base)
    assert key == reproduction_key(**base) and len(key) == 64
    changed = [
        {"formats": ("html", "png")},
        {"plotlyjs": "inline"},
        {"paths": {"gpt2-medium": ckpt}},
        {"tokens": ckpt},
        {"names": ("gpt2", "openai-gpt")},
        {"data_dir": tmp_path},
    ]
    keys = {reproduction_key(**{**base, **c}) for c in changed}
    assert len(keys) == len(changed) and key not in keys
    assert reproduction_key(**{**base, "online": True}) is None


def test_a_folder_without_a_whole_reproduction_is_not_stored(tmp_path: Path):
    key = "0" * 64
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "report.md").write_text("half")
    store_reproduction(key, tmp_path / "out", "summary")
    assert cached_reproduction(key, tmp_path / "elsewhere") is None


@pytest.mark.parametrize("missing", ["report.json", "figures"])
def test_a_damaged_entry_is_a_miss(tmp_path: Path, missing: str):
    import shutil

    from pos_geometry.reproduction.cache import _entry

    out = tmp_path / "out"
    (out / "figures").mkdir(parents=True)
    for name in ("report.md", "report.json"):
        (out / name).write_text("x")
    key = "1" * 64
    store_reproduction(key, out, "summary")
    assert cached_reproduction(key, tmp_path / "copy") == "summary"
    target = _entry(key) / missing
    shutil.rmtree(target) if target.is_dir() else target.unlink()
    assert cached_reproduction(key, tmp_path / "copy2") is None
