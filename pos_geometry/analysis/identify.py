"""Is this table a formula?  Sinusoidal (interleaved or blocks, with its base), rotary, or learned.

A sinusoidal or rotary table puts each frequency ``ω_i`` in one pair of columns, ``(A sin pω_i, A cos pω_i)``
(sinusoidal, sine first) or ``(A cos pω_i, A sin pω_i)`` (rotary, as :func:`pos_geometry.rotary_table`
builds it and transformers' cos/sin caches hold it), in one of two arrangements:

* ``"interleaved"``: the pairs are columns ``(2i, 2i+1)``;
* ``"blocks"``: the pairs are columns ``(i, d/2 + i)`` (Whisper's encoder, tensor2tensor).

:func:`identify` tries each arrangement and order. For each it reads every pair's phase
``φ_i(p) = atan2(sine, cosine)`` and amplitude, unwraps the phase and fits ``φ_i(p) = ω_i p`` through the
origin (least squares, float64), and rebuilds the table from the ``ω_i`` and one amplitude ``A``: the
``residual`` is ``‖X − X̂‖_F / ‖X‖_F``. It then fits the base of the frequency rule of the arrangement --
``ω_i = base^(-2i/d)`` (interleaved: "Attention Is All You Need", and RoPE), ``ω_i =
base^(-i/(d/2 - 1))`` (blocks: Whisper) -- by least squares on ``log ω_i``, and rebuilds the table from the
formula alone: ``formula_residual``. The best arrangement is the one with the smallest residual.

Verdicts: ``"sinusoidal"`` or ``"rotary"`` when the residual is at most :data:`TOLERANCE` (1e-2: a
bfloat16 copy of a formula is within 3e-3, a float16 copy within 4e-4; a learned table is near 1), with
``base`` when the formula residual is also within it (else the frequencies are listed, e.g. a scaled RoPE
whose frequencies are not one geometric series). A table that no arrangement rebuilds may still be a
**linear image** ``X = S·A`` of one, plus noise (its columns mixed, its rows rotated, its phases shifted):
its shift structure says so (:mod:`pos_geometry.analysis._linear_image`: total-least-squares ESPRIT on the
directions above its noise; at least four undamped planes that the window resolves, on one base lattice, and
the eigenvalues' powers rebuilding the table to its noise), with the frequencies, the base, the noise level and
the map's condition number; a smooth curve (walk, GP, polynomial), whose shift map's resolved planes decay, is
not one. The table is read at the precision it was stored in (``_dtypes.storage_eps``: a float16 checkpoint
upcast to float32 still holds float16 numbers, and its rounding is noise, not planes). Otherwise ``"learned"`` for a table read from a trained checkpoint, and ``"unknown"`` for
anything else, with the best residual found. Planes that turn too slowly to rise above the storage precision
are not estimated (a wide table's slowest), and crowded slow planes are listed but not resolved.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from pos_geometry._dtypes import storage_eps
from pos_geometry.analysis._batch import BatchResult
from pos_geometry.analysis._inputs import Window, as_batch, parse_window
from pos_geometry.analysis._linear_image import linear_image, resolution_turns, resolved_planes
from pos_geometry.analysis._pair_phases import (
    TOLERANCE,
    best_arrangement,
    pair_indices,
    standard_errors,
    stored_planes,
    unit_scaled,
)
from pos_geometry.analysis._results import Result
from pos_geometry.embedding import Provenance
from pos_geometry.errors import InvalidArgumentError

__all__ = ["Identification", "identify", "LINEAR_IMAGE", "TOLERANCE", "stored_planes", "resolved_planes"]

LINEAR_IMAGE = "linear image"
"""The kind of a table that is a sinusoidal (or rotary) table times a linear map, ``x = S·A``."""

_KINDS = {"sin-cos": "sinusoidal", "cos-sin": "rotary"}


@dataclass(frozen=True, eq=False, repr=False)
class Identification(Result):
    """What :func:`identify` found: ``kind`` (``"sinusoidal"``, ``"rotary"``, ``"linear image"`` of one of them,
    ``"learned"``, ``"unknown"``);
    for a formula its ``layout`` (``"interleaved"``/``"blocks"``), ``order`` (``"sin-cos"``/``"cos-sin"``),
    ``frequencies`` ``(d/2,)`` rad/position, ``amplitude``, ``base`` (None when the frequencies follow no
    base rule), ``residual`` and ``formula_residual`` (relative Frobenius errors of the rebuilt table).
    ``residual`` is the best arrangement's even when the verdict is not a formula."""

    kind: str
    layout: str | None
    order: str | None
    base: float | None
    amplitude: float | None
    frequencies: np.ndarray | None
    residual: float
    formula_residual: float | None
    window: tuple[int, int]
    reason: str
    provenance: Provenance
    map_condition: float | None = None
    """For a ``"linear image"``: the condition number of the map ``A`` in ``x = S A`` (S the sinusoidal
    table of the found frequencies); large when the map nearly collapses some planes."""
    frequency_std: np.ndarray | None = None
    noise_level: float | None = None
    """For a ``"linear image"``: the noise its spectrum shows, as a fraction of the table's norm (white noise of
    that level would leave the same smallest singular values; at least the storage precision)."""
    """For a formula: each frequency's standard error ``(d/2,)`` rad/position (:func:`stored_planes`)."""

    def pair_columns(self) -> tuple[np.ndarray, np.ndarray]:
        """The column indices of each rotation plane's sine and cosine, ``(d/2,)`` each, in the order of
        :attr:`frequencies` (a formula's layout and order; not defined for learned or unknown tables)."""
        if not self.is_formula or self.frequencies is None:
            raise InvalidArgumentError(
                f"pair_columns needs a sinusoidal or rotary table; this one is {self.kind}."
            )
        return pair_indices(2 * len(self.frequencies), str(self.layout), str(self.order))

    @property
    def is_formula(self) -> bool:
        """Whether the table is a sinusoidal or rotary formula (to :data:`TOLERANCE`)."""
        return self.kind in _KINDS.values()

    def summary_rows(self) -> list[tuple[str, str]]:
        rows = [("kind", self.kind)]
        if self.kind == LINEAR_IMAGE and self.frequencies is not None:
            rows.append(("frequencies", f"{self.frequencies.size}, {self.frequencies.max():.4g} .. "
                         f"{self.frequencies.min():.4g} rad/position"))  # fmt: skip
            rows.append(
                ("base", f"{self.base:.6g}" if self.base is not None else "none (frequencies not geometric)")
            )
            rows.append(("map condition number", f"{self.map_condition:.3g}"))
            if self.noise_level is not None:
                rows.append(("noise level", f"{self.noise_level:.2g} of the table's norm"))
        if self.is_formula:
            rows.append(("layout", f"{self.layout}, {self.order} pairs"))
            rows.append(
                ("base", f"{self.base:.8g}" if self.base is not None else "none (frequencies not geometric)")
            )
            rows.append(("amplitude", f"{self.amplitude:.6g}"))
            freqs = self.frequencies if self.frequencies is not None else np.zeros(0)
            errors = ""
            if self.frequency_std is not None and freqs.size and np.all(freqs > 0):
                errors = f" (standard errors at most {float(np.max(self.frequency_std / freqs)):.1g} of each)"
            rows.append(
                ("frequencies", f"{freqs.size}, {freqs.max():.4g} .. {freqs.min():.4g} rad/position{errors}")
            )
        rows.append(
            (
                "residual",
                f"{self.residual:.3g}"
                + (f" (formula: {self.formula_residual:.3g})" if self.formula_residual is not None else ""),
            )
        )
        rows.append(("reason", self.reason))
        return rows


