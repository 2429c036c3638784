"""Names never become paths (hostile inputs, class 1): revisions, repo file names, planted links in the cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

import pos_geometry as pg
from pos_geometry._names import check_file_name, check_revision_name
from pos_geometry.errors import InvalidArgumentError
from pos_geometry.sources import cache
from pos_geometry.sources.hf_cache import hf_cached_file, hf_cached_ref
from pos_geometry.sources.tensor_record import TensorRecord

COMMIT = "a" * 40
HOSTILE_REVISIONS = [
    "../../../../outside/x", "..", "a/../b", "/etc/passwd", "refs/../../x", "a b", "a\x00b", "a\\b", "x~1",
    "-rf", ".hidden", "a/.b", "a//b", "main.lock", "a@{1}", "x" * 256, "\x1b[31mred",
]  # fmt: skip


@pytest.mark.parametrize("revision", ["main", "v1.0", "checkpoint-400", "step1000", "refs/pr/1", COMMIT])
def test_valid_revisions_pass(revision: str) -> None:
    assert check_revision_name(revision) == revision


@pytest.mark.parametrize("revision", HOSTILE_REVISIONS)
def test_hostile_revisions_are_refused_with_the_rule(revision: str) -> None:
    with pytest.raises(InvalidArgumentError, match="not a valid git reference name") as info:
        check_revision_name(revision)
    assert "\x1b" not in str(info.value) and len(str(info.value)) < 600


@pytest.mark.parametrize("name", ["../x", "a/../../b", "/abs", "a\\b", "", "a//b", "a/./b", "x\x00"])
def test_hostile_file_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidArgumentError, match="not a relative path inside a repo"):
        check_file_name(name)
    with pytest.raises(InvalidArgumentError):
        hf_cached_file("openai-community/gpt2", COMMIT, name)


def _outside_ref(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An HF cache under tmp_path, and a file outside it that a ``../`` revision would read as a ref."""
    from huggingface_hub import constants

    hub = tmp_path / "hf" / "hub"
    (hub / "models--openai-community--gpt2" / "refs").mkdir(parents=True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hub))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x").write_text(COMMIT)
    return outside


def test_a_revision_cannot_read_outside_the_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _outside_ref(tmp_path, monkeypatch)
    monkeypatch.setenv("POS_GEOMETRY_CACHE", str(tmp_path / "pg"))
    traversal = "../../../../outside/x"
    assert (tmp_path / "hf/hub/models--openai-community--gpt2/refs" / traversal).resolve().is_file()
    with pytest.raises(InvalidArgumentError, match="not a valid git reference name"):
        hf_cached_ref("openai-community/gpt2", traversal)
    with pytest.raises(InvalidArgumentError):
        pg.load("openai-community/gpt2", revision=traversal, offline=True)
    with pytest.raises(InvalidArgumentError):
        pg.load("gpt2", revision=traversal)


def test_info_refuses_a_traversal_revision_without_an_internal_error() -> None:
    from pos_geometry.cli import app

    result = CliRunner().invoke(app, ["info", "gpt2", "--revision", "../.."])
    assert result.exit_code != 0 and "not a valid git reference name" in result.output
    assert "Traceback" not in result.output


def test_a_planted_directory_link_does_not_redirect_cache_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "pg"
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "hub").mkdir(parents=True)
    os.symlink(outside, root / "hub" / "openai-community--gpt2", target_is_directory=True)
    monkeypatch.setenv("POS_GEOMETRY_CACHE", str(root))
    record = TensorRecord(torch.zeros(2, 2), "wpe.weight", "model.safetensors", "float32", ("wpe.weight",))
    with pytest.raises(InvalidArgumentError, match="outside"):
        cache.store_tensor("openai-community/gpt2", COMMIT, record)
    with pytest.raises(InvalidArgumentError, match="outside"):
        cache.store_ref("openai-community/gpt2", "main", COMMIT)
    assert not any(outside.rglob("*"))  # nothing was written through the link
