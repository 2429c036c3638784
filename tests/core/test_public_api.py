"""``__all__`` is the public API: this test holds it."""

from __future__ import annotations

import importlib
import subprocess
import sys
import types

import pos_geometry


def _public_members() -> set[str]:
    """What the package exposes once every lazy name is resolved: public, non-module attributes."""
    for name in pos_geometry.__all__:
        getattr(pos_geometry, name)
    return {
        name
        for name, value in vars(pos_geometry).items()
        if (not name.startswith("_") or name == "__version__")
        and not isinstance(value, types.ModuleType)
        and name not in ("annotations", "importlib", "TYPE_CHECKING", "Any")
    }


def test_all_is_exactly_what_the_package_exposes():
    """Derived, not restated (httpx's test_exported_members): every public member is in ``__all__``,
    every name in ``__all__`` is a member, is defined inside pos_geometry, and is listed once."""
    assert sorted(pos_geometry.__all__) == sorted(_public_members())
    assert len(pos_geometry.__all__) == len(set(pos_geometry.__all__))
    assert set(pos_geometry._EXPORTS) | {"__version__"} == set(pos_geometry.__all__)
    for name in pos_geometry.__all__:
        obj = getattr(pos_geometry, name)
        if name != "__version__":
            assert obj.__module__.startswith("pos_geometry."), (name, obj.__module__)
            assert obj.__module__ == pos_geometry._EXPORTS[name] or name in vars(
                importlib.import_module(pos_geometry._EXPORTS[name])
            )
    assert set(dir(pos_geometry)) >= set(pos_geometry.__all__)
    # the namespace shows the API only, not the module's plumbing (Any, importlib, annotations)
    assert set(dir(pos_geometry)) == set(pos_geometry.__all__)


def test_importing_the_package_is_cheap():
    """``import pos_geometry`` loads neither torch nor plotly (public names resolve on first use)."""
    code = "import sys, pos_geometry, pos_geometry.cli\nprint(sorted(m for m in ('torch', 'plotly', 'scipy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_every_public_name_resolves_and_has_a_docstring():
    for name in pos_geometry.__all__:
        obj = getattr(pos_geometry, name)
        if name != "__version__":
            assert obj.__doc__, f"{name} has no docstring"


def test_errors_share_one_base():
    for name in pos_geometry.__all__:
        obj = getattr(pos_geometry, name)
        if isinstance(obj, type) and name.endswith("Error"):
            assert issubclass(obj, pos_geometry.PosGeometryError)


def test_import_does_nothing_global():
    """Importing prints nothing, opens no socket and leaves the plotly renderer and template and the environment
    alone (one interpreter for the package, its plotting and its CLI: each import costs seconds)."""
    code = (
        "import socket\n"
        "def refuse(*a, **k):\n"
        "    raise AssertionError('network touched at import')\n"
        "socket.socket.connect = refuse\n"
        "socket.create_connection = refuse\n"
        "import os, plotly.io as pio\n"
        "before = (pio.renderers.default, pio.templates.default, dict(os.environ))\n"
        "import pos_geometry, pos_geometry.plotting, pos_geometry.cli\n"
        "after = (pio.renderers.default, pio.templates.default, dict(os.environ))\n"
        "assert before == after, (before[:2], after[:2])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout == ""
