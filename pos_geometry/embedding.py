"""The one data type that travels through the pipeline.

:class:`PositionalEmbedding` is a matrix ``Float[Tensor, "n_positions d_model"]``
together with its :class:`Provenance`: where the numbers came from and every
processing step applied since. Analysis results carry the provenance forward,
so a figure can always say what it was computed on.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import numpy as np
import torch

from pos_geometry._describe import describe
from pos_geometry._dtypes import dtype_name
from pos_geometry._files import atomic_write
from pos_geometry._version import __version__
from pos_geometry.errors import CheckpointFormatError, InvalidArgumentError, NonFiniteError

__all__ = ["Kind", "Provenance", "PositionalEmbedding", "TokenEmbedding", "KINDS", "readable_name"]

Kind = Literal["learned", "rotary", "sinusoidal", "hidden"]
KINDS: tuple[str, ...] = ("learned", "rotary", "sinusoidal", "hidden")

_PROVENANCE_KEY = "pos_geometry.provenance"
_DTYPE_KEY = "pos_geometry.dtype"


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


@dataclass(frozen=True, eq=False)
class PositionalEmbedding:
    """A positional matrix ``(n_positions, d_model)`` and its provenance.

    Row ``p`` is the vector added (learned, sinusoidal) or the rotation angles' cos/sin
    (rotary) for position ``p``. The tensor may live on any device; analysis runs there.

    >>> import torch
    >>> from pos_geometry import PositionalEmbedding, Provenance
    >>> pe = PositionalEmbedding(torch.zeros(4, 2) + 1, Provenance("toy", "learned", "example"))
    >>> pe.shape
    (4, 2)
    """

    matrix: torch.Tensor
    provenance: Provenance
    check_finite: bool = field(default=True, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.provenance, Provenance):
            raise InvalidArgumentError(
                f"provenance must be a Provenance; got {type(self.provenance).__name__}."
            )
        m = self.matrix
        if isinstance(m, np.ndarray):
            try:
                m = torch.from_numpy(np.ascontiguousarray(m))
            except TypeError:  # longdouble, object, str...: dtypes torch has no tensor for
                raise InvalidArgumentError(
                    f"matrix has numpy dtype {m.dtype}, which torch cannot hold; convert it first, "
                    "e.g. matrix.astype(np.float64)."
                ) from None
            object.__setattr__(self, "matrix", m)
        if not isinstance(m, torch.Tensor):
            raise InvalidArgumentError(
                f"matrix must be a torch.Tensor or numpy array of shape (n_positions, d_model); "
                f"got {type(m).__name__}."
            )
        if m.ndim != 2 or m.shape[0] < 1 or m.shape[1] < 1:
            raise InvalidArgumentError(
                f"matrix must be 2-D (n_positions, d_model) with both sizes >= 1; got shape {tuple(m.shape)}."
            )
        if not m.is_floating_point():
            raise InvalidArgumentError(
                f"matrix must be floating point; got dtype {m.dtype}. Cast it with .float()."
            )
        finite = True
        if self.check_finite:
            # One min/max pass, no full-size temporaries (torch.isfinite allocates |m| and two
            # boolean masks of m's size): min and max propagate NaN, and +-inf is the min or the max.
            if m.dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
                lo, hi = torch.aminmax(m)
                finite = abs(lo.item()) < float("inf") and abs(hi.item()) < float("inf")
            else:  # float8 and other dtypes aminmax does not implement
                finite = bool(torch.isfinite(m).all())
        if not finite:
            bad = (~torch.isfinite(m)).nonzero()
            first = tuple(int(i) for i in bad[0])
            raise NonFiniteError(
                f"the positional table from {self.provenance.source!r} has {bad.shape[0]} NaN/inf "
                f"entries (first at row {first[0]}, column {first[1]}); a usable table must be finite. "
                "The checkpoint is probably corrupted: re-download it."
            )

    # --- shape and device -------------------------------------------------
    @property
    def shape(self) -> tuple[int, int]:
        return (int(self.matrix.shape[0]), int(self.matrix.shape[1]))

    @property
    def n_positions(self) -> int:
        return int(self.matrix.shape[0])

    @property
    def d_model(self) -> int:
        return int(self.matrix.shape[1])

    @property
    def kind(self) -> str:
        return self.provenance.kind

    @property
    def device(self) -> torch.device:
        return self.matrix.device

    @property
    def dtype(self) -> torch.dtype:
        return self.matrix.dtype

    def __len__(self) -> int:
        return self.n_positions

    def __repr__(self) -> str:
        p = self.provenance
        steps = ", ".join(p.processing) or "none"
        return (
            f"PositionalEmbedding({p.label}, kind={p.kind}, shape={self.shape}, "
            f"dtype={dtype_name(self.dtype)}, device={self.device}, processing={steps})"
        )

    def to(
        self, device: str | torch.device | None = None, dtype: torch.dtype | None = None
    ) -> PositionalEmbedding:
        """Return a copy on ``device`` and/or in ``dtype`` (provenance unchanged)."""
        from pos_geometry._device import resolve_device

        dev = resolve_device(device) if device is not None else None
        return dataclasses.replace(self, matrix=self.matrix.to(device=dev, dtype=dtype))

    def numpy(self) -> np.ndarray:
        """The matrix as a float numpy array on the CPU (bfloat16 becomes float32)."""
        m = self.matrix.detach().cpu()
        if m.dtype == torch.bfloat16:
            m = m.float()
        return m.numpy()

    # --- processing (each step is recorded) -------------------------------
    def rows(self, start: int | None = None, stop: int | None = None) -> PositionalEmbedding:
        """Keep positions ``start..stop-1`` (Python slice semantics), recorded as ``rows[a:b]``."""
        n = self.n_positions
        a, b, _ = slice(start, stop).indices(n)
        if b <= a:
            raise InvalidArgumentError(
                f"rows({start}, {stop}) selects no positions of a table with n_positions={n}; "
                "use 0 <= start < stop <= n_positions."
            )
        return PositionalEmbedding(
            self.matrix[a:b], self.provenance.with_processing(f"rows[{a}:{b}]"), check_finite=False
        )

    def center(self, over: Literal["positions", "d_model"] = "positions") -> PositionalEmbedding:
        """Subtract the mean over positions (each column centred), or over d_model (each row centred).

        ``over="d_model"`` is what TransformerLens's ``center_writing_weights`` does to ``W_pos``
        and is recorded as ``center_d_model``; ``over="positions"`` is recorded as ``center_positions``.
        """
        if over == "positions":
            m = self.matrix - self.matrix.mean(dim=0, keepdim=True)
        elif over == "d_model":
            m = self.matrix - self.matrix.mean(dim=1, keepdim=True)
        else:
            raise InvalidArgumentError(f"center(over=...) must be 'positions' or 'd_model'; got {over!r}.")
        return PositionalEmbedding(m, self.provenance.with_processing(f"center_{over}"), check_finite=False)

    # --- persistence --------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the matrix and provenance to ``.npz`` or ``.safetensors``, atomically.

        The dtype is kept exactly (bfloat16 is stored as float32 in ``.npz``, which is lossless,
        and cast back on :meth:`load`).
        """
        path = Path(path)
        suffix = path.suffix.lower()
        dtype = dtype_name(self.dtype)
        if suffix == ".safetensors":
            from safetensors.torch import save

            data = save(
                {"matrix": self.matrix.detach().cpu().contiguous()},
                metadata={_PROVENANCE_KEY: self.provenance.to_json(), _DTYPE_KEY: dtype},
            )
        elif suffix == ".npz":
            buffer = io.BytesIO()
            np.savez(
                buffer,
                matrix=self.numpy(),
                provenance=np.array(self.provenance.to_json()),
                dtype=np.array(dtype),
            )
            data = buffer.getvalue()
        else:
            raise InvalidArgumentError(
                f"save() writes '.npz' or '.safetensors' files; got suffix {suffix!r} in {str(path)!r}."
            )
        return atomic_write(path, data)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> PositionalEmbedding:
        """Read a file written by :meth:`save`; the result equals the original bit for bit."""
        path = Path(path)
        suffix = path.suffix.lower()
        try:
            if suffix == ".safetensors":
                from safetensors import safe_open

                with safe_open(str(path), framework="pt") as fh:
                    meta = fh.metadata() or {}
                    matrix = fh.get_tensor("matrix")
                prov_json = meta[_PROVENANCE_KEY]
            elif suffix == ".npz":
                with np.load(path, allow_pickle=False) as data:
                    matrix_np = data["matrix"]
                    prov_json = str(data["provenance"])
                    dtype = str(data["dtype"])
                matrix = torch.from_numpy(matrix_np).to(getattr(torch, dtype))
            else:
                raise InvalidArgumentError(
                    f"PositionalEmbedding.load reads '.npz' or '.safetensors'; got {str(path)!r}."
                )
        except (KeyError, OSError, ValueError, RuntimeError) as exc:
            if isinstance(exc, InvalidArgumentError | FileNotFoundError):
                raise
            raise CheckpointFormatError(
                f"{str(path)!r} is not a pos_geometry embedding file ({exc}); "
                "write one with PositionalEmbedding.save()."
            ) from None
        return cls(matrix, Provenance.from_json(prov_json))


@dataclass(frozen=True, eq=False)
class TokenEmbedding:
    """A token-embedding matrix ``(vocab, d_model)`` with the provenance of where it was read.

    It is not a positional table and is deliberately not a :class:`PositionalEmbedding`:
    it is the other operand of :func:`pos_geometry.subspace_overlap`.
    """

    matrix: torch.Tensor
    provenance: Provenance

    def __post_init__(self) -> None:
        if not isinstance(self.matrix, torch.Tensor) or self.matrix.ndim != 2:
            raise InvalidArgumentError(
                f"a token embedding must be a 2-D tensor (vocab, d_model); got "
                f"{getattr(self.matrix, 'shape', type(self.matrix).__name__)}."
            )

    @property
    def shape(self) -> tuple[int, int]:
        return (int(self.matrix.shape[0]), int(self.matrix.shape[1]))

    def numpy(self) -> np.ndarray:
        """The matrix as a float32 numpy array on the CPU."""
        return self.matrix.detach().cpu().float().numpy()

    def __repr__(self) -> str:
        return f"TokenEmbedding({self.provenance.label}, shape={self.shape}, dtype={dtype_name(self.matrix.dtype)})"
