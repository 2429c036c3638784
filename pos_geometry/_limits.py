"""Budgets checked before memory is asked for: a declared size, shape or context length from a file, a
config or a server never reaches the allocator unchecked.

Two limits, each raised through an environment variable for a job that needs more:

- :data:`MAX_ELEMENTS` elements in any one tensor pos_geometry allocates for a table or reads from a
  file (``POS_GEOMETRY_MAX_ELEMENTS``, default 2³⁰: 4 GiB of float32);
- :data:`MAX_POSITIONS` rows for the analyses that build a positions × positions matrix (the cosine
  similarities of ``periodicity``/``analyze``; ``POS_GEOMETRY_MAX_POSITIONS``, default 16384: a 2 GiB
  float64 matrix). A longer table is analysed through a ``window``;
- :data:`MAX_INFLATE` bytes inflated from one compressed member (``.npz`` from ``np.savez_compressed``;
  ``POS_GEOMETRY_MAX_INFLATE``, default 256 MiB), checked on the declared size before inflating.

A ``config.json`` is bounded in size (:data:`MAX_CONFIG_BYTES`) and nesting before it is used
(:func:`read_config_json`).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from pos_geometry.errors import InvalidArgumentError

__all__ = [
    "CONFIG_CAPS", "MAX_CONFIG_BYTES", "MAX_ELEMENTS", "check_config_int", "MAX_INFLATE", "MAX_POSITIONS", "check_elements", "check_inflate",
    "check_positions", "limit", "read_config_json", "MAX_CORPUS_BYTES", "check_regular_file", "MAX_VERIFY_BYTES",
    "MAX_METADATA_BYTES",
]  # fmt: skip

MAX_ELEMENTS = "POS_GEOMETRY_MAX_ELEMENTS"
MAX_POSITIONS = "POS_GEOMETRY_MAX_POSITIONS"
MAX_INFLATE = "POS_GEOMETRY_MAX_INFLATE"
MAX_CORPUS_BYTES = "POS_GEOMETRY_MAX_CORPUS_BYTES"
MAX_VERIFY_BYTES = "POS_GEOMETRY_MAX_VERIFY_BYTES"
MAX_METADATA_BYTES = "POS_GEOMETRY_MAX_METADATA_BYTES"
_DEFAULTS = {
    MAX_ELEMENTS: 2**30,
    MAX_POSITIONS: 16384,
    MAX_INFLATE: 256 * 2**20,
    MAX_CORPUS_BYTES: 64 * 2**20,
    # the bytes read again, in one request, to check a file whose server sends no version validator
    MAX_VERIFY_BYTES: 256 * 2**20,
    # a metadata file downloaded whole (config.json, a shard index, tokenizer files), bounded as it streams
    MAX_METADATA_BYTES: 64 * 2**20,
}


def limit(name: str) -> int:
    """The current value of the limit ``name`` (its environment variable, else the default)."""
    text = os.environ.get(name, "").strip()
    if not text:
        return _DEFAULTS[name]
    try:
        value = int(text)
    except ValueError:
        raise InvalidArgumentError(f"{name} must be a positive integer; got {text[:40]!r}.") from None
    if value < 1:
        raise InvalidArgumentError(f"{name} must be a positive integer; got {value}.")
    return value


def check_elements(what: str, shape: tuple[int, ...], fix: str = "") -> None:
    """Raise :class:`InvalidArgumentError` when a tensor of ``shape`` would exceed ``POS_GEOMETRY_MAX_ELEMENTS``."""
    count = math.prod(int(s) for s in shape)
    cap = limit(MAX_ELEMENTS)
    if count > cap:
        raise InvalidArgumentError(
            f"{what} would hold {count:,} elements (shape {tuple(int(s) for s in shape)}), over the limit of "
            f"{cap:,} set by {MAX_ELEMENTS}. {fix + ' ' if fix else ''}For a table you trust that really is this "
            f"large, raise the limit: {MAX_ELEMENTS}=<elements>."
        )


def check_inflate(what: str, n_bytes: int) -> None:
    """Raise :class:`InvalidArgumentError` when inflating ``n_bytes`` would exceed ``POS_GEOMETRY_MAX_INFLATE``."""
    cap = limit(MAX_INFLATE)
    if n_bytes > cap:
        raise InvalidArgumentError(
            f"{what} would inflate to {n_bytes:,} bytes, over the limit of {cap:,} set by {MAX_INFLATE}. Store the "
            f"table uncompressed (np.save / np.savez), or raise the limit: {MAX_INFLATE}=<bytes>."
        )


def check_positions(what: str, n_positions: int) -> None:
    """Raise :class:`InvalidArgumentError` when an analysis would build an ``n × n`` matrix over ``POS_GEOMETRY_MAX_POSITIONS``."""
    cap = limit(MAX_POSITIONS)
    if n_positions > cap:
        raise InvalidArgumentError(
            f"{what} builds a positions × positions matrix, and this window has {n_positions:,} positions, over the "
            f"limit of {cap:,} set by {MAX_POSITIONS} ({n_positions:,}² float64 values would need "
            f"{8 * n_positions**2 / 2**30:.1f} GiB). Pass a window of at most {cap:,} positions, e.g. "
            f"window=(0, {cap}), or raise the limit: {MAX_POSITIONS}=<positions>."
        )


def check_regular_file(path: str | os.PathLike[str], what: str = "") -> None:
    """Refuse anything but a regular file (a FIFO, a device or a socket would block a read, or never end):
    :class:`~pos_geometry.errors.CheckpointFormatError` naming the path and what it is. A missing path is left
    to the caller's own error."""
    import stat

    from pos_geometry.errors import CheckpointFormatError

    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return
    kind = (
        "a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
        else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file"
    )  # fmt: skip
    from pos_geometry._describe import printable

    raise CheckpointFormatError(
        f"{what or printable(os.fspath(path))} is {kind}; pos_geometry reads only regular files (a pipe or a device "
        "could block the read forever). Copy the data to a file and pass that."
    )


