"""How attention reads position, from the weights: the rotary atlas and the QK views of a learned table.

- :mod:`~pos_geometry.atlas.rotary`: per head and rotary plane, the share of the query-key form each plane
  carries (:func:`rotary_atlas`), from weights read by role; per layer type for hybrid models.
- :mod:`~pos_geometry.atlas.plane_sums` / :mod:`~pos_geometry.atlas.plane_biases`: the per-plane Gram sums and the
  bias terms those shares are made of.
- :mod:`~pos_geometry.atlas.position_qk`: how each head's query-key form reads a learned positional table
  (:func:`position_qk_atlas`), with its null and the look-back it implies (:mod:`~pos_geometry.atlas.lookback`).
- :mod:`~pos_geometry.atlas.qk`: the one entry point that picks the right view for a model (:func:`qk_atlas`).
"""
