"""What every analysis result shares: JSON serialisation, a text summary, an HTML repr.

Results are frozen dataclasses. Subclasses implement :meth:`Result.summary_rows`
(label/value pairs for the summary) and inherit ``to_dict``, ``to_json``,
``__str__`` (the summary), a one-line ``__repr__`` (never the arrays: a REPL stays readable) and
``_repr_html_`` (the summary as a table, for Jupyter).
"""

from __future__ import annotations

import dataclasses
import html
import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from pos_geometry.embedding import Provenance

__all__ = ["Result", "to_jsonable"]

REPR_ROWS = 3  # summary rows a result's one-line repr shows
REPR_WIDTH = 300  # and at most this many characters of them


def _finite_or_strings(array: np.ndarray) -> Any:
    """``array.tolist()``, with NaN/±inf written as ``None`` (JSON ``null``).

    ``json.dumps`` would otherwise emit ``NaN``/``Infinity``, which is not JSON (strict parsers,
    JavaScript's ``JSON.parse`` included, refuse it). A value that does not apply is stated by the
    result's own ``verdict``/``status`` and ``reason`` fields. Finite arrays take the fast path.
    """
    if array.dtype.kind != "f" or bool(np.isfinite(array).all()):
        return array.tolist()
    return np.where(np.isfinite(array), array.astype(object), None).tolist()


def to_jsonable(value: Any) -> Any:
    """Convert tensors, arrays, provenances, dataclasses and tuples into strict-JSON-ready values.

    Non-finite floats become ``None`` (JSON ``null``): output is strict RFC 8259 JSON.
    """
    if isinstance(value, Provenance):
        return value.to_dict()
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.is_complex():
            return {"real": to_jsonable(value.real), "imag": to_jsonable(value.imag)}
        if value.dtype in (torch.float16, torch.bfloat16):
            value = value.float()
        return _finite_or_strings(value.numpy())
    if isinstance(value, np.ndarray):
        if np.iscomplexobj(value):
            return {"real": _finite_or_strings(value.real), "imag": _finite_or_strings(value.imag)}
        return _finite_or_strings(value)
    if isinstance(value, np.generic):
        return to_jsonable(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, complex):
        return {"real": value.real, "imag": value.imag}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: to_jsonable(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if f.metadata.get("serialize", True)
        }
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    return value


class Result:
    """Mixin for frozen result dataclasses (each has a ``provenance`` field)."""

    def summary_rows(self) -> list[tuple[str, str]]:  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """Every field, JSON-ready (tensors become nested lists), plus the result type."""
        out = {"type": type(self).__name__}
        out.update(to_jsonable(self))
        return out

    def to_json(self, **kwargs: Any) -> str:
        """``json.dumps(self.to_dict())``; keyword arguments go to ``json.dumps``."""
        return json.dumps(self.to_dict(), **kwargs)

    def _source_label(self) -> str:
        prov = getattr(self, "provenance", None)
        if isinstance(prov, Provenance):
            steps = ", ".join(prov.processing) or "none"
            return f"{prov.label} ({prov.kind}; processing: {steps})"
        if isinstance(prov, tuple):
            return (
                f"batch of {len(prov)}: "
                + ", ".join(p.label for p in prov[:4])
                + (" ..." if len(prov) > 4 else "")
            )
        return "unknown source"

    def summary(self) -> str:
        """A readable multi-line summary."""
        rows = self.summary_rows()
        width = max((len(k) for k, _ in rows), default=0)
        lines = [f"{type(self).__name__} of {self._source_label()}"]
        lines += [f"  {k.ljust(width)}  {v}" for k, v in rows]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        """One line: the type, what it was measured on, and the first summary rows (never the arrays)."""
        prov = getattr(self, "provenance", None)
        label = prov.label if isinstance(prov, Provenance) else self._source_label()
        body = "; ".join(f"{k}: {v}" for k, v in self.summary_rows()[:REPR_ROWS])
        if len(body) > REPR_WIDTH:
            body = body[: REPR_WIDTH - 1] + "…"
        return f"<{type(self).__name__} of {label}: {body}>"

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th><td style='text-align:left'>{html.escape(v)}</td></tr>"
            for k, v in self.summary_rows()
        )
        title = html.escape(f"{type(self).__name__} of {self._source_label()}")
        return f"<div><b>{title}</b><table>{rows}</table></div>"