MAX_CONFIG_BYTES = 16 * 2**20
"""Largest ``config.json`` read (real configs are a few KB; a multimodal one under 100 KB)."""


def read_config_json(path: Path, where: str) -> dict:
    """A ``config.json`` as a dict: its size checked before it is read (:data:`MAX_CONFIG_BYTES`), deep nesting
    and malformed text refused as :class:`~pos_geometry.errors.CheckpointFormatError`, never a RecursionError; the
    values every path reads checked (:func:`~pos_geometry._config_values.check_config_values`)."""
    from pos_geometry.errors import CheckpointFormatError

    check_regular_file(path, where)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise CheckpointFormatError(
            f"{where} cannot be read ({exc}); re-download it or fix the file."
        ) from None
    if size > MAX_CONFIG_BYTES:
        raise CheckpointFormatError(
            f"{where} is {size:,} bytes, more than the {MAX_CONFIG_BYTES:,} a config.json can plausibly be; "
            "it is not a model config. Re-download it or fix the file."
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        raise CheckpointFormatError(
            f"{where} is not UTF-8 text ({str(exc)[:200]}); re-download it or fix the file."
        ) from None
    from pos_geometry._json import loads

    config = loads(text, where, fix="Re-download it or fix the file.")
    if not isinstance(config, dict):
        raise CheckpointFormatError(
            f"{where} must be a JSON object; got a {type(config).__name__}. Fix the file."
        )
    from pos_geometry._config_values import check_config_values

    check_config_values(config, where)
    return config


CONFIG_CAPS: dict[str, int] = {
    "head_dim": 2**16, "hidden_size": 2**20, "num_attention_heads": 2**16, "num_key_value_heads": 2**16,
    "num_hidden_layers": 2**16,
}  # fmt: skip
"""The largest value a config may give each field: far above any model (head_dim 256, 128 layers), far
below what would exhaust memory once multiplied out."""
_ALIASES = {"n_embd": "hidden_size", "d_model": "hidden_size", "n_head": "num_attention_heads",
            "n_layer": "num_hidden_layers", "num_layers": "num_hidden_layers"}  # fmt: skip


def check_config_int(name: str, value: int) -> int:
    """``value`` when it is at most :data:`CONFIG_CAPS` of ``name`` (or of the field it aliases), else
    :class:`InvalidArgumentError` naming the field, the value and the cap."""
    cap = CONFIG_CAPS.get(_ALIASES.get(name, name))
    if cap is not None and value > cap:
        raise InvalidArgumentError(
            f"config {name} is {value:,}, above {cap:,}: no model has so many, so the config is malformed (or "
            "hostile). Fix the config; pos_geometry refuses it before allocating anything from it."
        )
    return value
