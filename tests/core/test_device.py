"""``pos_geometry._device``: where ``device="auto"`` becomes a device, and when two names mean one device."""

from __future__ import annotations

import pytest
import torch

from pos_geometry._device import resolve_device, same_device
from pos_geometry.errors import InvalidArgumentError


def test_names_of_one_device_are_the_same_device():
    assert same_device("cpu", torch.device("cpu"))
    assert same_device("cpu:0", "cpu")
    assert not same_device("cpu", "meta")
    if torch.cuda.is_available():
        # a model moved with .to("cuda") reports cuda:0; asking for "cuda" must not be a mismatch
        current = torch.cuda.current_device()
        assert same_device("cuda", f"cuda:{current}")
        assert not same_device("cuda", "cpu")


def test_a_device_torch_does_not_know_is_a_typed_error():
    with pytest.raises(InvalidArgumentError, match="not a device torch understands"):
        resolve_device("gpu0")
