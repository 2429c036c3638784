"""A misbehaving hub: every fault is a typed error naming the URL, the cache keeps nothing from it,
and the next good load is correct (issue 10, items 1 and 8).

The served repo ``acme/tiny`` holds a (256, 128) float32 table (128 KiB) behind a larger token
table, so reading it takes more than one range request, as in the reproduction of the hybrid
table: from the second request on, the server sends another version of the file.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import _pos_geometry_tests_hub_server as hub_server  # registered by conftest.py
import pytest
import torch
from safetensors.torch import save_file

from pos_geometry import load
from pos_geometry.errors import (
    AccessDeniedError,
    CheckpointFormatError,
    InvalidArgumentError,
    PosGeometryError,
    RemoteError,
    UnknownModelError,
)
from pos_geometry.sources import _deadline
from pos_geometry.sources.hub import read_hub_tensor

REPO = "acme/tiny"
CONFIG = {"model_type": "gpt2", "n_positions": 256, "n_embd": 128, "n_layer": 1}


def _weights(path: Path, seed: int) -> tuple[Path, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    wpe = torch.randn(256, 128, generator=gen)
    save_file(
        {"transformer.wpe.weight": wpe, "transformer.wte.weight": torch.randn(1024, 128, generator=gen)}, path
    )
    return path, wpe


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("faults")
    (root / "config.json").write_text(json.dumps(CONFIG))
    good, wpe = _weights(root / "model.safetensors", 0)
    other, _ = _weights(root / "other.safetensors", 1)  # the same size, another version
    assert good.stat().st_size == other.stat().st_size
    with hub_server.HubServer() as server:
        server.add_revision(REPO, {"config.json": root / "config.json", "model.safetensors": good})
        yield server, wpe, other


@pytest.fixture
def hub(served, monkeypatch, tmp_path):
    server, wpe, other = served
    hub_server.point_hub_at(monkeypatch, server, tmp_path)
    server.fault = None
    server.validators, server.file_answers = "all", 0
    server.clear_log()
    yield server, wpe, other, tmp_path / "pos_geometry_cache"
    server.fault = None
    server.validators = "all"


def _cached_files(cache: Path) -> list[Path]:
    return [p for p in cache.rglob("*") if p.is_file() and "refs" not in p.parts]


FAULTS = {
    # kind: (Fault arguments, expected error type, message pattern)
    "changed": ({"after": 1}, RemoteError, r"changed on the server while being read: http://127\.0\.0\.1:\d+/.* ETag"),
    "drop": ({"after": 1}, RemoteError, r"request to http://127\.0\.0\.1:\d+/\S+ failed \(RemoteProtocolError"),
    "short": ({"after": 1}, CheckpointFormatError, r"connection ended after \d+ of the \d+ bytes"),
    "ignore_range": ({}, CheckpointFormatError, "ignored the HTTP Range request"),
    "status-500": ({"status": 500}, RemoteError, r"http://127\.0\.0\.1:\d+/\S+ answered HTTP 500"),
    "status-429": ({"status": 429}, RemoteError, r"answered HTTP 429 .*busy: wait and retry"),
    "status-404": ({"status": 404}, CheckpointFormatError, r"has no file \(model\.safetensors\)"),
    "redirect_loop": ({}, RemoteError, r"request to http://127\.0\.0\.1:\d+/\S+ failed \(TooManyRedirects"),
    "bad_gzip": ({}, RemoteError, r"request to http://127\.0\.0\.1:\d+/\S+ failed \(DecodingError"),
    "non_json": ({}, RemoteError, r"http://127\.0\.0\.1:\d+/api/models/acme/tiny/revision/main did not answer with a model listing \(JSONDecodeError"),
    "no_rfilename": ({}, RemoteError, r"/api/models/acme/tiny/revision/main did not answer with a model listing \(KeyError"),
    "api_status": ({"status": 503}, RemoteError, r"api/models/acme/tiny/revision/main answered HTTP 503"),
    "gated": ({}, AccessDeniedError, r"'acme/tiny' exists on http://127\.0\.0\.1:\d+ but is gated"),
    # the listing is bounded in size (after decompression) and nesting
    "endless": ({}, RemoteError, r"/api/models/acme/tiny/revision/main sent more than 33,554,432 bytes for an API answer"),
    "gzip_bomb": ({}, RemoteError, r"/api/models/acme/tiny/revision/main sent more than 33,554,432 bytes"),
    "deep_json": ({}, RemoteError, r"/api/models/acme/tiny/revision/main did not answer with a usable listing \(its JSON is nested too deeply"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_each_fault_is_typed_leaves_no_cache_and_a_good_load_follows(hub, name: str) -> None:
    server, wpe, other, cache = hub
    kwargs, error, pattern = FAULTS[name]
    kind = name.split("-")[0]
    server.fault = hub_server.Fault(kind, other=other, **kwargs)
    with pytest.raises(error, match=pattern) as info:
        load(REPO)
    assert "not cached" not in str(info.value) and "No model repository" not in str(info.value)
    assert not isinstance(info.value, UnknownModelError)
    assert _cached_files(cache) == []  # no partial or hybrid table was kept
    server.fault = None
    assert torch.equal(load(REPO).matrix, wpe)
    assert len(_cached_files(cache)) == 1
    server.clear_log()
    assert torch.equal(load(REPO).matrix, wpe)  # served from the cache
    assert not [r for r in server.requests() if r.range]


def test_the_changed_version_is_never_mixed_into_the_table(hub) -> None:
    """The reproduction: without the check, rows 0-127 came from one version and 128-255 from another."""
    server, _, other, cache = hub
    server.fault = hub_server.Fault("changed", after=1, other=other)
    with pytest.raises(RemoteError):
        read_hub_tensor(REPO)
    ranged = [r for r in server.requests() if r.range]
    assert len(ranged) == 2  # the first answer was kept; the second had another ETag and was refused
    assert _cached_files(cache) == []


def test_a_trickling_server_is_stopped_by_the_load_deadline(hub, monkeypatch) -> None:
    server, wpe, _, cache = hub
    monkeypatch.setenv(_deadline.ENV_VAR, "1.5")
    server.fault = hub_server.Fault("trickle", trickle_s=0.2)
    with pytest.raises(
        RemoteError, match=r"within its 1\.5 s deadline.*http://127\.0\.0\.1.*POS_GEOMETRY_LOAD_TIMEOUT"
    ):
        load(REPO)
    assert _cached_files(cache) == []
    server.fault = None
    assert torch.equal(load(REPO).matrix, wpe)


# --- deadlines cover every request ---------------------------------------------------------------------
@pytest.fixture
def settle():
    """Wait (after the test) for the requests a load gave up at its deadline: they end on their own once
    the fault is cleared. huggingface_hub closes its shared HTTP client when a retry cannot connect, which
    would break the next test's requests if the server were stopped under a retrying call."""
    yield
    for thread in threading.enumerate():
        if thread.name == "pos_geometry-request":
            thread.join(timeout=30)
            assert not thread.is_alive(), "a request given up at the deadline did not end"


