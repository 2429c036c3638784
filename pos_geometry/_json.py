"""JSON read with its nesting bounded: every JSON pos_geometry reads from a file, a cache or a server.

Python's decoder recurses once per level and raises :class:`RecursionError` somewhere near a thousand,
and code that walks what it returned may recurse again. :func:`loads` turns both into one typed error
naming the source, and refuses anything nested deeper than :data:`MAX_DEPTH` (real configs, shard indexes,
provenance and sweep records nest fewer than ten levels).
"""

from __future__ import annotations

from typing import Any

from pos_geometry.errors import CheckpointFormatError, PosGeometryError

__all__ = ["MAX_DEPTH", "loads", "depth"]

MAX_DEPTH = 64


def depth(value: Any) -> int:
    """How deeply ``value``'s lists and dicts nest (0 for a scalar), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, level)
            if level > MAX_DEPTH:
                return level
            stack.extend((child, level + 1) for child in (node.values() if isinstance(node, dict) else node))
    return deepest


def loads(
    text: str | bytes, where: str, *, error: type[PosGeometryError] = CheckpointFormatError, fix: str = ""
) -> Any:
    """``json.loads(text)``, or ``error`` naming ``where`` when it is not JSON or nests deeper than
    :data:`MAX_DEPTH`; ``fix`` ends the message."""
    import json

    tail = f" {fix}" if fix else ""
    try:
        value = json.loads(text)
    except RecursionError:
        raise error(
            f"{where} is JSON nested too deeply to read (more than {MAX_DEPTH} levels).{tail}"
        ) from None
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise error(f"{where} is not valid JSON ({str(exc)[:200]}).{tail}") from None
    if depth(value) > MAX_DEPTH:
        raise error(
            f"{where} is JSON nested more than {MAX_DEPTH} levels deep; no file pos_geometry reads is.{tail}"
        )
    return value
