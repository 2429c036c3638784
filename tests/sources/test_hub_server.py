"""The local hub server's pointing: every client a test reaches the hub through calls that test's server."""

from __future__ import annotations

import _pos_geometry_tests_hub_server as hub_server  # registered by conftest.py
import pytest


def test_clients_made_during_an_earlier_test_call_the_current_server(tmp_path):
    # huggingface_hub's module-level HfApi and the one transformers makes on first use keep the endpoint they
    # were made with; made while an earlier test's server was up, they would call it after it closed (and
    # retry with backoff: a comparison test waited 140 s). Each pointing sends them to its own server.
    from huggingface_hub import hf_api
    from transformers.utils import hub as transformers_hub

    for name in ("first", "second"):
        with hub_server.HubServer() as server, pytest.MonkeyPatch.context() as monkeypatch:
            hub_server.point_hub_at(monkeypatch, server, tmp_path / name)
            assert hf_api.api.endpoint == server.url
            assert transformers_hub.hf_api().endpoint == server.url
