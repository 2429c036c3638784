"""Every reproduction test runs offline, with empty private caches: what it finds is what it was given."""

from __future__ import annotations

import socket

import pytest


@pytest.fixture(autouse=True)
def _offline_with_empty_caches(monkeypatch, tmp_path):
    monkeypatch.setenv("POS_GEOMETRY_CACHE", str(tmp_path / "pg-cache"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))

    def refuse(*args, **kwargs):
        raise AssertionError("network touched")

    monkeypatch.setattr(socket.socket, "connect", refuse)
