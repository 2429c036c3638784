"""Every module of the package stays small enough to read in one sitting: at most ``MAX_LINES`` lines, so a
module that grows past it is split by responsibility (a result type, a helper family) instead of growing on."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "pos_geometry"
MAX_LINES = 400


def module_lengths() -> dict[str, int]:
    return {
        str(path.relative_to(PACKAGE.parent)): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def test_no_module_is_over_the_line_limit():
    lengths = module_lengths()
    assert len(lengths) > 100
    assert {name: n for name, n in lengths.items() if n > MAX_LINES} == {}
