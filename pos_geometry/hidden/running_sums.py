"""Streamed sums behind the decomposition ``h[c, t] = μ + pos[t] + ctx[c] + resid[c, t]``.

For one layer, hidden states arrive a batch of contexts at a time, ``(batch, seq_len, d_model)``.
:class:`PositionSums` keeps, in float64 on the states' device (the CPU for MPS, which has no float64),

* ``shift``: the first context's mean over positions ``(d_model,)`` (a reference subtracted before
  summing, so the sums stay small and the final subtractions lose no precision even when the
  residual stream has a large common mean);
* ``s1[t] = Σ_c (h[c, t] - shift)``, ``(seq_len, d_model)``;
* ``sq[t] = Σ_c ‖h[c, t] - shift‖²``, ``(seq_len,)``;
* ``m[c] = mean_t (h[c, t] - shift)`` folded into ``Σ_c m[c]`` ``(d_model,)`` and
  ``Σ_c m[c] m[c]ᵀ`` ``(d_model, d_model)`` (one ``(batch, d)ᵀ (batch, d)`` product per batch);

so memory is ``O(seq_len × d_model + d_model²)`` per layer whatever the number of contexts ``C``.
A batch is converted to float64 a few contexts at a time (about 2²⁰ values, at least one
context): the transient copy is never ``(batch, seq_len, d_model)`` for long contexts.
:meth:`PositionSums.finish` returns the two-way decomposition (balanced, so the parts are orthogonal
and their sums of squares add up):

* ``μ = mean_{c,t} h``, ``pos[t] = mean_c h[c, t] - μ``, ``ctx[c] = mean_t h[c, t] - μ``;
* ``total = Σ_{c,t} ‖h - μ‖²``, ``positional = C Σ_t ‖pos[t]‖²``, ``context = T Σ_c ‖ctx[c]‖²``,
  ``residual = total - positional - context``;
* the context scatter ``Σ_c ctx[c] ctx[c]ᵀ`` (its eigenvectors span the context subspace);
* the same sums of squares over positions ``t ≥ skip`` only (``late``: the decomposition of the
  table without its first ``skip`` positions, re-centred), for which the per-context means over
  ``t ≥ skip`` are folded in as well. Real models put massive activations on their first positions
  (SmolLM2: 60-224x the median norm at positions 0-1), which can dominate every share.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["PositionSums", "Decomposition", "accumulator_device"]

_CHUNK = 1 << 20
"""Values (8 MiB in float64) converted at a time: whole batches of short contexts, one long context."""


def accumulator_device(device: torch.device) -> torch.device:
    """Where float64 sums of states on ``device`` are kept: that device, except MPS (no float64) -> CPU."""
    return torch.device("cpu") if device.type == "mps" else device


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
    skip: int = 0
    late: tuple[float, float, float, float] = (float("nan"),) * 4


def _sums_of_squares(
    shift: torch.Tensor, s1: torch.Tensor, sq: torch.Tensor, m_sum: torch.Tensor, mm: torch.Tensor, n: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, tuple[float, float, float, float]]:
    """``(pos, μ, context scatter, (total, positional, context, residual))`` from one set of running sums."""
    t = s1.shape[0]
    pos_mean = shift + s1 / n  # mean_c h[c, t]
    mu = pos_mean.mean(dim=0)
    pos = pos_mean - mu
    # Σ_{c,t} ‖h - μ‖² from the shifted sums: Σ‖x‖² + 2 (shift - μ)·Σ_t s1[t] + n T ‖shift - μ‖²
    off = shift - mu
    total = float(sq.sum() + 2 * off @ s1.sum(dim=0) + n * t * off.square().sum())
    m_bar = m_sum / n
    scatter = mm - n * torch.outer(m_bar, m_bar)
    positional_ss = float(n * pos.square().sum())
    context_ss = float(t * torch.trace(scatter))
    return pos, mu, scatter, (total, positional_ss, context_ss, total - positional_ss - context_ss)


class PositionSums:
    """Running sums of one layer's hidden states over contexts (see the module docstring).

    ``skip``: how many first positions the ``late`` sums leave out (0: none kept separately).
    """

    def __init__(self, skip: int = 0) -> None:
        self.skip = skip
        self.late_sum: torch.Tensor | None = None
        self.late_mm: torch.Tensor | None = None
        self.n = 0
        self.shift: torch.Tensor | None = None
        self.s1: torch.Tensor | None = None
        self.sq: torch.Tensor | None = None
        self.m_sum: torch.Tensor | None = None
        self.mm: torch.Tensor | None = None

    def update(self, hidden: torch.Tensor) -> None:
        """Fold in ``hidden`` ``(batch, seq_len, d_model)`` (any float dtype, any device)."""
        hidden = hidden.detach()
        b, t, d = hidden.shape
        acc = accumulator_device(hidden.device)
        if self.shift is None:
            self.shift = hidden[0].to(acc, torch.float64).mean(dim=0)
            zeros = lambda *shape: torch.zeros(*shape, dtype=torch.float64, device=acc)  # noqa: E731
            self.s1, self.sq, self.m_sum, self.mm = zeros(t, d), zeros(t), zeros(d), zeros(d, d)
            late = 0 < self.skip < t - 1
            self.late_sum, self.late_mm = (zeros(d), zeros(d, d)) if late else (None, None)
        means = torch.empty(b, d, dtype=torch.float64, device=acc)
        late_means = torch.empty(b, d, dtype=torch.float64, device=acc) if self.late_sum is not None else None
        step = max(1, _CHUNK // (t * d))
        for i in range(0, b, step):  # a few contexts at a time: the float64 copy stays near _CHUNK values
            x = hidden[i : i + step].to(acc, torch.float64).sub_(self.shift)
            self.s1 += x.sum(dim=0)
            self.sq += torch.linalg.vector_norm(x, dim=2).square_().sum(dim=0)
            torch.mean(x, dim=1, out=means[i : i + step])
            if late_means is not None:
                torch.mean(x[:, self.skip :], dim=1, out=late_means[i : i + step])
        self.m_sum += means.sum(dim=0)
        self.mm.addmm_(means.T, means)
        if late_means is not None:
            self.late_sum += late_means.sum(dim=0)
            self.late_mm.addmm_(late_means.T, late_means)
        self.n += b

    def finish(self) -> Decomposition:
        """The decomposition of every context seen so far."""
        if self.shift is None or self.n < 2:
            raise ValueError("PositionSums needs at least 2 contexts")
        n, k = self.n, self.skip
        pos, mu, scatter, (total, positional_ss, context_ss, residual_ss) = _sums_of_squares(
            self.shift, self.s1, self.sq, self.m_sum, self.mm, n
        )
        late: tuple[float, float, float, float] = (float("nan"),) * 4
        if self.late_sum is not None:
            late = _sums_of_squares(self.shift, self.s1[k:], self.sq[k:], self.late_sum, self.late_mm, n)[3]
        return Decomposition(
            positional=pos.cpu(),
            grand_mean=mu.cpu(),
            context_scatter=scatter.cpu(),
            total=total,
            positional_ss=positional_ss,
            context_ss=context_ss,
            residual_ss=residual_ss,
            n_sequences=n,
            skip=k if self.late_sum is not None else 0,
            late=late,
        )
