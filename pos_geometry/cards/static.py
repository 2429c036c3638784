"""A card's page as a picture: ``card.png`` (the whole page, one image) and ``card.pdf`` (printed, paginated).

Headless Chromium (:func:`~pos_geometry.plotting.export.find_browser`) loads ``index.html`` from the card's own
folder, offline (plotly.js beside it, or inline), lets the figures draw, then screenshots or prints it.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pos_geometry.errors import ExportError, InvalidArgumentError

__all__ = ["STATIC_FORMATS", "check_static", "page_to_static", "page_height"]

STATIC_FORMATS = ("png", "pdf")
"""The picture formats a card exports beside its page."""

WIDTH = 1200
"""The page's width in pixels for ``card.png`` (the page's own layout is at most 1100 px wide)."""

_TIMEOUT_S = 300


def check_static(formats: Sequence[str] | str | None) -> tuple[str, ...]:
    """``formats`` as a tuple of :data:`STATIC_FORMATS` (``"png,pdf"``, a sequence, or None/"none" for none),
    with a browser found when any is asked for; checked before any work.

    Raises:
        InvalidArgumentError: an unknown format. ExportError: no Chromium/Chrome to render with.
    """
    if formats is None or formats == "none" or formats == "":
        return ()
    items = formats.split(",") if isinstance(formats, str) else list(formats)
    chosen = tuple(dict.fromkeys(str(f).strip().lower() for f in items if str(f).strip()))
    bad = [f for f in chosen if f not in STATIC_FORMATS]
    if bad:
        raise InvalidArgumentError(
            f"a card exports to {', '.join(STATIC_FORMATS)} (or none); got {bad}. Pass e.g. static='png,pdf'."
        )
    if chosen:
        from pos_geometry.plotting.export import find_browser

        find_browser()
    return chosen


def page_height(card: Any) -> int:
    """A window height in pixels that holds the whole page: its text and every figure at its own height."""
    figures = sum(int(fig.layout.height or 520) + 90 for s in card.sections for _, fig, _ in s.figures)
    lines = sum(len(s.verdicts) for s in card.sections) * 2 + len(card.sections) * 6
    return min(30000, 900 + figures + 28 * lines)


def page_to_static(
    page: str | os.PathLike[str], out: str | os.PathLike[str], fmt: str, *, height: int
) -> Path:
    """Render ``page`` (an ``index.html`` on disk) to ``out`` as ``fmt`` (``"png"``: a ``WIDTH`` × ``height``
    screenshot; ``"pdf"``: printed) with headless Chromium; returns ``out``.

    Raises:
        ExportError: no browser, or it failed or wrote nothing (its last words are in the message).
    """
    from pos_geometry.plotting.export import find_browser

    browser = find_browser()
    page, out = Path(page), Path(out)
    args = [str(browser), "--headless", "--disable-gpu", "--hide-scrollbars", "--virtual-time-budget=20000",
            "--no-first-run", "--disable-extensions", "--disable-background-networking"]  # fmt: skip
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        args.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
    if fmt == "png":
        args += [f"--window-size={WIDTH},{int(height)}", f"--screenshot={out}"]
    elif fmt == "pdf":
        args += ["--no-pdf-header-footer", f"--print-to-pdf={out}"]
    else:
        raise InvalidArgumentError(f"fmt must be one of {STATIC_FORMATS}; got {fmt!r}.")
    try:
        done = subprocess.run(
            [*args, page.resolve().as_uri()], capture_output=True, text=True, timeout=_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ExportError(f"{browser} could not render the card's {fmt}: {exc}") from None
    if done.returncode != 0 or not out.is_file() or out.stat().st_size == 0:
        tail = " ".join(done.stderr.strip().splitlines()[-2:])[-300:]
        raise ExportError(f"{browser} did not write the card's {fmt} (exit {done.returncode}): {tail}")
    return out
