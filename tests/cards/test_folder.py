"""A card folder holds one model's card or none: written whole and swapped in, one writer at a time, checked
before any work, and no temporary left behind."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pos_geometry.cards.folder import check_card_folder, hold_card_folder, write_card_folder
from pos_geometry.errors import InvalidArgumentError


def _files(model: str) -> dict[str, str]:
    return {"index.html": f"<p>{model}</p>", "card.json": f'{{"model": "{model}"}}', "card.md": f"# {model}"}


def _read(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in folder.iterdir()}


def _hidden(parent: Path) -> list[str]:
    return sorted(
        p.name for p in parent.iterdir() if p.name.startswith(".") and not p.name.endswith("card-lock")
    )


def test_a_second_card_replaces_the_first_whole(tmp_path):
    out = tmp_path / "card"
    write_card_folder(out, {**_files("a"), "card.png": b"png"})
    written = write_card_folder(out, _files("b"))
    assert [p.name for p in written] == ["index.html", "card.json", "card.md"]
    assert _read(out) == _files("b")  # not a's png beside b's page: the folder is one card
    assert _hidden(tmp_path) == []


def test_a_failed_write_leaves_the_earlier_card_and_names_the_real_file(tmp_path):
    out = tmp_path / "card"
    write_card_folder(out, _files("a"))

    def full_disk(folder: Path) -> None:
        (folder / "index.html").write_text("half")
        raise OSError(errno.ENOSPC, "No space left on device", str(folder / "plotly.min.js"))

    with pytest.raises(OSError) as caught:
        write_card_folder(out, {**_files("b"), "plotly.min.js": full_disk})
    assert caught.value.filename == str(out / "plotly.min.js")  # not the temporary folder's name
    assert _read(out) == _files("a") and _hidden(tmp_path) == []


def test_a_killed_writers_temporary_folder_is_removed_by_the_next_card(tmp_path):
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    stale = tmp_path / f".card.{int(dead.stdout)}-0123abcd.card"
    stale.mkdir()
    (stale / "index.html").write_text("half a card")
    other = tmp_path / f".other.{int(dead.stdout)}-0123abcd.card"  # another folder's: not touched
    other.mkdir()
    write_card_folder(tmp_path / "card", _files("a"))
    assert not stale.exists() and other.exists()


def test_a_folder_with_other_files_is_refused_and_left_alone(tmp_path):
    out = tmp_path / "notes"
    out.mkdir()
    (out / "thesis.tex").write_text("mine")
    (out / "card.json").write_text("{}")
    with pytest.raises(InvalidArgumentError, match=r"not a positional card's.*thesis\.tex"):
        write_card_folder(out, _files("a"))
    assert _read(out) == {"thesis.tex": "mine", "card.json": "{}"}
    (tmp_path / "file").write_text("x")
    with pytest.raises(InvalidArgumentError, match="is a file"):
        check_card_folder(tmp_path / "file")
    os.symlink(out, tmp_path / "link")
    with pytest.raises(InvalidArgumentError, match="symbolic link"):
        check_card_folder(tmp_path / "link")


def test_an_unwritable_place_is_refused_before_any_work():
    with pytest.raises(InvalidArgumentError, match="cannot be written"):
        check_card_folder("/proc/self/pos_geometry_card")


def test_tilde_is_the_home_folder_for_the_check_and_the_write(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert check_card_folder("~/cards/x") == tmp_path / "cards" / "x"
    write_card_folder("~/cards/x", _files("a"))
    assert _read(tmp_path / "cards" / "x") == _files("a") and not Path("~").exists()


def test_a_second_writer_is_refused_while_the_first_holds_the_folder(tmp_path):
    out = tmp_path / "card"
    holder = textwrap.dedent(f"""
        import sys, time
        from pos_geometry.cards.folder import hold_card_folder
        with hold_card_folder({str(out)!r}):
            print("held", flush=True)
            sys.stdin.readline()
    """)
    proc = subprocess.Popen(
        [sys.executable, "-c", holder], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(InvalidArgumentError, match="another process is writing a card"):
            write_card_folder(out, _files("b"))
        assert not out.exists()
    finally:
        proc.stdin.write("\n")
        proc.stdin.close()
        proc.wait(timeout=60)
    for _ in range(50):  # the lock is the kernel's: it is released with the holder's file descriptor
        try:
            write_card_folder(out, _files("b"))
            break
        except InvalidArgumentError:
            time.sleep(0.1)
    assert _read(out) == _files("b")


def test_the_lock_is_reentrant_within_a_process(tmp_path):
    with hold_card_folder(tmp_path / "card") as folder:
        write_card_folder(folder, _files("a"))
    assert _read(folder) == _files("a")


def test_only_card_files_are_written(tmp_path):
    with pytest.raises(InvalidArgumentError, match="holds only"):
        write_card_folder(tmp_path / "card", {"../escape.html": "x"})
    assert not (tmp_path / "card").exists() and not (tmp_path / "escape.html").exists()
