"""_dtypes: a dtype's name, and the precision a table was stored in, read from its values."""

from __future__ import annotations

import math

import numpy as np
import torch

from pos_geometry._dtypes import dtype_name, rounding_edge, storage_eps


def test_dtype_names():
    assert dtype_name(torch.float16) == "float16" and dtype_name(torch.bfloat16) == "bfloat16"


def test_the_storage_precision_is_read_from_the_values():
    # Analyses upcast half precision to float32: the values, not the dtype, say a table was float16.
    x = torch.randn(200, 16, generator=torch.Generator().manual_seed(0))
    assert storage_eps(x) == torch.finfo(torch.float32).eps
    assert storage_eps(x.double()) == torch.finfo(torch.float64).eps
    assert storage_eps(x.half().float()) == torch.finfo(torch.float16).eps
    assert storage_eps(x.half()) == torch.finfo(torch.float16).eps
    assert storage_eps(x.bfloat16().double()) == torch.finfo(torch.bfloat16).eps
    assert storage_eps(x * 1e6) == torch.finfo(torch.float32).eps  # beyond float16's range: not half
    assert storage_eps(torch.tensor([[math.nan, 1.0]])) == torch.finfo(torch.bfloat16).eps  # NaN ignored
    assert storage_eps(torch.tensor([[math.nan, 1.2345678]])) == torch.finfo(torch.float32).eps


def test_the_rounding_edge_is_the_largest_singular_value_of_the_rounding():
    # Round a smooth float64 table to float16: the rounding error's largest singular value (computed) lies
    # within 30% of the Marchenko–Pastur edge the function predicts from the values alone.
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.normal(size=(1024, 256)))
    half = x.half()
    error = half.double() - x
    observed = float(torch.linalg.matrix_norm(error, ord=2))
    assert math.isclose(rounding_edge(half), observed, rel_tol=0.3), (rounding_edge(half), observed)
    assert rounding_edge(x) < 1e-12 * observed  # float64: its own rounding is far below