@pytest.mark.parametrize("path", ["/api/models/", "/resolve/"])
def test_trickled_headers_are_stopped_by_the_load_deadline(hub, settle, monkeypatch, path: str) -> None:
    """A server that sends its status line and headers a byte at a time defeats any per-read timeout. The
    model listing (a huggingface_hub call) and the file requests (``resolve``: HEAD and ranged GET) are
    each given up when the load's deadline passes, with the deadline's typed error."""
    server, wpe, _, cache = hub
    monkeypatch.setenv(_deadline.ENV_VAR, "1.0")
    server.fault = hub_server.Fault("slow_headers", path=path, trickle_s=0.01)
    with pytest.raises(RemoteError, match=r"within its 1 s deadline.*POS_GEOMETRY_LOAD_TIMEOUT"):
        load(REPO)  # the deadline's own error: given up at the deadline, not when the headers end
    assert _cached_files(cache) == []
    server.fault = None
    assert torch.equal(load(REPO).matrix, wpe)


def test_retry_after_on_config_json_is_bounded_by_the_load_deadline(hub, settle, monkeypatch) -> None:
    """A 503 with ``Retry-After: 1`` on ``config.json``: huggingface_hub sleeps 2 s before each of its own
    retries; the read is given up at the load's deadline instead (1.5 s)."""
    from pos_geometry.sources.hub import read_config

    server, _, _, _ = hub
    monkeypatch.setenv(_deadline.ENV_VAR, "1.5")
    server.fault = hub_server.Fault("retry_after", path="config.json", retry_after_s=1)
    server.clear_log()
    with pytest.raises(RemoteError):  # the 503, or the deadline: never a sleep through every retry
        read_config(REPO)
    asked = [r for r in server.requests() if "config.json" in r.path]
    assert 1 <= len(asked) <= 2, [r.path for r in asked]  # bounded by requests made, not by a clock
    server.fault = None
    config, commit = read_config(REPO)
    assert config["n_positions"] == CONFIG["n_positions"] and len(commit) == 40