def identify(x: Any, *, window: Window = None) -> Identification | BatchResult:
    """Whether ``x`` ``(n, d)`` is a sinusoidal or rotary formula, and which; see the module docstring.

    ``x``: a ``PositionalEmbedding``, a list of them, or a tensor/array ``(n_positions, d_model)`` or
    ``(batch, n_positions, d_model)`` (a batch gives a ``BatchResult`` of one answer per table). ``window``: the
    positions ``(start, stop)`` to read (absolute positions: phases are fitted from 0). Runs in float64 on
    the CPU; the table is ``O(n d)`` work.

    >>> import pos_geometry as pg
    >>> ident = identify(pg.sinusoidal(1500, 384, layout="blocks").matrix.half())
    >>> ident.kind, ident.layout, round(ident.base), ident.residual < 1e-3
    ('sinusoidal', 'blocks', 10000, True)
    """
    batch = as_batch(x, min_positions=3)
    found = tuple(
        _finished(_formula_step(t, p, window)) for t, p in zip(batch.data, batch.provenances, strict=True)
    )
    return found[0] if batch.single else BatchResult(found, batch.provenances)


def identify_in_steps(x: Any, *, window: Window = None) -> Identification | Callable[[], Identification]:
    """:func:`identify` of one table in two steps: the formula's (a pair fit per arrangement, cheap) and, when no
    arrangement rebuilds the table, the linear-image test (an SVD of the table and its shift map: the costlier
    part). Returns the :class:`Identification` when the first step decides it (a formula, or a table too narrow
    for one), else a function that runs the second and returns the same answer :func:`identify` gives, which
    is then never a formula. ``analyze`` decides on the helix from the first and runs the second beside the
    nulls."""
    batch = as_batch(x, min_positions=3)
    if not batch.single:
        raise InvalidArgumentError("identify_in_steps takes one table; call identify for a batch.")
    return _formula_step(batch.data[0], batch.provenances[0], window)


def _finished(step: Identification | Callable[[], Identification]) -> Identification:
    return step() if callable(step) else step


