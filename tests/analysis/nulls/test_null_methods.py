"""The fast nulls are the exact nulls (issue 26), and no null depends on the basis (issue 25, first item).

``null_method="fast"`` draws and decomposes the surrogates in the table's leading principal subspace;
``"exact"`` pushes whole ``(n, d)`` tables through the full pipeline. They are the same null only if
the truncation changes nothing that matters: here, on controls and on the real tables, the surrogate
statistics of both methods come from the same distribution (two-sample Kolmogorov-Smirnov, p > 0.01)
and every verdict and significant period is identical. The real-table checks are marked slow (the
exact path is the reference, and it is slow on purpose).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import ks_2samp

import pos_geometry as pg
from pos_geometry.analysis.nulls.basis import null_basis
from pos_geometry.analysis.nulls.surrogates import smooth_gp, surrogate_values

KS_LEVEL = 0.01
"""The family-wise level of one comparison of two analyses: each of its ``m`` two-sample KS tests (one per
null, 8 per analysis) is held to ``KS_LEVEL / m`` (Bonferroni), so a test of equal distributions fails by
chance at most 1% of the time, however many nulls the analyses grow (at 0.01 per KS, eight nulls failed
by chance about 8% of the time: GPT-2's stationary null, fast vs exact, p = 0.009 at one seed and 0.27,
0.92 at two others, medians 0.21–0.23 against 0.19–0.22)."""


def _frame(d: int, k: int, seed: int) -> np.ndarray:
    return np.linalg.qr(np.random.default_rng(seed).standard_normal((d, k)))[0]


def _noisy_helix(n: int = 384, d: int = 48, seed: int = 0) -> np.ndarray:
    t = np.arange(n, dtype=np.float64)
    w = 2 * np.pi / 48
    curve = np.stack([3 * np.cos(w * t), 3 * np.sin(w * t), t / 48], axis=1)
    rng = np.random.default_rng(seed)
    return curve @ _frame(d, 3, seed).T + 0.1 * rng.standard_normal((n, d))


def _random_walk(n: int = 384, d: int = 48, seed: int = 1) -> np.ndarray:
    return np.cumsum(np.random.default_rng(seed).standard_normal((n, d)), axis=0)


def _anisotropic_walk(n: int = 384, d: int = 48, seed: int = 2) -> np.ndarray:
    # A walk whose columns have very different scales: most of the variance in a few directions, a long
    # tail of small ones, stored in a random basis (the case the truncation must get right).
    steps = np.random.default_rng(seed).standard_normal((n, d)) * np.geomspace(1.0, 1e-2, d)
    return np.cumsum(steps, axis=0) @ _frame(d, d, seed + 1).T


CONTROLS = {"noisy helix": _noisy_helix, "random walk": _random_walk, "anisotropic walk": _anisotropic_walk}


def _assert_same_null(fast: pg.Analysis, exact: pg.Analysis) -> None:
    """Same surrogate distributions (KS, family-wise :data:`KS_LEVEL`) and the same verdicts, periods and
    statuses."""
    level = KS_LEVEL / (
        len(fast.helix.tests) + len(fast.periodicity.null_values) + len(fast.recurrence.tests)
    )
    assert fast.helix.verdict == exact.helix.verdict, (fast.helix.reason, exact.helix.reason)
    for f, e in zip(fast.helix.tests, exact.helix.tests, strict=True):
        assert (f.method, e.method) == ("fast", "exact") and f.null == e.null
        assert ks_2samp(f.values, e.values).pvalue > level, (f.null, f.words(), e.words())
    pf, pe = fast.periodicity, exact.periodicity
    assert (pf.null_method, pe.null_method) == ("fast", "exact")
    assert pf.null_values.keys() == pe.null_values.keys() == {"red_noise", "step_walk", "smooth_gp"}
    for null in pf.null_values:
        assert ks_2samp(pf.null_values[null], pe.null_values[null]).pvalue > level, null
    periods = lambda r: sorted((p.series, round(p.period, 1)) for p in r.peaks if p.significant)  # noqa: E731
    assert periods(pf) == periods(pe)
    rf, re_ = fast.recurrence, exact.recurrence
    assert rf.status == re_.status
    for f, e in zip(rf.tests, re_.tests, strict=True):
        assert f.null == e.null and ks_2samp(f.values, e.values).pvalue > level, (f.words(), e.words())


@pytest.mark.parametrize("name", CONTROLS)
def test_fast_and_exact_nulls_agree_on_the_controls(name):
    x = CONTROLS[name]()
    # every surrogate drawn (sequential=False): the distributions are compared, not only the decisions
    fast = pg.analyze(x, n_surrogates=99, null_method="fast", sequential=False)
    exact = pg.analyze(
        x, n_surrogates=99, null_method="exact", random_state=1, sequential=False
    )  # other draws
    _assert_same_null(fast, exact)
    # the controls' own answers: the helix is one, the walks are not
    assert (fast.helix.verdict == "helix") == (name == "noisy helix")


@pytest.mark.slow
@pytest.mark.parametrize("table", ["gpt2_wpe", "gpt1_positions"])
def test_fast_and_exact_nulls_agree_on_the_real_tables(table, request):
    x = request.getfixturevalue(table)
    fast = pg.analyze(x, n_surrogates=99, null_method="fast", sequential=False)
    exact = pg.analyze(x, n_surrogates=99, null_method="exact", random_state=1, sequential=False)
    _assert_same_null(fast, exact)


def test_the_fast_basis_keeps_what_the_surrogates_need():
    # GPT-2-like anisotropy: the fast basis is small for a 3-component statistic, larger for a
    # 27-component one, and never drops more than 0.1% of the surrogates' variance (red noise: the
    # table's own variances; the smooth-GP null: its likelihood's, on its own axes).
    x = torch.from_numpy(_anisotropic_walk(512, 96))
    few = null_basis(x, "fast", "red_noise", min_rank=3)
    many = null_basis(x, "fast", "red_noise", min_rank=27)
    assert few.rank < many.rank <= 96 and few.variance_kept >= 0.999
    few = null_basis(x, "fast", "smooth_gp", min_rank=3)
    exact = null_basis(x, "exact", "smooth_gp")
    assert few.rank < exact.rank == exact.full_rank == 96
    assert few.variance_kept >= 0.999 and exact.variance_kept == pytest.approx(1.0)
    np.testing.assert_allclose(few.scales.square().numpy(), exact.scales[: few.rank].square().numpy())
    # The fast embedding is an isometry onto the surrogate's subspace: the inner products of its r + 1
    # coordinates are those of the same surrogate put back in the stored d coordinates.
    y = torch.randn(2, 512, few.rank, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    small = few.embed(y)
    stored = y @ exact.axes[:, : few.rank].mT + exact.mean
    assert small.shape == (2, 512, few.rank + 1) and stored.shape == (2, 512, 96)
    torch.testing.assert_close(small @ small.mT, stored @ stored.mT, rtol=1e-10, atol=1e-10)


def test_the_smooth_gp_null_takes_the_sampling_spread_out_of_its_column_covariance():
    # 64 iid GP columns over 256 positions: the likelihood's covariance is a Wishart estimate with 255
    # degrees of freedom, its eigenvalues spread over Marchenko–Pastur's (1 ± 1/2)² although every column
    # has the same variance. Surrogates drawn with that spread turn less than the table (GP tables were
    # "helices" at α = 0.05 in 20 of 200); the null's axes are made flat, the total kept. With more columns
    # than positions it gets the axes the table cannot show, as the stationary null does.
    from pos_geometry.analysis.nulls.basis import _decomposition, _likelihood_axes
    from pos_geometry.analysis.nulls.smoothness import gp_column_covariance, kernel

    w, v = np.linalg.eigh(kernel(256, 19.65, 0.0).numpy())
    root = v * np.sqrt(np.clip(w, 0, None))
    rng = np.random.default_rng(8)
    x = torch.from_numpy(root @ rng.standard_normal((256, 64)) + 1e-3 * rng.standard_normal((256, 64)))
    dec = _decomposition(x)
    raw, _ = gp_column_covariance(dec["coords"], *dec["length_scale"])
    lam, _ = _likelihood_axes(dec, "smooth_gp")
    assert float(raw[0] / raw[-1]) > 4 and float(lam[0] / lam[-1]) < 1.5
    assert float(lam.sum()) == pytest.approx(float(raw.sum()), rel=1e-9)
    wide = torch.from_numpy(root @ rng.standard_normal((256, 400)) + 1e-3 * rng.standard_normal((256, 400)))
    basis = null_basis(wide, "exact", "smooth_gp")
    assert basis.rank == basis.full_rank == 399 and basis.axes.shape == (400, 399)
    assert float(basis.scales[255:].min()) > 0  # the axes off the span carry variance


def test_a_table_with_more_columns_than_positions_gets_the_axes_it_cannot_show():
    # 200 iid red-noise columns over 64 positions span only 63 axes; the stationary null's column covariance
    # is shrunk over all 200 (less one for the mean's direction), so its surrogates have 199 axes, the extra
    # ones orthogonal to the table's span and its mean. Both methods draw the same null.
    rng = np.random.default_rng(4)
    e = rng.standard_normal((64 + 100, 200))
    for t in range(1, e.shape[0]):
        e[t] += 0.9 * e[t - 1]
    x = torch.from_numpy(e[100:] + 0.5)
    exact = null_basis(x, "exact", "stationary")
    fast = null_basis(x, "fast", "stationary", min_rank=3)
    assert exact.rank == exact.full_rank == 199 and exact.axes.shape == (200, 199)
    torch.testing.assert_close(exact.axes.T @ exact.axes, torch.eye(199, dtype=torch.float64))
    assert float((exact.axes[:, 63:].T @ exact.mean).abs().max()) < 1e-10
    assert float(exact.scales[63:].min()) > 0  # the axes off the span carry variance
    assert exact.mean_out == pytest.approx(fast.mean_out, abs=1e-10)
    stat = lambda c: c[..., 0].square().sum(-1) / c.square().sum((-1, -2))  # PC1's share (scale-free)  # noqa: E731
    values = {
        method: surrogate_values(
            x, "stationary", 199, 0, stat, method=method, n_components=3, coordinates=True
        )
        for method in ("fast", "exact")
    }
    assert ks_2samp(values["fast"], values["exact"]).pvalue > KS_LEVEL


@pytest.mark.slow
def test_rotating_the_embedding_space_changes_no_verdict(gpt2_wpe):
    # Issue 25: GPT-2's table times a random orthogonal matrix used to become "not a helix" (p = 0.13)
    # because the nulls were drawn column by column in the stored basis. They are drawn on the table's
    # principal axes now, so the verdicts and p-values are those of the table itself.
    q = _frame(768, 768, 7)
    table = gpt2_wpe.astype(np.float64)
    base = pg.analyze(table, analyses=("helix", "periodicity"), n_surrogates=99)
    turned = pg.analyze(table @ q, analyses=("helix", "periodicity"), n_surrogates=99)
    assert base.helix.verdict == turned.helix.verdict == "helix"
    for a, b in zip(base.helix.tests, turned.helix.tests, strict=True):
        assert a.p_value == b.p_value == pytest.approx(0.01)
        assert b.null_median == pytest.approx(a.null_median, abs=0.02)
    periods = lambda r: sorted((p.series, round(p.period)) for p in r.peaks if p.significant)  # noqa: E731
    assert periods(base.periodicity) == periods(turned.periodicity)


def test_gp_surrogates_have_the_kernel_covariance():
    # Circulant embedding (Wood & Chan 1994), both the few-modes and the FFT branch: the empirical
    # covariance of 20000 draws is the squared-exponential kernel plus the nugget, within Monte-Carlo error
    # (sd of one entry ≈ 0.01).
    gen = torch.Generator().manual_seed(0)
    for n, ell, nugget in [(160, 12.0, 0.0), (160, 400.0, 0.3), (160, 1.5, 0.1)]:
        y = torch.ones(n, 1, dtype=torch.float64)
        y[::2] = -1.0  # unit standard deviation
        draws = smooth_gp(y, ell, nugget)(20000, gen)[:, :, 0]
        cov = draws.T @ draws / draws.shape[0]
        t = torch.arange(n, dtype=torch.float64)
        kernel = (1 - nugget) * torch.exp(-0.5 * ((t[:, None] - t[None, :]) / ell) ** 2) + nugget * torch.eye(
            n, dtype=torch.float64
        )
        assert float((cov - kernel).abs().max()) < 0.06, (n, ell, nugget)


def test_null_method_is_checked_and_recorded():
    x = _noisy_helix()
    with pytest.raises(
        pg.InvalidArgumentError, match=r"null_method must be one of \('fast', 'exact'\).*'quick'"
    ):
        pg.fit_helix(x, null_method="quick")
    with pytest.raises(pg.InvalidArgumentError, match="null_method"):
        pg.analyze(x, null_method=None)
    fit = pg.fit_helix(x, n_surrogates=99)
    assert {t.method for t in fit.tests} == {"fast"} and all(t.values.shape == (99,) for t in fit.tests)
    assert "values" not in fit.to_dict()["tests"][0]
    per = pg.periodicity(x, n_surrogates=99, null_method="exact")
    assert per.null_method == "exact" and "exact" in per.summary()


@pytest.mark.parametrize(("k", "center"), [(3, True), (12, False)])
def test_walk_coordinates_from_the_block_structure_are_the_walks_pca(k, center):
    # The fast step-walk path never forms a walk: its principal coordinates come from the blocks' sums and
    # partial sums. They must be those of the walk itself (the same statistics to round-off).
    from pos_geometry.analysis._recurrence_map import improvement
    from pos_geometry.analysis.nulls.basis import null_basis
    from pos_geometry.analysis.nulls.surrogates import walk_block
    from pos_geometry.analysis.nulls.walk_coordinates import WalkCoordinates, block_orders
    from pos_geometry.analysis.pca import surrogate_coordinates

    x = torch.from_numpy(_anisotropic_walk(300, 24) + 5.0)  # a mean off the origin: the uncentred case
    basis = null_basis(x, "fast", "step_walk", min_rank=k)
    walks = WalkCoordinates(
        basis.coords, walk_block(300, basis.length_scale[0]), basis.mean_in, basis.mean_out
    )
    orders = block_orders(walks.starts.shape[0], 6, torch.Generator().manual_seed(1))
    fast = walks.coordinates(orders, k, center=center, random_state=0)
    direct = surrogate_coordinates(walks.tables(orders), k, center=center)
    signs = torch.sign((fast * direct).sum(dim=1, keepdim=True))  # components match up to sign
    torch.testing.assert_close(fast * signs, direct, rtol=1e-6, atol=1e-6 * float(direct.abs().max()))
    torch.testing.assert_close(
        improvement(fast, 1e-10, 8, True), improvement(direct, 1e-10, 8, True), rtol=1e-6, atol=1e-8
    )


def test_the_walks_block_structure_is_used_only_where_it_is_cheaper(monkeypatch):
    # Few long blocks (a smooth table): the block structure is an order of magnitude cheaper than the walks.
    # Hundreds of short blocks on hundreds of axes (a rough, full-rank table): forming the walks is cheaper.
    from pos_geometry.analysis.nulls import surrogates as _nulls
    from pos_geometry.analysis.nulls.walk_coordinates import structure_pays

    assert structure_pays(1024, 45, 93, 3, False)  # GPT-2's table: 11 blocks on 45 axes
    assert not structure_pays(1024, 704, 6, 3, False)  # an AR(1) φ = 0.9 table of 768 columns
    assert not structure_pays(1024, 704, 6, 27, True)
    # either way the surrogates are the same walks (same generator, same block orders) and the statistic
    # the same to round-off
    rough = np.cumsum(np.random.default_rng(4).standard_normal((300, 40)), axis=0) * 0.05
    rough += np.random.default_rng(5).standard_normal((300, 40))  # short length scale
    x = torch.from_numpy(rough)
    got = {}
    for pays in (True, False):
        monkeypatch.setattr(_nulls, "structure_pays", lambda *a, pays=pays: pays)
        got[pays] = surrogate_values(
            x, "step_walk", 12, 3, lambda z: z.abs().amax(dim=(1, 2)), n_components=3, coordinates=True
        )
    np.testing.assert_allclose(got[True], got[False], rtol=1e-5)


def _recurrence_gains(x: torch.Tensor, null: str, k: int, *, subspace: bool | None) -> np.ndarray:
    """The recurrence's null statistic (gain over persistence 64 rows ahead) on 12 surrogates of ``x``:
    through the nulls' own solvers (``subspace`` as given), or (``None``) through the exact
    eigendecomposition of every surrogate table, drawn by the same generator."""
    from pos_geometry.analysis._pca_solvers import fit_batch
    from pos_geometry.analysis._recurrence_map import improvement
    from pos_geometry.analysis.nulls.surrogates import surrogate_values
    from pos_geometry.analysis.pca import _scales

    if subspace is None:

        def statistic(tables: torch.Tensor) -> torch.Tensor:
            coords = fit_batch(
                tables, k, scale=_scales(tables), center=True, solver="exact", n_oversamples=0, n_iter=0,
                random_state=0,
            )[2]  # fmt: skip
            return improvement(coords, 1e-10, 64, True)

        return surrogate_values(x, null, 12, 3, statistic, n_components=k)  # the same axes kept
    return surrogate_values(
        x, null, 12, 3, lambda z: improvement(z, 1e-10, 64, True), n_components=k, coordinates=True,
        subspace=subspace,
    )  # fmt: skip


def _smooth_wide_table(n: int = 512, d: int = 320, seed: int = 5) -> torch.Tensor:
    # smooth curves of many scales plus a little noise: hundreds of axes, so the nulls' randomized solver runs
    t = np.arange(n)[:, None] / n
    rng = np.random.default_rng(seed)
    freq = rng.uniform(0.2, 6.0, size=d)
    curves = np.cos(2 * np.pi * freq * t + rng.uniform(0, 2 * np.pi, size=d)) * np.geomspace(1.0, 0.05, d)
    return torch.from_numpy(curves @ _frame(d, d, seed).T + 0.01 * rng.standard_normal((n, d)))


@pytest.mark.parametrize("null", ["smooth_gp", "step_walk"])
@pytest.mark.parametrize("table", ["smooth wide table", "gpt2_wpe"])
def test_the_recurrence_null_needs_only_the_subspace(null, table, request):
    # The recurrence's statistic is the same for any orthonormal basis of the top-k subspace, so its nulls
    # run the randomized solver with fewer power iterations (SUBSPACE_ITERATIONS). That must not change a
    # single surrogate's value beyond 5e-4 (the null's spread, median to 95%, is ~0.03; measured: at most
    # 1.1e-4, most below 3e-5): the exact eigendecomposition of each surrogate is the reference, and the
    # solver's own default rule agrees with it as closely.
    x = (
        _smooth_wide_table()
        if table == "smooth wide table"
        else torch.from_numpy(request.getfixturevalue(table))
    )
    k = 27 if table == "gpt2_wpe" else 16
    reference = _recurrence_gains(x, null, k, subspace=None)
    for subspace in (False, True):
        gains = _recurrence_gains(x, null, k, subspace=subspace)
        assert np.abs(gains - reference).max() < 5e-4, (subspace, np.abs(gains - reference).max())
    assert np.ptp(reference) > 1e-2  # the surrogates differ: the agreement is not of constants


@pytest.mark.parametrize("how", ["_ar1_steps", "_ar1_log_scan"])
@pytest.mark.parametrize("n", [1, 2, 7, 1024, 1500])
def test_red_noise_recursion_is_the_ar1_filter(n, how):
    # The red-noise sampler runs a_t = φ a_{t-1} + e_t step by step on the CPU and as a log-depth scan on
    # an accelerator; scipy's lfilter (the sequential recursion) is the oracle for both, axis by axis with
    # each axis' own φ.
    from scipy.signal import lfilter

    from pos_geometry.analysis.nulls import surrogates as _nulls

    rng = np.random.default_rng(n)
    e = rng.standard_normal((n, 3, 4))
    phi = np.array([0.0, 0.5, 0.95, 0.9999])
    got = getattr(_nulls, how)(torch.from_numpy(e), torch.from_numpy(phi)).numpy()
    for j, p in enumerate(phi):
        np.testing.assert_allclose(
            got[..., j], lfilter([1.0], [1.0, -p], e[..., j], axis=0), rtol=1e-10, atol=1e-10
        )


def test_the_surrogates_do_not_depend_on_the_number_of_threads():
    # Each chunk has its own generator (chunk_seeds), so the chunks may run on any number of threads, in
    # any order, and give the same surrogates: here 5 chunks (a small budget) on 1 and on 3 threads.
    from pos_geometry.analysis.nulls import basis as _null_basis
    from pos_geometry.analysis.nulls.surrogates import chunk_seeds

    x = torch.from_numpy(_noisy_helix(n=200, d=24, seed=3))
    for null in ("step_walk", "smooth_gp", "stationary", "red_noise"):
        options = {"n_components": 3, "coordinates": True, "budget_bytes": 200 * 40 * 8 * 5}
        statistic = lambda z: z.square().sum(dim=(1, 2))  # noqa: E731
        got = [surrogate_values(x, null, 23, 5, statistic, workers=w, **options) for w in (1, 3)]
        np.testing.assert_allclose(got[0], got[1], rtol=1e-6, err_msg=null)
        assert np.unique(got[0]).size == 23  # every surrogate its own draw
    seeds = chunk_seeds(5, 6)
    assert seeds == chunk_seeds(5, 6) and len(set(seeds)) == 6 and all(0 <= s < 2**63 for s in seeds)
    assert chunk_seeds(5, 3) == seeds[:3] and chunk_seeds(6, 6) != seeds
    # the nodes of the smooth-GP null are set up on the pool's threads, on the caller's decomposition:
    # each node's likelihood covariance lands in the one the caller remembers
    _null_basis._memory.set(None)
    surrogate_values(x, "smooth_gp", 10, 0, lambda z: z.sum(dim=(1, 2)), n_components=3, workers=2)
    dec = _null_basis._memory.get()[2]
    assert sum(key.startswith("smooth_gp_axes_") for key in dec) == 5