def test_bounded_hands_back_results_and_errors_and_gives_up_at_the_deadline() -> None:
    assert _deadline.bounded(lambda: 5, "u") == 5  # no deadline: called in place
    with _deadline.deadline(5.0):
        assert _deadline.bounded(lambda: 6, "u") == 6
        with pytest.raises(KeyError):
            _deadline.bounded(lambda: {}["missing"], "u")
    closed = []
    with _deadline.deadline(0.3), pytest.raises(RemoteError, match="stopped while reading u"):
        _deadline.bounded(lambda: time.sleep(1.0) or "late", "u", discard=closed.append)  # before it returned
    time.sleep(1.0)
    assert closed == ["late"]  # what the abandoned call returned was discarded


@pytest.mark.parametrize("value", ["0", "-3", "soon", "nan", "inf"])
def test_a_bad_deadline_setting_is_a_typed_error(monkeypatch, value: str) -> None:
    monkeypatch.setenv(_deadline.ENV_VAR, value)
    with pytest.raises(InvalidArgumentError, match="POS_GEOMETRY_LOAD_TIMEOUT must be a positive number"):
        _deadline.load_timeout()


def test_the_deadline_is_documented_and_nests(monkeypatch) -> None:
    monkeypatch.delenv(_deadline.ENV_VAR, raising=False)
    assert _deadline.load_timeout() == _deadline.DEFAULT_LOAD_TIMEOUT == 300.0
    assert _deadline.remaining("u", 7.0) == 7.0  # no deadline running: the per-request cap
    with _deadline.deadline(100.0), _deadline.deadline(0.0):  # the inner block keeps the outer deadline
        assert 0 < _deadline.remaining("u") <= 100.0
    with _deadline.deadline(0.0), pytest.raises(RemoteError, match="stopped while reading u"):
        _deadline.remaining("u")


def test_every_fault_kind_is_exercised() -> None:
    kinds = {name.split("-")[0] for name in FAULTS} | {"trickle", "slow_headers", "retry_after", "alternate"}
    assert kinds == set(hub_server.RANGE_FAULTS + hub_server.API_FAULTS + hub_server.REQUEST_FAULTS)
    assert all(issubclass(error, PosGeometryError) for _, error, _ in FAULTS.values())


# --- no hybrid table, with or without ETags --------------------------------------------------------------
def test_without_validators_a_swapped_file_is_caught_by_reading_again(hub) -> None:
    """No ETag, Last-Modified or commit header: the version cannot be pinned, so every range is read again and
    compared before the table is used; the swap after the first answer is refused and nothing is cached."""
    server, _, other, cache = hub
    server.validators = "none"
    server.fault = hub_server.Fault("changed", after=1, other=other)
    with pytest.raises(RemoteError, match=r"gave other bytes .* than one answer"):
        read_hub_tensor(REPO)
    assert _cached_files(cache) == []


