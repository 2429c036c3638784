"""Principal coordinates of random walks of a table's own steps, without forming the walks' Gram matrices
from their rows.

A step-walk surrogate (:func:`pos_geometry.analysis.nulls.surrogates.step_walks`) is the table's first row followed
by its ``m = n − 1`` steps, cut into ``B`` blocks and cumulated in a shuffled block order. Row ``t'`` of
block ``b`` (placed after the blocks ``β`` before it) is ``a_b + p_b(t')``, with ``a_b = y₀ + Σ_β S_β``
(``S_β``: a block's sum of steps) and ``p_b(t')`` the block's own partial sums, the same in every walk.
So a walk's second-moment matrix is

    WᵀW = y₀y₀ᵀ + Q + Σ_b [L_b a_b a_bᵀ + a_b P_bᵀ + P_b a_bᵀ]      (Q = Σ_b Σ_t' p_b p_bᵀ, P_b = Σ_t' p_b)

a fixed ``Q`` plus a rank ``≤ 2B + 1`` part that depends on the order: ``O(r²B)`` per walk instead of the
``O(n r²)`` of forming it from the rows (``n`` positions, ``r`` axes). Its top eigenvectors come from
subspace iteration with Rayleigh-Ritz (as many products as :mod:`pos_geometry.analysis._pca_solvers`'
randomized solver makes with ``AᵀA``), and the coordinates are assembled from ``a_b`` and ``p_b``. The
result is the PCA of the walk the sampler would draw with the same generator (equal to round-off and the
iteration's convergence, held by ``tests/analysis/nulls/test_null_methods.py``).
"""

from __future__ import annotations

import torch

from pos_geometry.analysis._pca_solvers import SUBSPACE_ITERATIONS, resolve_n_iter

__all__ = ["WalkCoordinates", "block_orders", "step_index", "structure_pays"]


def block_orders(n_blocks: int, count: int, gen: torch.Generator) -> torch.Tensor:
    """``count`` random block orders ``(count, n_blocks)`` (the step-walk sampler draws the same ones)."""
    return torch.stack([torch.randperm(n_blocks, generator=gen) for _ in range(count)])


def step_index(orders: torch.Tensor, block: int, m: int) -> torch.Tensor:
    """The original index of the step at each row ``1..m`` of the walks of ``orders`` ``(c, B)``: ``(c, m)``
    (blocks of ``block`` steps, the last one shorter; each order holds every step once)."""
    starts = torch.arange(0, m, block)
    idx = (starts[orders][..., None] + torch.arange(block)).reshape(orders.shape[0], -1)
    return idx[idx < m].reshape(orders.shape[0], m)


