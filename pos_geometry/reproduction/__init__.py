"""Reproduce "GPT-2's positional embedding matrix is a helix" on the tables available here.

:func:`reproduce_blog_post` (also ``pos-geometry reproduce`` and ``scripts/reproduce_blog_post.py``)
measures each claim of the post, writes the figures, and writes ``report.md`` with the measured
numbers beside the claims and a verdict per claim. Missing models are named with the command
that fetches them; nothing is faked.
"""

from pos_geometry.reproduction.runner import ReproductionResult, parse_model_paths, reproduce_blog_post

__all__ = ["ReproductionResult", "parse_model_paths", "reproduce_blog_post"]
