"""What an analysis of a large table costs, said before it starts: :class:`CostWarning` and its note."""

from __future__ import annotations

__all__ = ["COSTLY_POSITIONS", "CostWarning", "cost_note"]


class CostWarning(UserWarning):
    """An analysis was asked of a table large enough to take minutes (the message says how long, and how to
    analyse part of it)."""


COSTLY_POSITIONS = 4096
"""Above this many positions ``analyze`` warns of its cost before it starts."""


def cost_note(n: int) -> str:
    """What analysing ``n`` positions costs, in words (GPT-2's 1024 rows: about 8 s on two CPU cores)."""
    return (
        f"analyze of {n} positions: the nulls push hundreds of surrogate tables through the same pipeline, and "
        f"their cost grows about as n²; GPT-2's 1024 rows take about 8 s on two CPU cores, so {n} take about "
        f"{8 * (n / 1024) ** 2 / 60:.0f} min. Pass window=(start, stop) (the CLI's --window) to analyse part of "
        "the table, or fewer n_surrogates."
    )
