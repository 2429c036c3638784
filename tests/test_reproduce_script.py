"""scripts/reproduce_blog_post.py is the same command as `pos-geometry reproduce`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "reproduce_blog_post.py"


def test_script_is_the_reproduce_command():
    out = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    for option in ("--out", "--data-dir", "--model", "--tokens", "--online", "--format", "--device"):
        assert option in out.stdout


@pytest.mark.slow
def test_script_errors_are_one_line(tmp_path):
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path), "--model", "gpt2-medium"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1
    assert out.stderr.startswith("error: ") and "NAME=PATH" in out.stderr and "Traceback" not in out.stderr
