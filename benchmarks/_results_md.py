"""Write one benchmark's section of ``benchmarks/RESULTS.md`` in place.

Each benchmark owns the text between ``<!-- BEGIN name -->`` and ``<!-- END name -->``;
rerunning it replaces that section only, so the hand-written parts of the file and the
other benchmark's results stay as they are. A missing section is appended.
"""

from __future__ import annotations

from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def update_section(name: str, text: str, path: Path = RESULTS) -> Path:
    """Put ``text`` between the ``name`` markers of ``path`` (created or appended when absent)."""
    begin, end = (
        f"<!-- BEGIN {name} (written by the script; edits here are overwritten) -->",
        f"<!-- END {name} -->",
    )
    block = f"{begin}\n{text.rstrip()}\n{end}"
    old = path.read_text() if path.is_file() else ""
    i = old.find(f"<!-- BEGIN {name} ")
    j = old.find(end)
    if i >= 0 and j > i:
        new = old[:i] + block + old[j + len(end) :]
    else:
        new = (old.rstrip() + "\n\n" if old.strip() else "") + block + "\n"
    path.write_text(new)
    return path