def structure_pays(n: int, r: int, block: int, k: int, subspace: bool) -> bool:
    """Whether :class:`WalkCoordinates` computes the top-``k`` coordinates of walks of ``n`` positions on ``r``
    axes in blocks of ``block`` steps with fewer operations than forming the walks and fitting them.

    Per walk, the block structure costs about ``B r²`` (the block starts in the eigenbasis) plus
    ``(n_iter + 2)`` products with a rank-``3B`` matrix on ``l = k + n_oversamples`` vectors, in float64;
    the walks themselves cost ``2 n_iter + 2`` products with an ``n × r`` matrix in the tables' float32. A
    long length scale (few blocks: GPT-2's 14) favours the structure by an order of magnitude; a rough
    table (blocks of 1–3 steps, hundreds of them) favours the walks by several times.
    """
    n_blocks = -(-(n - 1) // block)
    n_iter, over = SUBSPACE_ITERATIONS if subspace else (resolve_n_iter("auto", k, n, r + 1), 10)
    width = min(k + over, r + 1)
    structured = 2 * (n_blocks * r * r + (n_iter + 2) * 2 * (3 * n_blocks + 6) * (r + 1) * width)
    direct = (2 * n_iter + 2) * n * (r + 1) * width + 2 * n * r
    return structured < direct


class WalkCoordinates:
    """Step walks of ``y`` ``(n, r)`` (centred coordinates on the kept axes) in blocks of ``block`` steps,
    put back around the mean (``mean_in`` ``(r,)`` on the axes, ``mean_out`` outside them: the fast
    embedding of :class:`~pos_geometry.analysis.nulls.basis.NullBasis`)."""

    def __init__(self, y: torch.Tensor, block: int, mean_in: torch.Tensor, mean_out: float):
        y = y.to(torch.float64)
        steps = y[1:] - y[:-1]
        m, r = steps.shape
        self.n, self.r, self.block = m + 1, r, block
        starts = torch.arange(0, m, block)
        self.lengths = torch.clamp(m - starts, max=block)  # (B,)
        block_of_step = torch.arange(m) // block
        part = torch.zeros_like(steps)
        for s in starts.tolist():
            part[s : s + block] = torch.cumsum(steps[s : s + block], dim=0)
        self.steps = steps
        self.part = part  # (m, r): p_b(t') in the original order
        self.sums = part[(starts + self.lengths - 1)]  # (B, r): S_b
        self.psum = torch.zeros(len(starts), r, dtype=y.dtype).index_add_(0, block_of_step, part)  # (B, r)
        self.q = part.T @ part  # (r, r)
        self.first = y[0] + mean_in.to(y.dtype)  # y₀ around the mean
        self.out = float(mean_out)
        self.starts = starts

    def step_index(self, orders: torch.Tensor) -> torch.Tensor:
        """The original index of the step at each walk row ``1..m`` ``(c, m)``."""
        return step_index(orders, self.block, self.n - 1)

    def tables(self, orders: torch.Tensor) -> torch.Tensor:
        """The walks themselves ``(c, n, r + 1)`` (what :meth:`coordinates` decomposes; for checking)."""
        c = orders.shape[0]
        out = torch.empty(c, self.n, self.r + 1, dtype=torch.float64)
        out[:, 0, :-1] = self.first
        out[:, 1:, :-1] = self.first + torch.cumsum(self.steps[self.step_index(orders)], dim=1)
        out[..., -1] = self.out
        return out

    def _eigenbasis(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(λ, V)`` of the fixed part ``Q + y₀y₀ᵀ`` (computed once): in its eigenbasis that part is diagonal,
        so a product with a walk's second-moment matrix costs ``O(r·B)`` per vector instead of ``O(r²)``."""
        if not hasattr(self, "_eig"):
            evals, vecs = torch.linalg.eigh(self.q + self.first[:, None] * self.first[None, :])
            self._eig = (evals, vecs, self.part @ vecs, self.first @ vecs)
        return self._eig

    def coordinates(
        self, orders: torch.Tensor, k: int, *, center: bool, random_state: int, subspace: bool = False
    ) -> torch.Tensor:
        """Top-``k`` PCA coordinates ``(c, n, k)`` of the walks of ``orders`` (centred over positions or not).

        The second-moment matrix of a walk, on the kept axes plus the constant coordinate of the mean
        outside them, is ``D + U Wᵀ``: ``D`` = the fixed part, diagonal in its eigenbasis, plus a rank
        ``3B + 4`` part (the block starts ``a_b``, the column sums, the constant coordinate and the
        centring). Its top eigenvectors come from subspace iteration in that eigenbasis (``subspace``: only
        the subspace they span matters to the caller, so the iteration runs
        :data:`~pos_geometry.analysis._pca_solvers.SUBSPACE_ITERATIONS`).
        """
        c, nb = orders.shape
        r, n = self.r, self.n
        evals, basis, part_v, first_v = self._eigenbasis()
        # a_b: where each block starts, i.e. y₀ plus the sums of the blocks placed before it
        placed = self.sums[orders]  # (c, B, r) in walk order
        before = torch.cumsum(placed, dim=1) - placed
        a = torch.empty(c, nb, r, dtype=torch.float64)
        a.scatter_(1, orders[..., None].expand(c, nb, r), before)
        a += self.first
        a_v = a @ basis  # (c, B, r) in the eigenbasis
        psum_v = self.psum @ basis  # (B, r)
        lengths = self.lengths.to(torch.float64)
        colsum_v = first_v + (a_v * lengths[:, None]).sum(dim=1) + psum_v.sum(dim=0)  # (c, r)
        # U Wᵀ with U, W (c, r + 1, ·): Σ_b L_b a aᵀ + a P_bᵀ + P_b aᵀ, then the constant coordinate
        pad = lambda t: torch.cat([t, torch.zeros(c, 1, t.shape[-1], dtype=t.dtype)], dim=1)  # noqa: E731
        e = torch.zeros(c, r + 1, 1, dtype=torch.float64)
        e[:, r] = 1.0
        g = pad((self.out * colsum_v)[..., None])
        psum_b = psum_v.T.expand(c, r, nb)
        u = [pad(a_v.mT * lengths), pad(a_v.mT), pad(psum_b), g, e, e]
        w = [pad(a_v.mT), pad(psum_b), pad(a_v.mT), e, g, n * self.out**2 * e]
        if center:
            full = torch.cat([colsum_v, torch.full((c, 1), n * self.out, dtype=torch.float64)], dim=1)[
                ..., None
            ]
            u.append(full)
            w.append(-full / n)
        u, w = torch.cat(u, dim=2), torch.cat(w, dim=2)
        diag = torch.cat([evals, torch.zeros(1, dtype=torch.float64)])[None, :, None]
        iterations = SUBSPACE_ITERATIONS if subspace else (resolve_n_iter("auto", k, n, r + 1), 10)
        vecs = _top_eigenvectors(lambda x: diag * x + u @ (w.mT @ x), r + 1, c, k, iterations, random_state)
        # coordinates: row t' of block b is a_b + p_b(t') (and the constant coordinate), in the eigenbasis
        const = self.out * vecs[:, r]  # (c, k)
        z = torch.empty(c, n, k, dtype=torch.float64)
        z[:, 0] = first_v @ vecs[:, :r] + const
        idx = self.step_index(orders)  # (c, m)
        av = a_v @ vecs[:, :r]  # (c, B, k)
        pv = (part_v @ vecs[:, :r].permute(1, 0, 2).reshape(r, c * k)).reshape(n - 1, c, k).transpose(0, 1)
        z[:, 1:] = torch.gather(av, 1, (idx // self.block)[..., None].expand(c, n - 1, k))
        z[:, 1:] += torch.gather(pv, 1, idx[..., None].expand(c, n - 1, k)) + const[:, None]
        if center:
            z -= z.mean(dim=1, keepdim=True)
        return z


def _top_eigenvectors(
    apply, p: int, c: int, k: int, iterations: tuple[int, int], random_state: int
) -> torch.Tensor:
    """Top-``k`` eigenvectors ``(c, p, k)`` of the symmetric PSD matrices that ``apply`` multiplies
    ``(c, p, l)`` by: subspace iteration on ``k + n_oversamples`` vectors (``n_iter + 1`` products, as the
    randomized PCA solver; ``iterations = (n_iter, n_oversamples)``), then Rayleigh-Ritz."""
    n_iter, over = iterations
    width = min(k + over, p)
    gen = torch.Generator().manual_seed(int(random_state))
    x = torch.randn(p, width, generator=gen, dtype=torch.float64).expand(c, p, width)
    for _ in range(n_iter + 1):
        x = apply(x)
        chol, info = torch.linalg.cholesky_ex(
            x.mT @ x
        )  # Cholesky-QR: cheap, and enough to keep x conditioned
        if bool((info != 0).any()):
            x = torch.linalg.qr(x).Q
        else:
            x = torch.linalg.solve_triangular(chol, x.mT, upper=False).mT
    x = torch.linalg.qr(x).Q
    _, ritz = torch.linalg.eigh(x.mT @ apply(x))
    vecs = x @ ritz.flip(-1)[..., :k]
    if vecs.shape[-1] < k:  # more components asked for than the walks have dimensions: the rest are zero
        vecs = torch.cat([vecs, vecs.new_zeros(c, p, k - vecs.shape[-1])], dim=-1)
    return vecs
