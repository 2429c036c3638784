"""The null machinery behind every verdict: surrogate tables a statistic must beat, and the Monte-Carlo test.

A verdict is only as good as its null. These modules draw the surrogates (random walks of a table's own steps,
smooth Gaussian-process curves of its length scale, stationary curves with its own spectrum, shuffled rows),
in the table's principal basis (:mod:`~pos_geometry.analysis.nulls.basis`), and turn a statistic's surrogate
values into a p-value (:mod:`~pos_geometry.analysis.nulls.monte_carlo`). The statistics themselves live here
too: the helix's rotation share (:mod:`~pos_geometry.analysis.nulls.helix_test`), the periodicity's power over
background (:mod:`~pos_geometry.analysis.nulls.period`) and the recurrence's predictive gain
(:mod:`~pos_geometry.analysis.nulls.recurrence_test`). Nothing here is public API; the analyses are.
"""
