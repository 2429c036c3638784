"""Reproduce "GPT-2's positional embedding matrix is a helix" on the tables available here.

:func:`reproduce_blog_post` (also ``pos-geometry reproduce`` and ``scripts/reproduce_blog_post.py``)
measures each claim of the post, writes the figures, and writes ``report.md`` with the measured
numbers beside the claims and a verdict per claim. Missing models are named with the command
that fetches them; nothing is faked.
"""

from typing import Any

__all__ = ["ReproductionResult", "parse_model_paths", "reproduce_blog_post"]


def __getattr__(name: str) -> Any:
    # the runner (and the analysis stack it imports) loads on first use, so the command's results cache is
    # consulted without it
    if name in __all__:
        from pos_geometry.reproduction import runner

        return getattr(runner, name)
    raise AttributeError(f"module 'pos_geometry.reproduction' has no attribute {name!r}")
