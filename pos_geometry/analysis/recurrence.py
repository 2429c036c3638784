"""Is the positional code a one-parameter group?  Fit ``z[t+1] ≈ M z[t]`` in the top-``k`` PCA subspace.

A relative-position code that is linear and translation-invariant satisfies ``E[t+h] = M^h E[t]`` with
``M = exp(A)``: a rotary table is exactly such a code, with ``M`` block-diagonal rotations by its inverse
frequencies ``θ_i``. :func:`fit_recurrence` takes the top-``k`` PCA coordinates ``Z`` ``(n, k)`` of the
window and fits, by least squares on the device of the input,

    Z[1:] ≈ Z[:-1] Mᵀ            (``affine=False``)   or   Z[1:] ≈ Z[:-1] Mᵀ + 1 bᵀ   (``affine=True``).

Centring: by default the coordinates are those of the centred PCA (``center=True``, the basis every other
analysis uses) and the fit is affine (``affine=True``). The affine fit does not depend on where the origin
is: centring turns ``z ↦ M z`` into ``z − μ ↦ M(z − μ) + (M − I)μ``, and the intercept absorbs the
offset, so a rotary or sinusoidal table gives its exact frequencies whether centred or not. (A centred
*linear* fit, ``affine=False``, is misspecified wherever the mean is far from zero: the slow frequencies.)

Reported: ``M`` (``transition``, ``(k, k)``), its eigenvalues ``λ = ρ e^{iα}`` as ``moduli`` ρ (damping:
1 = undamped rotation), ``angles`` |α| ∈ [0, π] (rad/position) and ``periods`` 2π/|α| (positions; inf for
real positive eigenvalues), each conjugate pair's class (``pair_classes``) and ``period_spread`` (the
relative change of its angle between the fits on the first and the last 7/8 of the window: an error bar);
the ``h``-step prediction error ``‖ẑ_{t+h} − z_{t+h}‖_F / ‖z_{t+h}‖_F`` of the iterated map over all ``t``
for each horizon shorter than the window (others are listed in ``skipped_horizons``), next to the
persistence baseline ``‖z_t − z_{t+h}‖_F / ‖z_{t+h}‖_F``; and the real logarithm ``A = log M``
(``generator``, via ``scipy.linalg.logm`` on the CPU) when it exists (no eigenvalue on the closed negative
real axis), else None.

Defaults that hold: ``n_components="auto"`` takes every column of a table at most :data:`SMALL_TABLE` (32)
wide (a rotary table is covered whole); a table of low numerical rank (fewer singular values above
:data:`RANK_TOLERANCE` times the largest than components computed: a sinusoidal code) whole, to its rank
(a table stored in half precision counts its rank above twice its rounding's spectral edge,
``_dtypes.rounding_edge``: a float16 Whisper table has about 148 directions above its rounding, and a learned
table's smoothly decaying spectrum stays far above it);
else the fewest principal components holding :data:`AUTO_VARIANCE` (99.9%) of the variance, at most
:data:`VARIANCE_CAP` (32: a learned table's map has ``k²`` free parameters); at most :data:`AUTO_CAP`
(256) and at least 2. A code's rank matters: 99.9% of a sinusoidal table's variance
leaves out slow planes, and the subspace it spans is then not invariant under the step, whose fitted
eigenvalues stop matching any frequency. The least
squares are solved in float64 on the CPU by a truncated SVD of the design (singular values below ``rcond``
times the largest are dropped; ``rank`` reports what was kept), so an ill-conditioned table gives the
minimum-norm fit, the same to round-off on every call.

Which pairs are rotations: an undamped conjugate pair (``| |λ| − 1 | ≤`` :data:`MODULUS_TOLERANCE`) is a
``"rotation"`` only when it turns at least once within the window (``α ≥ 2π/n``; slower ones are
``"slower than the window"``: less than a turn cannot show that it turns at a fixed rate) and lies at least
one Fourier bin ``2π/n`` from every other eigenvalue (else ``"unresolved"``: the classical resolution of an
``n``-position window; beyond it a least-squares fit of exact data may still be right, but the window alone
cannot show it, and on a dense spectrum such as a wide sinusoidal table it fills the band with a comb of
pairs that match no frequency), and its angle changes by at most :data:`SPREAD_TOLERANCE` (10%) between
the fits on the first and the last 7/8 of the window (else ``"unstable"``: a pair that a noisy table's fit
places differently on overlapping windows is not a rotation of the table). Others are ``"damped"`` or
``"growing"``. When the table's stored columns pair into single rotations (a sinusoidal or rotary table:
:func:`~pos_geometry.analysis.identify.stored_planes`), each plane is also fitted on its own two columns
(``stored_planes``, with standard errors), where no neighbour within a Fourier bin disturbs it, and
``rotation_periods()`` lists every plane that turns in the window from those fits.

``status`` is ``"rotations"`` when the map's rotations beat every null, else ``"does not apply"`` or ``"not
significant"``, with ``reason``, and ``rotation_pairs()`` is empty. ``"does not apply"``: the premise of a
one-parameter group of rotations is false, from the fit alone: the map grows (``spectral_radius`` > 1 +
tolerance: its predictions diverge), it predicts the next row no better than persistence, no pair is
undamped, or no undamped pair is testable (all slower than the window or unresolved). ``"not significant"``:
the test ran and the map's gain over persistence ``h`` rows ahead is no better than for curves with no
rotation (``tests``, Monte-Carlo nulls through the same PCA and fit, one per family of
:data:`RECURRENCE_NULLS`; the map must beat both; the reason quotes each p): random walks made of the table's own
steps (PCA turns a random walk into cosines that a linear map predicts well) and smooth Gaussian-process
curves with the table's length scale (a smooth curve is predicted well by a linear map too: against walks
alone 7 of 20 GP tables of GPT-2's length scale got "rotations"). ``test`` is the deciding one. A gain below
−1 is recorded as −1 (``GAIN_FLOOR``), so a diverging map never enters a null distribution as a huge
number. The null runs only when the fit alone leaves the question open.

Each rotation is then tested on its own: a smooth background's map has undamped pairs too (its slowest
PCA modes, one or two turns in the window), and a table with one real rotation beside such a background
beats the nulls as a whole. A rotation must be a line in the spectrum of the window's trajectory above the
smooth-GP surrogates' mean power at its frequency, by more than each surrogate's largest such ratio among
its own pairs that could be rotations (its own map fitted; a max-statistic test over the pairs, so their
number and their selection are accounted for: :mod:`~pos_geometry.analysis.nulls.pair_background`,
``background_p``). Pairs
that are not are ``"not above the background"``, named in the reason with their ratio and p, and get no
period; when none is left the status is ``"not significant"``. The test does not run on an exact map or on
planes read from the stored columns. A line can only stand above a background fitted to the table itself,
so a slow plane of a dense sinusoidal code (many equal lines, most of them slow) can fall below it.

A table known to be sinusoidal is better asked directly: :func:`pos_geometry.identify` fits the formula
and returns its base and layout with every frequency exact.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from pos_geometry import _progress
from pos_geometry._dtypes import rounding_edge, storage_eps
from pos_geometry._progress import Progress
from pos_geometry.analysis._batch import BatchResult, PCAItem, pca_items, renamed
from pos_geometry.analysis._inputs import Window, as_batch, check_int, check_level, parse_window
from pos_geometry.analysis._pair_phases import stored_planes
from pos_geometry.analysis._recurrence_map import fit_map, predict, real_log
from pos_geometry.analysis._recurrence_pairs import (
    AUTO_CAP,
    AUTO_VARIANCE,
    MODULUS_TOLERANCE,
    PERSISTENCE_RATIO,
    RANK_TOLERANCE,
    SMALL_TABLE,
    SPREAD_TOLERANCE,
    VARIANCE_CAP,
    PairClass,
    auto_components,
    classify_pairs,
    spread,
    status_before_null,
)
from pos_geometry.analysis._recurrence_periods import (
    CONFIDENCE,
    EXACT,
    conjugate_pair,
    drifts,
    refined_periods,
)
from pos_geometry.analysis._recurrence_results import RecurrenceFit
from pos_geometry.analysis.leverage import dominance_note
from pos_geometry.analysis.nulls.basis import check_null_method
from pos_geometry.analysis.nulls.monte_carlo import NullTest, check_sequential
from pos_geometry.analysis.nulls.pair_background import mark_background
from pos_geometry.analysis.nulls.recurrence_test import RECURRENCE_NULLS, recurrence_null_tests
from pos_geometry.analysis.pca import PCAResult
from pos_geometry.errors import InvalidArgumentError

__all__ = [
    "RECURRENCE_NULLS",
    "RecurrenceFit",
    "fit_recurrence",
    "AUTO_VARIANCE",
    "AUTO_CAP",
    "SMALL_TABLE",
    "VARIANCE_CAP",
    "SPREAD_TOLERANCE",
    "RANK_TOLERANCE",
    "MODULUS_TOLERANCE",
    "PERSISTENCE_RATIO",
]


def _floor(item: PCAItem, center: bool) -> float:
    """The storage rounding's spectral edge relative to the window's largest singular value (0 when the rows
    are not held, or are stored finer than half precision: float32's rounding is far below ``RANK_TOLERANCE``)."""
    rows = item.rows
    ratio0 = (
        float(np.asarray(item.explained_variance_ratio)[0]) if len(item.explained_variance_ratio) else 0.0
    )
    if rows is None or ratio0 <= 0:
        return 0.0
    eps = storage_eps(rows)
    if eps <= 1e-6:
        return 0.0
    x = rows.detach().to("cpu", torch.float64)
    if center:
        x = x - x.mean(dim=0, keepdim=True)
    top = math.sqrt(ratio0 * float(x.pow(2).sum()))
    return rounding_edge(rows, eps) / top if top > 0 else 0.0


def _fit_one(
    item: PCAItem,
    horizons: tuple[int, ...],
    center: bool,
    affine: bool,
    rcond: float,
    auto: bool,
    null: dict[str, Any],
) -> RecurrenceFit:
    d = int(item.rows.shape[1]) if item.rows is not None else SMALL_TABLE + 1
    n_rows = int(item.coords.shape[0])
    k = (
        auto_components(
            np.asarray(item.explained_variance_ratio), d, n_rows, center, affine, _floor(item, center)
        )
        if auto
        else int(item.coords.shape[1])
    )
    z = item.coords[:, :k].detach().to("cpu", torch.float64).numpy()
    n = z.shape[0]
    if n < k + 2 + int(affine):
        raise InvalidArgumentError(
            f"fit_recurrence needs more positions than unknowns per equation (n_components + 1"
            f"{' + 1' if affine else ''}); got n={n} positions in the window with n_components={k}. "
            "Widen the window or lower n_components."
        )
    # Work in the units of the largest coordinate: the fit is scale-free, and so are its errors.
    unit = float(np.abs(z).max()) or 1.0
    z = z / unit
    m, b, rank = fit_map(z, affine, rcond)

    pred_err: dict[int, float] = {}
    pers_err: dict[int, float] = {}
    for h in (h for h in horizons if h < n):
        target = z[h:]
        denom = float(np.linalg.norm(target)) or 1.0
        with np.errstate(over="ignore", invalid="ignore"):
            err = float(np.linalg.norm(predict(z, m, b, h) - target)) / denom
        pred_err[h] = err if math.isfinite(err) else math.inf
        pers_err[h] = float(np.linalg.norm(z[:-h] - target)) / denom

    ev = np.linalg.eigvals(m)
    angles = np.abs(np.angle(ev))
    order = np.lexsort((-np.abs(ev), angles))
    ev, angles = ev[order], angles[order]
    with np.errstate(divide="ignore"):
        periods = np.where(angles > 0, 2 * math.pi / np.where(angles > 0, angles, 1.0), np.inf)
    spreads = spread(z, ev, affine, rcond)
    classes = [
        PairClass.UNSTABLE if c == PairClass.ROTATION and not spreads[i] <= SPREAD_TOLERANCE else c
        for i, c in enumerate(classify_pairs(ev, n, MODULUS_TOLERANCE))
    ]
    # The whole window's refined angles first: a drift's halves lie on either side of them.
    refined, interval = refined_periods(z, ev, classes, pred_err)
    whole = np.where(np.isfinite(refined), 2 * math.pi / np.where(np.isfinite(refined), refined, 1.0), angles)
    half_angles, half_errors, moving = drifts(z, ev, classes, pred_err, whole, null["random_state"])
    refined[moving], interval[moving] = np.nan, np.nan  # a drift has two periods, not one with an interval
    drift_words = []
    for i, c in enumerate(classes):
        if c == PairClass.ROTATION and moving[i]:  # the upper eigenvalue of a drifting pair
            classes[i] = PairClass.DRIFTING
            a, b = 2 * math.pi / half_angles[i]
            sa, sb = 2 * math.pi * half_errors[i] / half_angles[i] ** 2
            drift_words.append(
                f"the period drifts from {a:.4g} ± {sa:.2g} to {b:.4g} ± {sb:.2g} between the two halves"
            )
    planes = stored_planes(item.rows, item.window[0]) if item.rows is not None else None
    turning = int(np.sum(planes[0] * n >= 2 * math.pi)) if planes is not None else 0
    # Pairs the map cannot separate are testable when the stored columns separate them.
    testable = [PairClass.ROTATION if turning and c == PairClass.UNRESOLVED else c for c in classes]
    verdict = status_before_null(ev, testable, pred_err, pers_err, n, drift_words)
    tests: tuple[NullTest, ...] = ()
    background, weak = np.full(len(ev), np.nan), ""
    if null["n_surrogates"] and pred_err and verdict is None:
        if item.rows is None:
            raise InvalidArgumentError(
                "fit_recurrence's null needs the table's rows, and this PCAResult does not hold them; pass the "
                "embedding (or a PCAResult from pca() of it), or n_surrogates=0 to skip the null."
            )
        horizon = max(h for h in pred_err if h <= n // 2) if any(h <= n // 2 for h in pred_err) else 1
        tests, columns = recurrence_null_tests(
            item.rows, torch.from_numpy(z), k, center, affine, rcond, horizon, null
        )
        failed = [t for t in tests if not t.significant]
        if failed:
            verdict = (
                "not significant",
                f"the map predicts {horizon} rows ahead no better than it does for curves with no rotation: gain "
                "over persistence " + "; ".join(t.words() for t in failed),
            )
        elif columns is not None and planes is None and pred_err.get(1, math.inf) >= EXACT:
            tests, verdict, weak = mark_background(z, ev, classes, columns, tests, background, null)
            for i in np.flatnonzero(np.isfinite(background) & (background > null["alpha"])):
                pair = list(conjugate_pair(ev, int(i)))  # no period for either eigenvalue
                refined[pair], interval[pair] = np.nan, np.nan
    if verdict is None:
        words = f"{classes.count(PairClass.ROTATION)} undamped rotation pair(s)"
        if np.isfinite(background).any():
            words += ", each a line above a smooth background at its frequency" + (
                f" ({weak})" if weak else ""
            )
        if planes is not None:
            words += (
                f" of the shift map; the stored columns hold {turning} planes that turn in the window "
                f"({planes[2]}), each fitted on its own pair"
            )
        verdict = "rotations", words
    outliers = dominance_note(item.coords, item.positions)
    return RecurrenceFit(
        transition=m,
        offset=b * unit if affine else None,
        eigenvalues=ev,
        moduli=np.abs(ev),
        angles=angles,
        periods=periods,
        pair_classes=tuple(classes),
        period_spread=spreads,
        period_halves=np.where(
            half_angles > 0, 2 * math.pi / np.where(half_angles > 0, half_angles, 1.0), np.inf
        ),
        refined_periods=refined,
        period_interval=interval,
        confidence=CONFIDENCE,
        prediction_error=pred_err,
        persistence_error=pers_err,
        skipped_horizons=tuple(h for h in horizons if h >= n),
        generator=real_log(m),
        n_components=k,
        rank=rank,
        center=center,
        affine=affine,
        window=item.window,
        n_positions=n,
        explained_variance_ratio=np.asarray(item.explained_variance_ratio[:k], dtype=np.float64),
        status=verdict[0],
        reason=f"{verdict[1]}. Read with care: {outliers}" if outliers else verdict[1],
        outlier_rows=outliers,
        tests=tests,
        provenance=item.provenance,
        stored_planes=np.stack(planes[:2], axis=1) if planes is not None else None,
        stored_layout=planes[2] if planes is not None else None,
        background_p=background,
    )


def fit_recurrence(
    x: Any,
    n_components: int | str = "auto",
    *,
    window: Window = None,
    center: bool = True,
    affine: bool = True,
    horizons: tuple[int, ...] = (1, 8, 64),
    rcond: float = 1e-10,
    n_surrogates: int = 99,
    alpha: float = 0.05,
    random_state: int = 0,
    null_method: str = "fast",
    sequential: bool = True,
    progress: Progress = None,
    **deprecated: Any,
) -> RecurrenceFit | BatchResult:
    """Fit ``z[t+1] ≈ M z[t]`` (+ ``b`` if ``affine``) in the top PCA subspace; see the module docstring.

    ``x``: a ``PositionalEmbedding``, a list of them, a tensor/array ``(n, d)`` / ``(batch, n, d)``, or a
    ``PCAResult`` (its coordinates, with its own window and centring). ``n_components``: an integer, or
    ``"auto"`` (every column of a table ≤ 32 wide, else the fewest components holding 99.9% of the variance,
    2..32; a table of low numerical rank whole, up to 256); ``center``, ``affine``: see the module
    docstring. ``rcond``: singular values of the design below ``rcond`` times the largest are dropped. ``n_surrogates``, ``alpha``, ``random_state``: the
    nulls for "rotations": the gain over persistence must beat that of random walks made of the table's own
    steps and of smooth GP curves of its length scale (same PCA, same fit; ``n_surrogates`` each);
    ``n_surrogates=0`` skips them. ``null_method``: ``"fast"`` (the
    walks in the table's leading principal subspace) or ``"exact"`` (whole tables, the reference; see
    :mod:`pos_geometry.analysis.nulls.basis`). ``sequential``: each null stops once 10 of its surrogates
    reach the table's gain (Besag & Clifford; the decision is the one all ``n_surrogates`` would give);
    False draws them all. ``progress``: a bar of the surrogates done, on stderr (None: in
    a terminal or Jupyter; True/False: always/never; a callable: called with ``(done, total)`` instead). ``k=`` is a deprecated alias of ``n_components``.
    Returns a :class:`RecurrenceFit`, or a ``BatchResult`` of them for a batch.

    >>> import numpy as np
    >>> theta = np.array([0.5, 0.05])
    >>> ang = np.arange(100)[:, None] * theta
    >>> table = np.concatenate([np.cos(ang), np.sin(ang)], axis=1)
    >>> fit = fit_recurrence(table)
    >>> fit.n_components, np.round(np.unique(np.round(fit.angles, 8)), 6).tolist(), fit.status
    (4, [0.05, 0.5], 'rotations')
    """
    args = renamed("fit_recurrence", deprecated, {"k": "n_components"}, {"n_components": n_components})
    n_components = args["n_components"]
    if not isinstance(horizons, tuple | list) or not all(
        isinstance(h, int) and not isinstance(h, bool) and h >= 1 for h in horizons
    ):
        raise InvalidArgumentError(
            f"horizons must be a tuple of positive integers, e.g. (1, 8, 64); got {horizons!r}."
        )
    if isinstance(rcond, bool) or not isinstance(rcond, int | float) or not 0 <= rcond < 1:
        raise InvalidArgumentError(f"rcond must be a number in [0, 1), e.g. 1e-10; got {rcond!r}.")
    n_surrogates = check_int("n_surrogates", n_surrogates, 0, ">= 0 (0 skips the null)")
    random_state = check_int("random_state", random_state, 0, ">= 0 (a seed)")
    if n_surrogates:
        alpha = check_level(alpha, n_surrogates)
    null = {
        "n_surrogates": n_surrogates,
        "alpha": float(alpha),
        "random_state": random_state,
        "method": check_null_method(null_method),
        "sequential": check_sequential(sequential),
    }
    auto = n_components == "auto"
    if auto:
        cap = AUTO_CAP
        if isinstance(x, PCAResult):
            cap = x.n_components_
        else:
            shape = as_batch(x).data.shape
            start, stop = parse_window(window, shape[1])
            cap = min(cap, shape[2], max(1, stop - start - 3))
        n_components = cap
    elif isinstance(n_components, str):
        raise InvalidArgumentError(
            f"n_components must be a positive integer or 'auto'; got {n_components!r}."
        )
    items, single = pca_items(x, n_components, window=window, center=center)
    with _progress.task("recurrence nulls", len(RECURRENCE_NULLS) * n_surrogates * len(items), show=progress):
        fits = tuple(
            _fit_one(it, tuple(horizons), it.center, affine, float(rcond), auto, null) for it in items
        )
    return fits[0] if single else BatchResult(fits, tuple(f.provenance for f in fits))
