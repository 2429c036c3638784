"""``__all__`` is the public API: this test holds it."""

from __future__ import annotations

import subprocess
import sys

import pos_geometry

EXPECTED = {
    "__version__",
    # data type
    "PositionalEmbedding",
    "Provenance",
    "TokenEmbedding",
    # loading
    "load",
    "load_token_embedding",
    "sinusoidal",
    "from_transformer_lens",
    "ModelSpec",
    "get_spec",
    "fetch_table",
    "FetchedTable",
    # analysis
    "pca",
    "PCAResult",
    "align_bases",
    "fit_helix",
    "HelixFit",
    "periodicity",
    "PeriodicityResult",
    "fit_recurrence",
    "RecurrenceFit",
    "subspace_overlap",
    "SubspaceOverlap",
    "BatchResult",
    "NullTest",
    "PeriodPeak",
    "rotary_atlas",
    "RotaryAtlas",
    "position_qk_atlas",
    "PositionQKAtlas",
    "qk_atlas",
    # inside the network
    "hidden_positions",
    "HiddenPositions",
    "attention_by_offset",
    "AttentionByOffset",
    # training-checkpoint sweeps
    "sweep",
    "SweepResult",
    # errors
    "PosGeometryError",
    "UnknownModelError",
    "CheckpointFormatError",
    "MissingTensorError",
    "NonFiniteError",
    "NotCachedError",
    "RevisionNotFoundError",
    "UnsafeCheckpointError",
    "NoLearnedTableError",
    "InvalidArgumentError",
    "DeviceMismatchError",
    "ExportError",
    "RemoteError",
    "AccessDeniedError",
    "NotApplicableError",
}


def test_all_is_exactly_the_public_api():
    assert set(pos_geometry.__all__) == EXPECTED
    assert len(pos_geometry.__all__) == len(set(pos_geometry.__all__))


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
    """Importing prints nothing, opens no socket and leaves the plotly renderer alone."""
    code = (
        "import socket\n"
        "def refuse(*a, **k):\n"
        "    raise AssertionError('network touched at import')\n"
        "socket.socket.connect = refuse\n"
        "socket.create_connection = refuse\n"
        "import plotly.io as pio\n"
        "before = pio.renderers.default\n"
        "import pos_geometry, pos_geometry.plotting, pos_geometry.cli\n"
        "assert pio.renderers.default == before\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout == ""