def test_without_validators_a_stable_file_loads_and_says_it_was_read_twice(hub) -> None:
    server, wpe, _, cache = hub
    server.validators = "none"
    table = load(REPO)
    assert torch.equal(table.matrix, wpe)
    assert "read twice and compared" in table.provenance.source
    ranged = [r for r in server.requests() if r.range]
    assert len(ranged) >= 3 and len(_cached_files(cache)) == 1  # the ranges, then one answer spanning them
    assert len({r.range for r in ranged}) == len(
        ranged
    )  # the second read is one request, not the same ranges


def test_a_validator_dropped_after_the_first_answer_is_a_change(hub) -> None:
    server, _, _, cache = hub
    server.validators = "first"
    with pytest.raises(RemoteError, match="dropped its ETag header"):
        read_hub_tensor(REPO)
    assert _cached_files(cache) == []


def test_last_modified_alone_pins_the_version(hub) -> None:
    """Adversarial, not the reported example: only Last-Modified is sent, and the file behind it changes."""
    server, _, other, cache = hub
    os.utime(other, (1_000_000_000, 1_000_000_000))  # another version, another date
    server.validators = "lastmod"
    server.fault = hub_server.Fault("changed", after=1, other=other)
    with pytest.raises(RemoteError, match="Last-Modified"):
        read_hub_tensor(REPO)
    assert _cached_files(cache) == []


# --- no hybrid table from a server that keeps changing the file -------------------------------------------
def _other_table(other: Path) -> torch.Tensor:
    from safetensors.torch import load_file

    return load_file(str(other))["transformer.wpe.weight"]


def _clean_ranged_requests(server) -> int:
    server.validators, server.fault = "none", None
    server.clear_log()
    read_hub_tensor(REPO)
    return len([r for r in server.requests() if r.range])


def test_a_swap_at_any_request_index_never_gives_a_hybrid_table(hub, monkeypatch, tmp_path) -> None:
    """No validators; the file changes once, at each possible ranged request in turn (during the first read,
    between the reads, during the one-answer read, after): the load gives one whole version or refuses, and
    a refusal caches nothing."""
    server, wpe, other, _ = hub
    total = _clean_ranged_requests(server)
    versions = {"A": wpe, "B": _other_table(other)}
    outcomes = []
    for swap in range(total + 2):
        cache = tmp_path / f"cache{swap}"
        monkeypatch.setenv("POS_GEOMETRY_CACHE", str(cache))
        server.fault = hub_server.Fault("changed", after=swap, other=other)
        try:
            table = load(REPO).matrix
        except RemoteError as exc:
            assert "changed on the server while being read" in str(exc)
            assert _cached_files(cache) == []
            outcomes.append("refused")
            continue
        (match,) = [name for name, version in versions.items() if torch.equal(table, version)]
        outcomes.append(match)
    assert outcomes[0] == "B"  # the other version from the first byte on is one whole version
    assert outcomes[-2:] == ["A", "A"]  # changed after every read: the read was of one version
    assert set(outcomes[1:total]) == {"refused"}  # any change while reading is refused


def test_a_server_that_alternates_versions_is_refused(hub) -> None:
    """Two versions in turn, one per answer: reading the same ranges twice would see the same mixture
    twice (the case that defeats a range-by-range re-read); one answer cannot hold two versions."""
    server, _, other, cache = hub
    server.validators = "none"
    server.fault = hub_server.Fault("alternate", other=other)
    with pytest.raises(RemoteError, match=r"came from more than one version"):
        read_hub_tensor(REPO)
    assert _cached_files(cache) == []


def test_the_one_answer_check_is_bounded(hub, monkeypatch) -> None:
    server, _, _, cache = hub
    server.validators = "none"
    monkeypatch.setenv("POS_GEOMETRY_MAX_VERIFY_BYTES", "1024")
    with pytest.raises(RemoteError, match=r"over the limit of 1,024 set by POS_GEOMETRY_MAX_VERIFY_BYTES"):
        read_hub_tensor(REPO)
    assert _cached_files(cache) == []
