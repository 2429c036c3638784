"""One offline policy: the probe, the reasons, the fix hint, and the commands that follow it."""

from __future__ import annotations

import socket

import pytest
from huggingface_hub import constants

from pos_geometry.errors import NotCachedError
from pos_geometry.sources import network


def _closed_port() -> int:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def no_hub(monkeypatch: pytest.MonkeyPatch) -> str:
    """huggingface_hub pointed at a closed loopback port, no offline variables, no proxy."""
    url = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setattr(constants, "ENDPOINT", url)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    for name in ("HF_HUB_OFFLINE", "POS_GEOMETRY_OFFLINE", *network._PROXIES):
        monkeypatch.delenv(name, raising=False)
    return url


def test_the_probe_runs_once_per_host(no_hub: str, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = socket.create_connection
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: calls.append(a) or real(*a, **k))
    assert network.hub_reachable() is False and network.hub_reachable() is False
    assert len(calls) == 1
    with socket.socket() as server:  # a listening port is reachable
        server.bind(("127.0.0.1", 0))
        server.listen()
        assert network.hub_reachable(f"http://127.0.0.1:{server.getsockname()[1]}") is True


def test_a_proxy_skips_the_probe(no_hub: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    assert network.hub_reachable() is True and network.offline_reason() is None


def test_each_reason_is_named(no_hub: str, monkeypatch: pytest.MonkeyPatch) -> None:
    port = no_hub.rsplit(":", 1)[1]
    assert network.offline_reason() == f"Offline (no network: 127.0.0.1:{port} could not be reached)"
    assert network.offline_reason(False) is None  # the network asked for explicitly
    assert network.offline_reason(True) == "Offline (offline=True was passed)"
    monkeypatch.setenv("POS_GEOMETRY_OFFLINE", "1")
    assert network.offline_reason(False) == "Offline (POS_GEOMETRY_OFFLINE is set)"
    monkeypatch.delenv("POS_GEOMETRY_OFFLINE")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert network.offline_reason() == "Offline (HF_HUB_OFFLINE is set)"


def test_one_fix_hint_style() -> None:
    hint = network.fetch_hint("org/name", "config.json", "step10")
    assert "`hf download org/name config.json --revision step10`" in hint and "huggingface-cli" not in hint


def test_running_a_model_without_network_fails_at_once_and_says_why(no_hub: str, capfd) -> None:
    """transformers is asked for local files only: no retry lines, and the one hint style."""
    from pos_geometry.hidden.opening import open_model

    with pytest.raises(NotCachedError) as info:
        open_model("gpt2")
    text = str(info.value)
    assert (
        text.startswith("Offline (no network: 127.0.0.1:") and "`hf download openai-community/gpt2`" in text
    )
    assert "Retrying" not in capfd.readouterr().err


def test_the_atlases_say_which_weights_are_missing(no_hub: str, monkeypatch, tmp_path) -> None:
    import pos_geometry as pg

    monkeypatch.setenv("POS_GEOMETRY_DATA", str(tmp_path))  # no real weights beside the checkout either
    with pytest.raises(
        NotCachedError, match=r"^position_qk_atlas reads every layer's attention \(query/key\) weights"
    ):
        pg.position_qk_atlas("gpt2")
    with pytest.raises(NotCachedError, match=r"^rotary_atlas reads every layer's attention"):
        pg.rotary_atlas("pythia-70m")


def test_an_unreachable_hub_is_probed_again_later(no_hub: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # A failed probe must not stand for the life of the process: a notebook started while the network was
    # down goes online when it is back, and a loopback server that reuses the port of a dead one (as the
    # tests' hub servers do) is not taken for it.
    clock = [1000.0]
    monkeypatch.setattr(network.time, "monotonic", lambda: clock[0])
    assert network.hub_reachable() is False
    port = int(no_hub.rsplit(":", 1)[1])
    with socket.socket() as server:  # something now listens on that very port
        server.bind(("127.0.0.1", port))
        server.listen()
        assert network.hub_reachable() is False  # within UNREACHABLE_FOR: the failure stands
        clock[0] += network.UNREACHABLE_FOR + 1
        assert network.hub_reachable() is True
        clock[0] += 10 * network.UNREACHABLE_FOR
    assert network.hub_reachable() is True  # a success stands (requests themselves report a later failure)
