"""Where a table's numbers came from and what was done to them: :class:`Provenance`, carried by every
:class:`~pos_geometry.embedding.PositionalEmbedding` and every result computed from one.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pos_geometry._describe import describe
from pos_geometry._version import __version__
from pos_geometry.errors import CheckpointFormatError, InvalidArgumentError

__all__ = ["Kind", "KINDS", "Provenance", "readable_name", "shown_path"]

Kind = Literal["learned", "rotary", "sinusoidal", "hidden"]
KINDS: tuple[str, ...] = ("learned", "rotary", "sinusoidal", "hidden")


def _require(ok: bool, name: str, what: str, value: object) -> None:
    if not ok:
        raise InvalidArgumentError(
            f"Provenance.{name} must be {what}; got {describe(value)} ({type(value).__name__})."
        )


def _freeze(value: Any) -> Any:
    """Turn dicts/lists from JSON into hashable tuples (sorted for dicts)."""
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


_TABLE_SUFFIXES = frozenset({".npy", ".npz", ".safetensors", ".bin", ".pt", ".pth", ".ckpt"})
_GENERIC_STEM = re.compile(r"^(pytorch_model|model|weights|checkpoint)(-\d+-of-\d+)?$", re.IGNORECASE)
_HF_SNAPSHOT = re.compile(r"(?:^|/)models--([^/]+)--([^/]+)/snapshots/[^/]+$")


def readable_name(model_id: str) -> str:
    """A name fit for a title: the model id itself, unless it is a local path.

    A model-table name (``"gpt2"``) or hub repo id (``"EleutherAI/pythia-70m"``) is returned as is.
    A local file gives its name without the suffix (``"../data/gpt2_small_wpe.npy"`` ->
    ``"gpt2_small_wpe"``); a file with a generic name (``model.safetensors``,
    ``pytorch_model-00001-of-00002.bin``) or a folder gives the folder's name; a Hugging Face cache
    snapshot (``.../models--org--name/snapshots/<hash>``) gives ``"org/name"``.
    """
    text = model_id.replace("\\", "/")
    path = PurePosixPath(text)
    is_file = path.suffix.lower() in _TABLE_SUFFIXES
    local = is_file or text.startswith(("/", ".", "~")) or (len(path.parts) > 2) or Path(model_id).exists()
    if not local:
        return model_id
    if is_file and not _GENERIC_STEM.match(path.stem):
        return path.stem
    folder = path.parent if is_file else path
    snapshot = _HF_SNAPSHOT.search(str(folder))
    if snapshot:
        return f"{snapshot[1]}/{snapshot[2]}"
    name = (
        folder.name if folder.name not in ("", ".", "..") else Path(str(folder)).expanduser().resolve().name
    )
    return name or model_id


_ABSOLUTE = re.compile(r"(?<![\w.])(/[^\s:()'\"]+)")


def shown_path(text: str) -> str:
    """``text`` with each absolute path in it shown relative to the working directory when it lies at most
    two folders above it (``../shared/data/real/gpt2_small_wpe.npy`` from a checkout, ``../../shared/...``
    from its ``notebooks/``); other paths are kept. For display only: :attr:`Provenance.source` keeps the
    path as recorded."""
    try:
        cwd = os.getcwd()
    except OSError:
        return text

    def relative(match: re.Match[str]) -> str:
        path = match[1]
        try:
            rel = os.path.relpath(path, cwd)
        except ValueError:
            return path
        return rel if rel.split(os.sep).count("..") <= 2 else path

    return _ABSOLUTE.sub(relative, text)


@dataclass(frozen=True)
class Provenance:
    """Where a positional matrix came from and what was done to it.

    Attributes:
        model_id: the model-table name, hub repo id, or local path it was loaded from.
        revision: the revision asked for (``"main"``, ``"checkpoint-400"``, ``"step1000"``), or None.
        kind: ``"learned"``, ``"rotary"`` or ``"sinusoidal"`` for tables; ``"hidden"`` for the positional
            part of a layer's hidden states (:func:`pos_geometry.hidden_positions`), whose ``config``
            names the layer, hook point and corpus.
        source: a human-readable origin: ``"<file>::<tensor key>"`` for tensors read from a
            checkpoint, ``"config.json"`` or ``"model table"`` for analytic tables.
        tensor_key: the checkpoint key the matrix was read from (None for analytic tables).
        config: the config fields an analytic table was built from, as sorted ``(key, value)`` pairs.
        original_dtype: the dtype stored in the source (``"float16"``, ``"float32"``, ...).
        row_offset: leading rows of the stored table that are not positions and were dropped
            (2 for OPT).
        processing: every transformation applied since loading, in order
            (e.g. ``("center_d_model",)``, ``("rows[100:1024]",)``).
        commit: the resolved commit hash when the source was a hub repo, else None.
        package_version: the pos_geometry version that produced it.
    """

    model_id: str
    kind: Kind
    source: str
    revision: str | None = None
    tensor_key: str | None = None
    config: tuple[tuple[str, Any], ...] = ()
    original_dtype: str = "float32"
    row_offset: int = 0
    processing: tuple[str, ...] = ()
    commit: str | None = None
    package_version: str = __version__

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InvalidArgumentError(f"Provenance.kind must be one of {KINDS}; got {describe(self.kind)}.")
        for name in ("model_id", "source", "original_dtype", "package_version"):
            _require(isinstance(getattr(self, name), str), name, "a str", getattr(self, name))
        for name in ("revision", "tensor_key", "commit"):
            value = getattr(self, name)
            _require(value is None or isinstance(value, str), name, "a str or None", value)
        _require(
            isinstance(self.row_offset, int) and not isinstance(self.row_offset, bool) and self.row_offset >= 0,
            "row_offset", "an int >= 0", self.row_offset,
        )  # fmt: skip
        ok = isinstance(self.processing, list | tuple) and all(isinstance(p, str) for p in self.processing)
        _require(ok, "processing", "a sequence of str", self.processing)
        try:
            config = dict(self.config)
        except (TypeError, ValueError):
            config = None
        _require(config is not None, "config", "a mapping or (key, value) pairs", self.config)
        object.__setattr__(self, "config", _freeze(config))
        object.__setattr__(self, "processing", tuple(self.processing))

    def __repr__(self) -> str:
        """The set fields on one line, paths shown relative to the working directory (:func:`shown_path`)."""
        fields = [f"{self.label!r}", f"kind={self.kind!r}", f"source={shown_path(self.source)!r}"]
        for name in ("tensor_key", "commit"):
            if getattr(self, name) is not None:
                fields.append(f"{name}={getattr(self, name)!r}")
        fields.append(f"original_dtype={self.original_dtype!r}")
        if self.row_offset:
            fields.append(f"row_offset={self.row_offset}")
        fields.append(f"processing={list(self.processing)!r}")
        if self.config:
            fields.append(f"config: {len(self.config)} fields")
        return f"Provenance({', '.join(fields)})"

    def with_processing(self, *steps: str) -> Provenance:
        """Return a copy with ``steps`` appended to :attr:`processing`."""
        return dataclasses.replace(self, processing=self.processing + tuple(steps))

    @property
    def config_dict(self) -> dict[str, Any]:
        """The config fields as a plain dict."""
        return {k: v for k, v in self.config}

    @property
    def name(self) -> str:
        """The model's name for titles and legends: :attr:`model_id`, or for a local file loaded without
        a name, its file (or folder) name without the path (:func:`readable_name`); the path stays in
        :attr:`source` and :attr:`model_id`."""
        return readable_name(self.model_id)

    @property
    def label(self) -> str:
        """A short label for titles: ``model@revision``."""
        return self.model_id if not self.revision else f"{self.model_id}@{self.revision}"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; :meth:`from_dict` inverts it exactly."""
        out = dataclasses.asdict(self)
        out["config"] = self.config_dict
        out["processing"] = list(self.processing)
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Provenance:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise CheckpointFormatError(
                f"provenance has unknown fields {sorted(unknown)}; expected a subset of {sorted(known)}. "
                "Was it written by a newer pos_geometry? Upgrade the package."
            )
        return cls(**dict(data))

    @classmethod
    def from_json(cls, text: str) -> Provenance:
        from pos_geometry._json import loads

        return cls.from_dict(loads(text, "the provenance JSON", fix="Export the table again."))
