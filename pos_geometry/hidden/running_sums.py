"""Streamed sums behind the decomposition ``h[c, t] = μ + pos[t] + ctx[c] + resid[c, t]``.

For one layer, hidden states arrive a batch of contexts at a time, ``(batch, seq_len, d_model)``.
:class:`PositionSums` keeps, in float64 on the states' device,

* ``shift[t]``: the first batch's position means (a reference subtracted before summing, so the
  sums stay small and the final subtractions lose no precision even when the residual stream has
  a large mean);
* ``s1[t] = Σ_c (h[c, t] - shift[t])``, ``(seq_len, d_model)``;
* ``sq[t] = Σ_c ‖h[c, t] - shift[t]‖²``, ``(seq_len,)``;
* ``m[c] = mean_t (h[c, t] - shift[t])`` folded into ``Σ_c m[c]`` ``(d_model,)`` and
  ``Σ_c m[c] m[c]ᵀ`` ``(d_model, d_model)``;

so memory is ``O(seq_len × d_model + d_model²)`` per layer whatever the number of contexts ``C``.
:meth:`PositionSums.finish` returns the two-way decomposition (balanced, so the parts are orthogonal
and their sums of squares add up):

* ``μ = mean_{c,t} h``, ``pos[t] = mean_c h[c, t] - μ``, ``ctx[c] = mean_t h[c, t] - μ``;
* ``total = Σ_{c,t} ‖h - μ‖²``, ``positional = C Σ_t ‖pos[t]‖²``, ``context = T Σ_c ‖ctx[c]‖²``,
  ``residual = total - positional - context``;
* the context scatter ``Σ_c ctx[c] ctx[c]ᵀ`` (its eigenvectors span the context subspace).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["PositionSums", "Decomposition"]


@dataclass(frozen=True, eq=False)
class Decomposition:
    """One layer's decomposition (float64 tensors on the CPU; see the module docstring).

    Attributes:
        positional: ``(seq_len, d_model)`` ``pos[t]`` (sums to zero over ``t``).
        grand_mean: ``(d_model,)`` ``μ``.
        context_scatter: ``(d_model, d_model)`` ``Σ_c ctx[c] ctx[c]ᵀ``.
        total, positional_ss, context_ss, residual_ss: sums of squares.
        n_sequences: ``C``.
    """

    positional: torch.Tensor
    grand_mean: torch.Tensor
    context_scatter: torch.Tensor
    total: float
    positional_ss: float
    context_ss: float
    residual_ss: float
    n_sequences: int


class PositionSums:
    """Running sums of one layer's hidden states over contexts (see the module docstring)."""

    def __init__(self) -> None:
        self.n = 0
        self.shift: torch.Tensor | None = None
        self.s1: torch.Tensor | None = None
        self.sq: torch.Tensor | None = None
        self.m_sum: torch.Tensor | None = None
        self.mm: torch.Tensor | None = None

    def update(self, hidden: torch.Tensor) -> None:
        """Fold in ``hidden`` ``(batch, seq_len, d_model)`` (any float dtype, any device)."""
        h = hidden.detach().to(torch.float64)
        if self.shift is None:
            self.shift = h.mean(dim=0)
            t, d = self.shift.shape
            self.s1 = torch.zeros(t, d, dtype=torch.float64, device=h.device)
            self.sq = torch.zeros(t, dtype=torch.float64, device=h.device)
            self.m_sum = torch.zeros(d, dtype=torch.float64, device=h.device)
            self.mm = torch.zeros(d, d, dtype=torch.float64, device=h.device)
        x = h - self.shift
        self.s1 += x.sum(dim=0)
        self.sq += x.square().sum(dim=(0, 2))
        m = x.mean(dim=1)
        self.m_sum += m.sum(dim=0)
        self.mm += m.T @ m
        self.n += h.shape[0]

    def finish(self) -> Decomposition:
        """The decomposition of every context seen so far."""
        if self.shift is None or self.n < 2:
            raise ValueError("PositionSums needs at least 2 contexts")
        n, (t, _) = self.n, self.shift.shape
        pos_mean = self.shift + self.s1 / n  # mean_c h[c, t]
        mu = pos_mean.mean(dim=0)
        pos = pos_mean - mu
        # Σ_c ‖h - μ‖² at each t, from the shifted sums: Σ‖x‖² + 2 (shift - μ)·s1 + n ‖shift - μ‖²
        off = self.shift - mu
        total = float((self.sq + 2 * (off * self.s1).sum(dim=1) + n * off.square().sum(dim=1)).sum())
        m_bar = self.m_sum / n
        scatter = self.mm - n * torch.outer(m_bar, m_bar)
        positional_ss = float(n * pos.square().sum())
        context_ss = float(t * torch.trace(scatter))
        return Decomposition(
            positional=pos.cpu(),
            grand_mean=mu.cpu(),
            context_scatter=scatter.cpu(),
            total=total,
            positional_ss=positional_ss,
            context_ss=context_ss,
            residual_ss=total - positional_ss - context_ss,
            n_sequences=n,
        )
