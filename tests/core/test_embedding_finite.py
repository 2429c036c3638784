"""The finiteness check of PositionalEmbedding, for every float dtype and any place of the bad entry.

The check runs one min/max reduction instead of ``torch.isfinite`` (which allocates full-size
temporaries); it must refuse exactly the matrices numpy's ``isfinite`` calls non-finite, and name
the first bad entry.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pos_geometry import NonFiniteError, PositionalEmbedding, Provenance

PROV = Provenance(model_id="toy", kind="learned", source="unit-test")
DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


@settings(max_examples=60, deadline=None)
@given(
    dtype=st.sampled_from(DTYPES),
    rows=st.integers(1, 70),
    cols=st.integers(1, 40),
    bad=st.lists(
        st.tuples(st.floats(0, 1, exclude_max=True), st.sampled_from([np.nan, np.inf, -np.inf])),
        max_size=3,
    ),
    seed=st.integers(0, 2**16),
)
def test_refuses_exactly_the_non_finite_matrices(dtype, rows, cols, bad, seed) -> None:
    m = np.random.default_rng(seed).normal(size=(rows, cols)) * 100
    for where, value in bad:
        m.flat[int(where * m.size)] = value
    tensor = torch.from_numpy(m).to(dtype)
    expected_bad = np.argwhere(~np.isfinite(tensor.double().numpy()))
    if len(expected_bad) == 0:
        assert PositionalEmbedding(tensor, PROV).matrix is tensor
        return
    r, c = expected_bad[0]
    with pytest.raises(
        NonFiniteError, match=rf"{len(expected_bad)} NaN/inf entries \(first at row {r}, column {c}\)"
    ):
        PositionalEmbedding(tensor, PROV)


@pytest.mark.parametrize("dtype", DTYPES)
def test_largest_finite_values_are_accepted(dtype) -> None:
    info = torch.finfo(dtype)
    m = torch.tensor([[info.max, info.min], [info.tiny, -info.tiny]], dtype=dtype)
    assert torch.equal(PositionalEmbedding(m, PROV).matrix, m)


def test_non_contiguous_views_are_checked() -> None:
    m = torch.zeros(6, 8)
    m[4, 6] = float("nan")
    view = m.t()[::2]  # (4, 6), strided: holds the NaN at row 3, column 4
    with pytest.raises(NonFiniteError, match="row 3, column 4"):
        PositionalEmbedding(view, PROV)
    assert PositionalEmbedding(m.t()[1::2], PROV).shape == (4, 6)
