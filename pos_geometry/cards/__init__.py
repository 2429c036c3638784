"""The positional card: one page that says how a model handles position, each claim with its null.

:func:`card` opens a model once (:mod:`~pos_geometry.cards.identity`), runs every analysis that applies to its
kind of position (:mod:`~pos_geometry.cards.table_section`, :mod:`~pos_geometry.cards.rotary_section`,
:mod:`~pos_geometry.cards.model_sections`, :mod:`~pos_geometry.cards.causal_section`) and returns a
:class:`Card`; :meth:`Card.save` writes it (:mod:`~pos_geometry.cards.render`).
"""

from pos_geometry.cards.build import card
from pos_geometry.cards.result import SECTION_KEYS, SECTION_STATUSES, Card, Section, Verdict

__all__ = ["SECTION_KEYS", "SECTION_STATUSES", "Card", "Section", "Verdict", "card"]