def _formula_step(
    data: torch.Tensor, prov: Provenance, window: Any
) -> Identification | Callable[[], Identification]:
    start, stop = parse_window(window, data.shape[0])
    n, d = stop - start, int(data.shape[1])
    if n < 3:
        raise InvalidArgumentError(f"identify needs at least 3 positions in the window; got {n}.")
    fallback = "learned" if prov.kind == "learned" and prov.model_id != "<array>" else "unknown"
    if d < 4 or d % 2:
        return Identification(
            fallback, None, None, None, None, None, math.inf, None, (start, stop),
            f"a formula puts each frequency in a pair of columns, and needs at least two pairs; d_model={d}",
            prov,
        )  # fmt: skip
    table = data[start:stop].detach().to("cpu", torch.float64).numpy()
    positions = np.arange(start, stop, dtype=np.float64)
    # every norm and ratio below is taken on the table divided exactly by a power of two near its largest value,
    # so a table scaled to 1e300 cannot overflow a norm to inf, nor one at 1e-300 underflow it to 0
    scaled, scale = unit_scaled(table)
    if scaled is None:
        what = "is zero" if scale == 0.0 else "holds NaN or infinite values"
        return Identification(
            fallback, None, None, None, None, None, math.inf, None, (start, stop),
            f"the table {what} in the window: there is nothing a formula could rebuild", prov,
        )  # fmt: skip
    table = scaled
    best = best_arrangement(table, positions)
    if best["amplitude"] is not None:
        best["amplitude"] = best["amplitude"] * scale
    where = f"{best['layout']} layout, {best['order']} pairs"
    if best["residual"] > TOLERANCE:
        eps = storage_eps(data[start:stop])
        return lambda: _image_step(table, positions, eps, best, where, fallback, (start, stop), prov)
    kind = _KINDS[best["order"]]
    geometric = best["formula"] is not None and best["formula"] <= TOLERANCE
    reason = (
        f"a {kind} table ({where}) rebuilt to a relative error of {best['residual']:.2g}; "
        + (f"its frequencies follow the rule with base {best['base']:.6g} (formula error {best['formula']:.2g})"
           if geometric else
           "its frequencies follow no single base rule (a scaled RoPE, or a formula of another kind): listed")
    )  # fmt: skip
    return Identification(
        kind, best["layout"], best["order"], best["base"] if geometric else None, best["amplitude"],
        best["freqs"], best["residual"], best["formula"], (start, stop), reason, prov,
        frequency_std=standard_errors(best, n),
    )  # fmt: skip


def _image_step(
    table: np.ndarray,
    positions: np.ndarray,
    eps: float,
    best: dict,
    where: str,
    fallback: str,
    window: tuple[int, int],
    prov: Provenance,
) -> Identification:
    """The second step of :func:`identify`, for a table no arrangement rebuilds: is it a linear image?"""
    start, stop = window
    d = table.shape[1]
    image = linear_image(table, positions, eps)
    if image.is_image:
        freqs, base = image.frequencies, image.base
        return Identification(
            LINEAR_IMAGE, None, None, base, None, freqs, image.residual, None, (start, stop),
            f"a linear image x = S·A of a table S of {freqs.size} undamped sinusoid pairs above its noise "
            f"(noise {image.noise:.2g} of the table's norm, {image.rank} directions above it; {image.resolved} "
            f"planes resolved: {resolution_turns(eps)} turns, a Fourier bin from their neighbours; slower planes "
            f"sink into the noise; the lattice read on the {image.on_lattice} of them whose lattice neighbours "
            f"are more than a bin apart); no arrangement of its columns is one (the best leaves "
            f"{best['residual']:.3g}); "
            f"rebuilt from the shift map's eigenvalues to a relative error of {image.residual:.2g}; map "
            f"condition number {image.condition:.3g}; its resolved frequencies follow the rule "
            f"θ_i = base^(−2i/d) with base {base:.6g} (the interleaved rule of Vaswani et al. and RoPE), that "
            f"is base {base ** ((d - 2) / d):.6g} under the blocks rule θ_i = base^(−i/(d/2−1)) (Whisper): a "
            "linear image cannot tell the layouts apart",
            prov, image.condition, noise_level=image.noise,
        )  # fmt: skip
    not_image = (
        f"; not a linear image of one: {image.why_not}"
        if image.tested
        else f"; whether it is a linear image of one is not tested: {image.why_not}"
    )
    return Identification(
        fallback, None, None, None, None, None, best["residual"], best["formula"], (start, stop),
        f"no sinusoidal or rotary arrangement rebuilds the table: the best ({where}) leaves a relative "
        f"error of {best['residual']:.3g} > {TOLERANCE}"
        + (" (a table read from a trained checkpoint)" if fallback == "learned" else "") + not_image,
        prov,
    )  # fmt: skip
