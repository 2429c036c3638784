"""Bounded descriptions of untrusted values, for error messages.

``repr`` of a value decoded from a hostile file can cost time exponential in its size (a list
that aliases itself at every level) or fail outright (an int of a million digits), and
``f"{value!r:.80}"`` builds the whole repr before cutting it. :func:`describe` never looks
deeper than two levels nor at more than four items per container, so its cost is bounded.
"""

from __future__ import annotations

import itertools

__all__ = ["describe", "describe_exception", "printable"]

_ITEMS = 6
_DEPTH = 2
_TEXT = 40
_INT_BITS = 128


def describe(value: object, _depth: int = 0) -> str:
    """A short, bounded description of ``value``: its repr when small, else its type and size."""
    if value is None or isinstance(value, bool | float):
        return repr(value)
    if isinstance(value, int):
        bits = value.bit_length()
        return repr(value) if bits <= _INT_BITS else f"<int of {bits} bits>"
    if isinstance(value, str | bytes | bytearray):
        if len(value) <= _TEXT:
            return repr(value)
        return f"{value[:_TEXT]!r}... ({type(value).__name__} of length {len(value)})"
    kind = type(value).__name__
    if isinstance(value, list | tuple | set | frozenset | dict) and type(value) not in (
        list,
        tuple,
        set,
        frozenset,
        dict,
    ):
        return f"<{kind} of {len(value)} items>"
    if type(value) in (list, tuple, set, frozenset, dict):
        n = len(value)
        if _depth >= _DEPTH:
            return f"<{kind} of {n} items>"
        items = (
            [
                f"{describe(k, _depth + 1)}: {describe(v, _depth + 1)}"
                for k, v in itertools.islice(value.items(), _ITEMS)
            ]
            if isinstance(value, dict)
            else [describe(v, _depth + 1) for v in itertools.islice(value, _ITEMS)]
        )
        more = f", ... ({n} items)" if n > _ITEMS else ""
        open_, close = {"list": "[]", "tuple": "()", "dict": "{}"}.get(kind, (f"{kind}({{", "})"))
        return f"{open_}{', '.join(items)}{more}{close}"
    return f"<{kind}>"


def describe_exception(exc: BaseException) -> str:
    """``"TypeName: message"`` with the message bounded (its arguments described, not repr'd)."""
    args = exc.args
    if len(args) == 1 and isinstance(args[0], str):
        text = args[0] if len(args[0]) <= 200 else args[0][:200] + "..."
    else:
        text = ", ".join(describe(a) for a in args[:_ITEMS])
    return f"{type(exc).__name__}: {text}"


def printable(text: str, limit: int = 200) -> str:
    """``text`` safe to show on a terminal: control and other non-printable characters as escapes
    (``\\x1b``), cut to ``limit`` characters with the full length said."""
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[:limit])
    return shown if len(text) <= limit else f"{shown}... ({len(text)} characters)"
