"""The plotting package: its public names, and that importing it changes no plotly setting."""

from __future__ import annotations

import subprocess
import sys

import pos_geometry.plotting as plotting


def test_public_names_are_callable() -> None:
    assert plotting.__all__ == sorted(plotting.__all__)
    for name in plotting.__all__:
        assert callable(getattr(plotting, name)), name


def test_import_has_no_global_effects() -> None:
    code = (
        "import os, plotly.io as pio\n"
        "before = (pio.renderers.default, pio.templates.default, dict(os.environ))\n"
        "import pos_geometry.plotting\n"
        "after = (pio.renderers.default, pio.templates.default, dict(os.environ))\n"
        "assert before == after, (before[:2], after[:2])\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
