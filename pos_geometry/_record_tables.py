"""A tensor record that a loader has read becomes a checked table with its provenance.

:func:`to_table` refuses what is not a table of real vectors, and a ``dtype`` that cannot hold its values;
:func:`finish` checks the shape and the leading rows that are not positions and records where the matrix
came from (:class:`~pos_geometry.embedding.Provenance`); :func:`embedding_from_record` is the same for a
caller that read the tensor itself (a training sweep).
"""

from __future__ import annotations

import torch

from pos_geometry._describe import describe
from pos_geometry._device import Device, resolve_device
from pos_geometry.embedding import PositionalEmbedding, Provenance
from pos_geometry.errors import CheckpointFormatError, InvalidArgumentError
from pos_geometry.sources.tensor_record import TensorRecord, dtype_name

__all__ = ["check_dtype", "embedding_from_record", "finish", "to_table"]


def to_table(
    record: TensorRecord, device: torch.device, dtype: torch.dtype, row_offset: int = 0
) -> torch.Tensor:
    """The stored tensor in ``dtype`` on ``device``; refused when it is not real floating point
    (integers, bools and complex numbers are not a table of vectors: casting would silently drop
    the imaginary part or invent a float table) or when ``dtype`` cannot hold its values (a
    nonzero value that becomes 0, or a finite one that becomes infinite)."""
    stored = record.tensor[row_offset:] if row_offset else record.tensor
    where = f"the tensor {record.key!r} in {record.file!r}"
    if not stored.is_floating_point():
        raise CheckpointFormatError(
            f"{where} is stored as {dtype_name(stored.dtype)}; an embedding table must be real floating point "
            "(float16, bfloat16, float32, float64). It is refused rather than cast, which would "
            + ("drop its imaginary part." if stored.is_complex() else "invent a float table from integers.")
            + " Pass key= to pick another tensor, or convert the checkpoint."
        )
    out = stored.to(dtype=dtype)
    if out.dtype != stored.dtype:
        # float8 has no isfinite/comparison kernels on the CPU: compare through float32, which holds every float8
        ref = stored.to(torch.float32) if stored.dtype.itemsize == 1 else stored
        underflow = int(((out == 0) & (ref != 0)).sum())
        overflow = int((torch.isinf(out) & torch.isfinite(ref)).sum())
        if underflow or overflow:
            raise InvalidArgumentError(
                f"dtype={dtype} cannot hold {where} (stored as {dtype_name(stored.dtype)}): "
                f"{underflow} nonzero value(s) would become 0 and {overflow} finite value(s) would become "
                "infinite. Pass a wider dtype, e.g. dtype=torch.float64."
            )
    return out.to(device=device).contiguous()


def check_dtype(dtype: object) -> None:
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise InvalidArgumentError(
            "dtype must be a floating torch.dtype such as torch.float32; got "
            f"{dtype if isinstance(dtype, torch.dtype) else describe(dtype)}."
        )


def finish(
    record: TensorRecord,
    *,
    model_id: str,
    revision: str | None,
    row_offset: int,
    commit: str | None,
    device: torch.device,
    dtype: torch.dtype,
    source: str | None = None,
    tensor_key: str | None = None,
    original_dtype: str | None = None,
) -> PositionalEmbedding:
    matrix = record.tensor
    if matrix.ndim != 2:
        raise CheckpointFormatError(
            f"the positional tensor {record.key!r} in {record.file!r} has shape {tuple(matrix.shape)}; "
            "a positional table must be 2-D (n_positions, d_model)."
        )
    if row_offset and matrix.shape[0] <= row_offset:
        raise CheckpointFormatError(
            f"the positional tensor {record.key!r} has {matrix.shape[0]} rows but {row_offset} leading "
            "rows are not positions for this model; the checkpoint does not match its config."
        )
    if source is None:
        source = f"{record.file}::{record.key}" if record.key else record.file
        source += f" ({record.origin})" if record.origin else ""
    provenance = Provenance(
        model_id=model_id,
        kind="learned",
        source=source,
        revision=revision,
        tensor_key=tensor_key or record.key or None,
        original_dtype=original_dtype or record.dtype,
        row_offset=row_offset,
        commit=commit,
    )
    return PositionalEmbedding(to_table(record, device, dtype, row_offset), provenance)


def embedding_from_record(
    record: TensorRecord,
    *,
    model_id: str,
    revision: str | None,
    commit: str | None,
    row_offset: int = 0,
    device: Device = "cpu",
    dtype: torch.dtype = torch.float32,
) -> PositionalEmbedding:
    """The :class:`PositionalEmbedding` that :func:`load` makes of a tensor it has read: the same shape
    and dtype checks, dropped leading rows, finiteness check and provenance (for callers that read the
    tensor themselves, such as a training sweep)."""
    check_dtype(dtype)
    return finish(
        record, model_id=model_id, revision=revision, row_offset=row_offset, commit=commit,
        device=resolve_device(device), dtype=dtype,
    )  # fmt: skip
