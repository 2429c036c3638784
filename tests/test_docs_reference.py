"""The API reference reads the docstrings as written: the griffe extension the site loads
(``docs/griffe_docstrings.py``) turns Sphinx roles into code spans and splits ``Args:`` entries that share a
line, so no raw ``:func:`` reaches a page and every parameter's row carries its own description and default."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

griffe = pytest.importorskip("griffe", reason="griffe comes with the documentation tools (setup.sh --dev)")

ROOT = Path(__file__).resolve().parents[1]


def _extension():
    spec = importlib.util.spec_from_file_location("griffe_docstrings", ROOT / "docs" / "griffe_docstrings.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_roles_become_code_spans_and_shared_entries_split():
    ext = _extension()
    text = """Run it.

    Args:
        seq_len, n_sequences: the corpus's contexts (defaults as in ``fast``,
            capped at the model's context).
        fast: skip :func:`~pos_geometry.interventions.intervene` and :class:`pos_geometry.Card` (an
            :mod:`edit
            <pos_geometry.interventions.edits>`).

    Returns:
        a :class:`~pos_geometry.cards.result.Card`; ``card.save(out)`` writes ``index.html``.
    """
    plain = ext.plain_docstring(text)
    assert ":func:" not in plain and ":class:" not in plain
    assert "skip ``intervene`` and ``pos_geometry.Card`` (an\n            ``edit``)" in plain
    assert "a ``Card``; ``card.save(out)``" in plain
    one = ext.plain_docstring("Do.\n\nReturns:\n    the ``Card``; it writes\n    ``index.html``.\n")
    (returns,) = [s for s in griffe.Docstring(one).parse("google") if s.kind.value == "returns"]
    assert len(returns.value) == 1 and "index.html" in returns.value[0].description
    assert re.search(r"^\s+seq_len: the corpus's contexts \(defaults as in ``fast``,\n\s+capped", plain, re.M)
    assert re.search(
        r"^\s+n_sequences: the corpus's contexts \(defaults as in ``fast``,\n\s+capped", plain, re.M
    )


def test_no_documented_object_keeps_a_role_or_a_shared_parameter_line():
    ext = _extension()
    package = griffe.load(
        "pos_geometry", search_paths=[str(ROOT)], extensions=griffe.load_extensions(ext.PlainDocstrings)
    )
    raw, shared, split_returns = [], [], []

    def walk(obj):
        for member in obj.members.values():
            if member.is_alias:
                continue
            if member.docstring is not None:
                if re.search(r":(func|class|meth|mod|data|attr|exc|obj):`", member.docstring.value):
                    raw.append(member.path)
                if "Returns:" in member.docstring.value or "Args:" in member.docstring.value:
                    for section in member.docstring.parse("google"):
                        if section.kind.value == "returns" and len(section.value) > 1:
                            split_returns.append(member.path)
                        if section.kind.value == "parameters":
                            shared.extend(f"{member.path}({p.name})" for p in section.value if "," in p.name)
            if member.is_module or member.is_class:
                walk(member)

    walk(package)
    assert raw == [] and shared == [] and split_returns == []
