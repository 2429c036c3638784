"""Several models' positional cards side by side: :func:`compare` and its :class:`Comparison`."""

from pos_geometry.comparison.build import compare
from pos_geometry.comparison.result import Comparison

__all__ = ["Comparison", "compare"]
