"""A griffe extension for the API reference: the package's docstrings as mkdocstrings' Google parser reads them.

The docstrings are written for the terminal and for Sphinx-aware readers: cross-references as roles
(:func:`~pos_geometry.load`) and, in ``Args:``, parameters that share a description on one line
(``seq_len, n_sequences: ...``). Rendered as they are, the roles show raw and the shared line matches no
parameter (the reference then calls both "required"). Before griffe parses a docstring this extension:

- turns every role into a code span of what it names (``~`` keeps the last part, as Sphinx does, and a role
  with an explicit title shows the title);
- splits a shared ``Args:`` entry into one entry per name, each with the whole description;
- reads a ``Returns:`` section as one value (its prose continues at the item's indent).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(
    r":(?:py:)?(?:func|class|meth|mod|data|attr|exc|obj|const|term|ref):`(~?)([^`<]+?)(\s*<[^>`]+>)?`"
)
SECTION = re.compile(
    r"^(\s*)(Args|Arguments|Parameters|Keyword Args|Keyword Arguments|Other Parameters):\s*$"
)
SHARED = re.compile(r"^(\s+)(\*{0,2}\w+(?:,\s*\*{0,2}\w+)+)(\s*\([^)]*\))?:(.*)$")


def _role(match: re.Match[str]) -> str:
    """``:func:`~a.b``` -> ```b```; ``:func:`a.b``` -> ```a.b```; ``:mod:`title <a.b>``` -> ```title```."""
    tilde, target, explicit = match.groups()
    shown = " ".join(target.split()) if explicit else target.rsplit(".", 1)[-1] if tilde else target
    return f"``{shown}``"


def _split_shared(text: str) -> str:
    """One ``Args:`` entry per name where several share a line (their description, continuation lines
    included, is repeated under each)."""
    lines = text.split("\n")
    out: list[str] = []
    i, in_args, indent = 0, False, -1
    while i < len(lines):
        line = lines[i]
        header = SECTION.match(line)
        if header:
            in_args, indent = True, len(header.group(1))
            out.append(line)
            i += 1
            continue
        if in_args and line.strip() and len(line) - len(line.lstrip()) <= indent:
            in_args = False
        shared = SHARED.match(line) if in_args else None
        if shared is None:
            out.append(line)
            i += 1
            continue
        lead, names, kind, first = shared.groups()
        block = [first]
        j = i + 1
        while j < len(lines) and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > len(lead)):
            if not lines[j].strip() and (j + 1 >= len(lines) or not lines[j + 1].strip()):
                break
            block.append("\n" + lines[j])
            j += 1
        for name in (n.strip() for n in names.split(",")):
            out.append(f"{lead}{name}{kind or ''}:{''.join(block)}")
        i = j
    return "\n".join(out)


RETURNS = re.compile(r"^(\s*)(Returns|Yields):\s*$")


def _one_return(text: str) -> str:
    """A ``Returns:`` section is one value described in prose: lines that continue it at the item's own indent
    are indented further, so the Google parser reads one row, not one row per line."""
    lines = text.split("\n")
    out: list[str] = []
    section_indent = item_indent = -1
    for line in lines:
        header = RETURNS.match(line)
        depth = len(line) - len(line.lstrip())
        if header:
            section_indent, item_indent = len(header.group(1)), -1
        elif section_indent >= 0 and line.strip():
            if depth <= section_indent:
                section_indent = -1
            elif item_indent < 0:
                item_indent = depth
            elif depth == item_indent:
                line = "    " + line
        elif section_indent >= 0 and not line.strip():
            section_indent = -1
        out.append(line)
    return "\n".join(out)


def plain_docstring(text: str) -> str:
    """``text`` with its roles as code spans, its shared ``Args:`` entries split and its ``Returns:`` one row."""
    return _one_return(_split_shared(ROLE.sub(_role, text)))


class PlainDocstrings(griffe.Extension):
    """Rewrite each object's docstring (:func:`plain_docstring`) when griffe loads it."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = plain_docstring(obj.docstring.value)
