"""What a name passed to :func:`pos_geometry.load` stands for: a local path (``NAME=PATH`` included), a row
of the model table, or a hub repo id not in it; and the argument checks every loader shares."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from pos_geometry._describe import describe
from pos_geometry.errors import InvalidArgumentError, UnknownModelError
from pos_geometry.registry import ModelSpec, find_spec, get_spec
from pos_geometry.sources.local import CHECKPOINT_SUFFIXES
from pos_geometry.sources.locations import parse_named_path

__all__ = ["Target", "check_args", "looks_like_repo_id", "resolve"]


def looks_like_repo_id(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 2 and all(parts) and not name.startswith((".", "/", "~"))


def looks_like_path(name: str) -> bool:
    """A name that can only mean a file or folder: absolute, relative, home-based, or with a checkpoint suffix."""
    return (
        name.startswith(("/", "./", "../", "~"))
        or name.count("/") > 1  # a repo id has exactly one
        or "\\" in name
        or Path(name).suffix.lower() in CHECKPOINT_SUFFIXES
    )


def check_args(name_or_path: object, **optional: object) -> None:
    """Each argument of :func:`load` has the type its docstring promises, or InvalidArgumentError."""
    if not isinstance(name_or_path, str | os.PathLike):
        raise InvalidArgumentError(
            f"name_or_path must be a model name, repo id or path (str or os.PathLike); got "
            f"{describe(name_or_path)} ({type(name_or_path).__name__})."
        )
    for arg, value in optional.items():
        kind = bool if arg == "offline" else int if arg == "n_positions" else str
        if value is None or (isinstance(value, kind) and (kind is bool or not isinstance(value, bool))):
            continue
        raise InvalidArgumentError(
            f"{arg} must be {'an' if kind is int else 'a'} {kind.__name__} or None; got {describe(value)} "
            f"({type(value).__name__})."
        )


@dataclass(frozen=True)
class Target:
    """What a name passed to :func:`load` stands for: a local ``path`` (for ``NAME=PATH`` with the
    row ``spec`` it stands for), a model-table ``spec``, or a hub ``repo_id`` not in the table."""

    path: Path | None = None
    spec: ModelSpec | None = None
    repo_id: str | None = None
    label: str | None = None  # NAME of NAME=PATH (the spec's name when it is in the model table)


def resolve(name: str) -> Target:
    """The one place a name becomes a path, a model-table row or a repo id (for every loader)."""
    try:
        path = Path(name).expanduser()
    except RuntimeError:  # "~user..." of no such user: not a path here
        path = Path(name)
    if path.exists():
        return Target(path=path)
    named = parse_named_path(name)
    if named is not None:  # NAME labels the file; a model-table NAME also brings its row's metadata
        return Target(path=named[1], spec=find_spec(named[0]), label=named[0])
    spec = find_spec(name)
    if spec is not None:
        return Target(spec=spec)
    if looks_like_path(name):
        raise UnknownModelError(
            f"{name!r} does not exist: there is no such file or folder. Check the path (it is read relative to "
            f"{os.getcwd()!r}); model-table names such as 'gpt2' and hub repo ids such as 'org/name' are not paths.",
            name=name,
        )
    if not looks_like_repo_id(name):
        get_spec(name)  # raises UnknownModelError with the closest known names
    return Target(repo_id=name)
