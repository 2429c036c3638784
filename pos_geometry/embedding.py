"""The one data type that travels through the pipeline.

:class:`PositionalEmbedding` is a matrix ``Float[Tensor, "n_positions d_model"]``
together with its :class:`Provenance`: where the numbers came from and every
processing step applied since. Analysis results carry the provenance forward,
so a figure can always say what it was computed on.
"""

from __future__ import annotations

import dataclasses
import io
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from pos_geometry._device import Device
from pos_geometry._dtypes import dtype_name
from pos_geometry._files import atomic_write
from pos_geometry.errors import CheckpointFormatError, InvalidArgumentError, NonFiniteError
from pos_geometry.provenance import KINDS, Kind, Provenance, readable_name

__all__ = ["Kind", "Provenance", "PositionalEmbedding", "TokenEmbedding", "KINDS", "readable_name"]

_PROVENANCE_KEY = "pos_geometry.provenance"
_DTYPE_KEY = "pos_geometry.dtype"


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

    def to(self, device: Device = None, dtype: torch.dtype | None = None) -> PositionalEmbedding:
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
