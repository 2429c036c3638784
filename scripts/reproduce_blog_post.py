#!/usr/bin/env python
"""Reproduce "GPT-2's positional embedding matrix is a helix" offline; same as ``pos-geometry reproduce``.

Usage: python scripts/reproduce_blog_post.py --out results/ [--data-dir DIR] [--model NAME=PATH ...]
       [--tokens PATH] [--online] [--format html,png] [--device cpu] [--debug]
"""

from __future__ import annotations

import sys

from pos_geometry.cli import app


def run(argv: list[str]) -> None:
    """Parse ``argv`` as ``pos-geometry reproduce`` options (``--debug`` anywhere) and run it."""
    debug = ["--debug"] if "--debug" in argv else []
    app([*debug, "reproduce", *(a for a in argv if a != "--debug")])


if __name__ == "__main__":
    run(sys.argv[1:])
