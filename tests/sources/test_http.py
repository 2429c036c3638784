"""HttpByteSource against the local hub-compatible server: exact bytes, few requests, strict checks."""

from __future__ import annotations

import _pos_geometry_tests_hub_server as hub_server  # registered by conftest.py
import numpy as np
import pytest
from huggingface_hub import errors as hf_errors
from huggingface_hub import hf_hub_url

from pos_geometry.errors import CheckpointFormatError
from pos_geometry.sources.http import HttpByteSource

SIZE = 1_000_003


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    blob = np.random.default_rng(0).integers(0, 256, SIZE, dtype=np.uint8).tobytes()
    path = tmp_path_factory.mktemp("http") / "blob.bin"
    path.write_bytes(blob)
    with hub_server.HubServer() as server:
        server.add_revision("org/blob", {"blob.bin": path})
        yield server, blob


@pytest.fixture
def hub(served, monkeypatch, tmp_path):
    server, blob = served
    hub_server.point_hub_at(monkeypatch, server, tmp_path)
    server.ignore_range = server.lfs_redirect = False
    server.clear_log()
    yield server, blob, hf_hub_url("org/blob", "blob.bin")
    server.ignore_range = server.lfs_redirect = False


def _gets(server):
    return [r for r in server.requests() if r.method == "GET"]


def test_size_from_head_and_reads_are_exact(hub):
    server, blob, url = hub
    src = HttpByteSource(url)
    assert src.size == len(blob)
    assert [r.method for r in server.requests()] == ["HEAD"]
    rng = np.random.default_rng(1)
    for _ in range(25):
        offset = int(rng.integers(0, SIZE))
        length = int(rng.integers(0, min(200_000, SIZE - offset) + 1))
        assert src.read(offset, length) == blob[offset : offset + length]
    assert src.read(SIZE - 5, 5) == blob[-5:]
    # what the client counted equals what the server sent as bodies
    assert src.bytes_read == sum(r.body_bytes for r in _gets(server))
    assert all(r.status == 206 and r.range for r in _gets(server))


def test_small_reads_share_one_readahead_window(hub):
    server, blob, url = hub
    src = HttpByteSource(url, size=SIZE, readahead=4096)
    assert src.read(0, 8) == blob[:8]
    assert src.read(8, 1000) == blob[8:1008]
    assert src.read(3500, 1000) == blob[3500:4500]  # ends 404 bytes past the window: one more request
    gets = _gets(server)
    assert len(gets) == 2
    assert gets[0].range == "bytes=0-4095"
    assert gets[1].range == "bytes=4096-8191"


def test_tail_reads_look_backwards(hub):
    """A zip's end-of-central-directory read pulls in the central directory before it."""
    server, blob, url = hub
    src = HttpByteSource(url, size=SIZE, readahead=4096)
    assert src.read(SIZE - 22, 22) == blob[-22:]
    assert src.read(SIZE - 3000, 2000) == blob[SIZE - 3000 : SIZE - 1000]
    gets = _gets(server)
    assert [g.range for g in gets] == [f"bytes={SIZE - 4096}-{SIZE - 1}"]


def test_large_reads_fetch_exactly_the_range(hub):
    server, blob, url = hub
    src = HttpByteSource(url, size=SIZE, readahead=4096)
    assert src.read(100_000, 300_000) == blob[100_000:400_000]
    (get,) = _gets(server)
    assert get.range == "bytes=100000-399999"
    assert get.body_bytes == 300_000
    assert src.bytes_read == 300_000


def test_follows_redirects(hub):
    server, blob, url = hub
    server.lfs_redirect = True
    src = HttpByteSource(url, size=SIZE)
    assert src.read(500_000, 70_000) == blob[500_000:570_000]
    assert [r.status for r in server.requests()] == [302, 206]


def test_out_of_range_read_makes_no_request(hub):
    server, _, url = hub
    src = HttpByteSource(url, size=SIZE)
    with pytest.raises(CheckpointFormatError, match="goes past its end"):
        src.read(SIZE - 10, 11)
    assert server.requests() == []


def test_server_ignoring_range_is_cut_off(hub):
    server, _, url = hub
    server.ignore_range = True
    src = HttpByteSource(url, size=SIZE)
    with pytest.raises(CheckpointFormatError, match="ignored the HTTP Range request"):
        src.read(10, 100)
    assert src.bytes_read == 0
    (get,) = _gets(server)
    assert get.status == 200


def test_wrong_size_is_refused(hub):
    """Content-Range naming another total size means the file changed: refuse the bytes."""
    _, _, url = hub
    src = HttpByteSource(url, size=SIZE + 1)
    with pytest.raises(CheckpointFormatError, match="changed on the server"):
        src.read(0, 10)


def test_missing_file_raises_hub_error(hub):
    url = hf_hub_url("org/blob", "nope.bin")
    with pytest.raises(hf_errors.RemoteEntryNotFoundError):
        HttpByteSource(url)
    with pytest.raises(hf_errors.RemoteEntryNotFoundError):
        HttpByteSource(url, size=10).read(0, 4)


def test_offline_mode_blocks_requests(hub, monkeypatch):
    server, _, url = hub
    hub_server.go_offline(monkeypatch)
    with pytest.raises(hf_errors.OfflineModeIsEnabled):
        HttpByteSource(url, size=SIZE).read(0, 4)
    assert server.requests() == []
