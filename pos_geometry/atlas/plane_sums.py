"""The sums behind the rotary frequency atlas, computed head by head as the weights are read.

Every statistic of :mod:`pos_geometry.atlas.rotary` is a function of each rotation
plane's ``2 × 2`` Gram matrix, which needs only the squared norm of each rotating row and one dot
product per plane. So each head's rotating rows are reduced to those sums as soon as they are
read, and never kept: :func:`layer_sums` visits every q/k tensor of the chosen layers with
:meth:`~pos_geometry.sources.tensor_set.Checkpoint.visit_rows` (from the hub: one streamed range
request per tensor, several tensors at once, each head reduced while the rest of its tensor is
still arriving), one tensor per thread.

A hub tensor's sums are kept in pos_geometry's cache as a small result
(:meth:`~pos_geometry.sources.tensor_set.Checkpoint.store_result`, keyed by the commit, the
tensor, its row ranges, the rotation planes and the folded norm), so a second atlas of the same
commit reads no weight at all; the q/k tensors themselves are not copied into the cache.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import threading

import torch

from pos_geometry._dtypes import dtype_name
from pos_geometry._threads import check_stop, parallel_map
from pos_geometry.errors import NonFiniteError
from pos_geometry.sources.roles import QKReader

__all__ = ["LayerSums", "layer_sums", "fold_row_gains", "grams", "plane_grams"]

LayerSums = dict[str, tuple[torch.Tensor, torch.Tensor]]
"""``{"q": (norms, cross), "k": (norms, cross)}`` of one layer: per head (key heads for ``"k"``) the norm
of each rotating row ``(n, rotary_dim)`` and each plane's dot product of its two rows ``(n, n_planes)``,
float64."""


class _Workspace:
    """Buffers reused for every head one thread reduces: a loop over hundreds of heads then allocates
    nothing large (fresh multi-MiB blocks per head make glibc raise its mmap threshold and keep the
    freed blocks, which doubles the peak resident memory)."""

    def __init__(self) -> None:
        self._buffers: dict[tuple[str, tuple[int, ...], torch.device], torch.Tensor] = {}

    def buffer(self, name: str, shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
        """A float32 buffer of ``shape`` on ``device`` (the same one for the same name and shape)."""
        buf = self._buffers.get((name, shape, device))
        if buf is None:
            buf = self._buffers[(name, shape, device)] = torch.empty(
                shape, dtype=torch.float32, device=device
            )
        return buf


def _pair_rows(wide: torch.Tensor, planes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(first, second)``, each ``(n_planes, d_model)``: the rows of ``wide`` each plane turns. Views
    for the two pairings (rotate-half ``(i, i + n)``, interleaved ``(2i, 2i + 1)``), copies otherwise."""
    n = planes.shape[0]
    first, second = planes[:, 0], planes[:, 1]
    if torch.equal(first, torch.arange(n)) and torch.equal(second, torch.arange(n, 2 * n)):
        return wide[:n], wide[n : 2 * n]
    if torch.equal(first, torch.arange(0, 2 * n, 2)) and torch.equal(second, first + 1):
        pairs = wide[: 2 * n].view(n, 2, -1)
        return pairs[:, 0], pairs[:, 1]
    return wide[first], wide[second]


def _head_sums(
    rows: torch.Tensor,
    planes: torch.Tensor,
    gain: torch.Tensor | None,
    device: torch.device,
    work: _Workspace,
    norms: torch.Tensor,
    cross: torch.Tensor,
) -> None:
    """One head's sums: ``norms`` (``(len(rows),)`` float64) gets each row's norm, ``cross``
    (``(n_planes,)`` float64) each plane's dot product of its two rows.

    ``rows``: ``(≥ rotary_dim, d_model)`` the head's rows (any float dtype, CPU); ``planes`` index
    them. The rows are widened to float32 on ``device`` (bfloat16 and float16 exactly) into a reused
    buffer and the gain multiplied in; the sums accumulate in float32 (torch's blocked sums:
    relative error ~1e-7 for thousands of terms), a few kernels per head, none allocating. Where a
    float32 sum is not finite (a weight near 1e19 overflows its square), the head is summed again in
    float64; rows that hold NaN or inf raise :class:`NonFiniteRows`.
    """
    wide = work.buffer("wide", tuple(rows.shape), device)
    wide.copy_(rows)
    if gain is not None:
        wide.mul_(gain.to(device=device, dtype=torch.float32))
    first, second = _pair_rows(wide, planes)
    product = work.buffer("product", tuple(first.shape), device)
    n32 = work.buffer("norms", tuple(norms.shape), device)
    c32 = work.buffer("cross", tuple(cross.shape), device)
    torch.linalg.vector_norm(wide, dim=-1, out=n32)
    torch.sum(torch.mul(first, second, out=product), dim=-1, out=c32)
    if bool(torch.isfinite(n32).all()) and bool(torch.isfinite(c32).all()):
        norms.copy_(n32)
        cross.copy_(c32)
        return
    exact = rows.to(device=device, dtype=torch.float64)
    if gain is not None:
        exact = exact * gain.to(device=device, dtype=torch.float64)
    if not bool(torch.isfinite(exact).all()):
        raise NonFiniteRows(int((~torch.isfinite(exact)).sum()))
    a, b = _pair_rows(exact, planes)
    norms.copy_(torch.linalg.vector_norm(exact, dim=-1))
    cross.copy_((a * b).sum(-1))


class NonFiniteRows(ArithmeticError):
    """A head's rows (after the folded gain) hold NaN or inf; ``args[0]``: how many values."""


def _non_finite(what: str, count: int) -> NonFiniteError:
    return NonFiniteError(
        f"{what} holds {count} NaN or infinite value(s) in its rotating rows; the atlas of such weights would be "
        "NaN. Check or re-export the checkpoint."
    )


def grams(norms: torch.Tensor, cross: torch.Tensor, planes: torch.Tensor) -> torch.Tensor:
    """``(n_heads, n_planes, 2, 2)`` float64 (CPU) plane Gram matrices from the heads' row norms
    ``(n_heads, rows)`` and plane dot products ``(n_heads, n_planes)``."""
    squares = norms.to("cpu", torch.float64).square()
    dots = cross.to("cpu", torch.float64)
    aa, bb = squares[:, planes[:, 0]], squares[:, planes[:, 1]]
    return torch.stack((aa, dots, dots, bb), dim=-1).reshape(*dots.shape, 2, 2)


def plane_grams(
    w: torch.Tensor, planes: torch.Tensor, gain: torch.Tensor | None, device: torch.device | None = None
) -> torch.Tensor:
    """``(n, n_planes, 2, 2)`` float64 Gram matrices of each plane's two rows, for each of ``w``'s heads
    (``w``: ``(n, ≥ rotary_dim, d_model)`` in memory)."""
    where = device if device is not None else torch.device("cpu")
    return grams(*_tensor_sums(w, planes, gain, where, _Workspace(), "the weights given"), planes)


def _tensor_sums(
    w: torch.Tensor,
    planes: torch.Tensor,
    gain: torch.Tensor | None,
    device: torch.device,
    work: _Workspace,
    what: str,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(norms, cross)`` float64 of every head of ``w`` ``(n, ≥ rotary_dim, d_model)`` in memory
    (:func:`_head_sums`); NaN or inf is a :class:`NonFiniteError` naming head ``h`` of ``what``."""
    norms = torch.empty(w.shape[:2], dtype=torch.float64, device=device)
    cross = torch.empty(w.shape[0], planes.shape[0], dtype=torch.float64, device=device)
    for h in range(w.shape[0]):
        try:
            _head_sums(w[h], planes, gain, device, work, norms[h], cross[h])
        except NonFiniteRows as exc:
            raise _non_finite(f"head {h} of {what}", exc.args[0]) from None
    return norms, cross


def _spec(reader: QKReader, heads: tuple, ranges: tuple, norm_key: str | None) -> str:
    """What a tensor's sums depend on besides its bytes (the cache result's ``spec``)."""
    return json.dumps(
        {
            "sums": "rotary-plane-sums/1",
            "heads": heads,
            "ranges": ranges,
            "planes": reader.planes.tolist(),
            "norm": norm_key,
            "norm_offset": reader.layout.norm_offset if norm_key else None,
        },
        separators=(",", ":"),
    )


def layer_sums(
    reader: QKReader, layers: tuple[int, ...], fold_norm: bool, device: torch.device, workers: int
) -> tuple[list[LayerSums], list[str], str]:
    """``(sums, keys, stored dtype)``: the :data:`LayerSums` of each of ``layers`` (on ``device``), every
    checkpoint key they came from (per layer: the norm gain when ``fold_norm``, then q/k), and the dtype
    the projections are stored in.

    Each tensor's sums come from pos_geometry's cache when an earlier atlas of this commit left them;
    the others are computed by ``workers`` threads, one tensor each (:meth:`Checkpoint.visit_rows`:
    memory holds one head's rows per thread). If one tensor fails, the others stop at their next head
    and the first error is raised.
    """
    if reader.layout.latent is not None:
        return _latent_sums(reader, layers, fold_norm, device)
    ckpt = reader.checkpoint
    n_rot, n_planes = reader.rotary.rotary_dim, reader.planes.shape[0]
    keys: list[str] = []
    jobs: list[_Job] = []
    found: dict[tuple[int, str], tuple[torch.Tensor, torch.Tensor]] = {}
    stored = ""
    for index in layers:
        # cache names use the layout's spelling of a key, so a full hit reads nothing (not even a key list)
        norm = reader.layout.keys(index, norm=True).get("norm") if fold_norm else None
        if fold_norm and norm is None and reader.layout.q_norm_key is None:
            reader.norm_key(index)  # raises: the layout names no norm to fold
        for key, heads, ranges in reader.head_ranges(index):
            spec = _spec(reader, heads, ranges, norm)
            name = f"rotary-plane-sums/{key}/{hashlib.sha256(spec.encode()).hexdigest()[:16]}"
            hit = ckpt.cached_result(name, spec)
            if hit is not None and _fits(hit[0], len(ranges), n_rot, n_planes):
                found[(index, key)] = (hit[0]["norms"].to(device), hit[0]["cross"].to(device))
                stored = hit[1].get("stored_dtype", stored)
                read = [hit[1].get("norm_key", ""), hit[1].get("key", key)]
            else:
                job = _Job(index, key, reader.spelled(key), heads, ranges, spec, name)
                job.norm_key = reader.norm_key(index) if norm is not None else None
                jobs.append(job)
                read = [job.norm_key or "", job.spelled]
            keys += [k for k in read if k and k not in keys]
    if jobs:
        stored = _compute(reader, jobs, found, device, workers) or stored
    sums = [_assemble(reader, index, found) for index in layers]
    if fold_norm and reader.layout.q_norm_key is not None:
        for index, layer in zip(layers, sums, strict=True):
            for which in ("q", "k"):
                gain, key = reader.qk_norm_gain(index, which)
                layer[which] = fold_row_gains(*layer[which], gain.to(device), reader.planes)
                keys.append(key)
    return sums, keys, stored


def _latent_sums(
    reader: QKReader, layers: tuple[int, ...], fold_norm: bool, device: torch.device
) -> tuple[list[LayerSums], list[str], str]:
    """:func:`layer_sums` of a multi-head latent attention model: each layer's rotary query rows (products of
    its low-rank projections) and its one shared rotary key, formed in memory
    (:func:`~pos_geometry.registry.latent_layout.latent_rows`), then reduced like any head's rows. Nothing
    is kept in the cache: the products need the whole low-rank tensors."""
    from pos_geometry.registry.latent_layout import latent_rows

    keys: list[str] = []
    stored: list[str] = []

    def read(key: str) -> torch.Tensor:
        spelled = reader.spelled(key)
        tensor = reader.checkpoint.read([spelled])[spelled]
        stored.append(dtype_name(tensor.dtype))
        keys.append(spelled)
        return tensor

    out: list[LayerSums] = []
    work = _Workspace()
    for index in layers:
        check_stop()
        gain = None
        if fold_norm:
            gain, gain_key = reader.gain(index)
            keys.append(gain_key)
        q, k, _ = latent_rows(reader.layout.latent, read, index, reader.n_heads)
        out.append({
            which: _tensor_sums(rows, reader.planes, gain, device, work, f"layer {index}'s latent {role}")
            for which, role, rows in (("q", "queries", q), ("k", "rotary key", k))
        })  # fmt: skip
    return out, list(dict.fromkeys(keys)), stored[0] if stored else ""


def fold_row_gains(
    norms: torch.Tensor, cross: torch.Tensor, gain: torch.Tensor, planes: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The sums of rows each multiplied by its gain (a q/k norm's): ``norms`` ``(n, rows)`` times ``|g|``,
    each plane's ``cross`` ``(n, n_planes)`` times the product of its two rows' gains; ``gain`` is
    ``(n, rows)``. Exact: a row gain scales the plane's Gram matrix as ``diag(g) G diag(g)``."""
    return norms * gain.abs(), cross * gain[:, planes[:, 0]] * gain[:, planes[:, 1]]


@dataclasses.dataclass
class _Job:
    """One tensor to read and reduce: ``key`` as the layout names it, ``spelled`` as the checkpoint does."""

    index: int
    key: str
    spelled: str
    heads: tuple[tuple[str, int], ...]
    ranges: tuple[tuple[int, int], ...]
    spec: str
    name: str
    norm_key: str | None = None


def _compute(
    reader: QKReader,
    jobs: list[_Job],
    found: dict[tuple[int, str], tuple[torch.Tensor, torch.Tensor]],
    device: torch.device,
    workers: int,
) -> str:
    """Compute the sums of each job's tensor into ``found`` (``workers`` threads, one tensor each) and keep
    them in the cache; returns the stored dtype of the projections."""
    ckpt = reader.checkpoint
    n_rot, n_planes = reader.rotary.rotary_dim, reader.planes.shape[0]
    ckpt.open_files([job.spelled for job in jobs] + [job.norm_key for job in jobs if job.norm_key])
    for job in jobs:
        for which in ("q", "k"):
            if reader.key(job.index, which) == job.spelled:
                reader.check(job.index, which)
    local = threading.local()
    needed = list(dict.fromkeys(job.index for job in jobs if job.norm_key))
    # the norm gains: small reads, concurrent (each item runs in a copy of the caller's context, so the
    # load's deadline applies there too)
    gains = dict(zip(needed, (g[0] for g in parallel_map(reader.gain, needed, workers)), strict=True))

    bad: dict[int, NonFiniteError] = {}  # job position -> its first non-finite head

    def run(position: int) -> str:
        job = jobs[position]
        work = local.__dict__.setdefault("work", _Workspace())
        norms = torch.empty(len(job.ranges), n_rot, dtype=torch.float64, device=device)
        cross = torch.empty(len(job.ranges), n_planes, dtype=torch.float64, device=device)
        gain, dtypes = gains.get(job.index), []

        def visit(i: int, rows: torch.Tensor) -> None:
            check_stop()  # another tensor failed, or Ctrl-C: stop at the next head
            dtypes.append(rows.dtype)
            try:
                _head_sums(rows, reader.planes, gain, device, work, norms[i], cross[i])
            except NonFiniteRows as exc:  # kept, not raised: every tensor is read, the first bad one reported
                norms[i], cross[i] = math.nan, math.nan
                if position not in bad:
                    which, head = job.heads[i]
                    stored = reader.checkpoint.stored_name(job.spelled)
                    named = f"{job.spelled!r}" + (f" (stored as {stored!r})" if stored != job.spelled else "")
                    bad[position] = _non_finite(
                        f"{named} (layer {job.index}, {'query' if which == 'q' else 'key'} head {head})",
                        exc.args[0],
                    )

        check_stop()
        ckpt.visit_rows(job.spelled, job.ranges, visit)
        kind = dtype_name(dtypes[0])
        if position not in bad:  # NaN sums are never kept
            meta = {"stored_dtype": kind, "key": job.spelled, "norm_key": job.norm_key or ""}
            ckpt.store_result(job.name, {"norms": norms, "cross": cross}, job.spec, meta)
        found[(job.index, job.key)] = (norms, cross)
        return kind

    # one tensor per thread; a failure stops the others at their next head and is raised here. Non-finite
    # weights are reported after every tensor is read, for the first tensor in layer order (whatever the
    # threads' timing), so the same checkpoint always gives the same message.
    seen = parallel_map(run, list(range(len(jobs))), max(1, min(workers, len(jobs))))
    if bad:
        raise bad[min(bad)]
    return seen[0] if seen else ""


def _fits(tensors: dict[str, torch.Tensor], n: int, n_rot: int, n_planes: int) -> bool:
    norms, cross = tensors.get("norms"), tensors.get("cross")
    return (
        norms is not None
        and cross is not None
        and tuple(norms.shape) == (n, n_rot)
        and tuple(cross.shape) == (n, n_planes)
    )


def _assemble(reader: QKReader, index: int, found: dict) -> LayerSums:
    """Layer ``index``'s sums per projection, from the sums of the tensors that hold its heads."""
    out: LayerSums = {}
    n_rot, n_planes = reader.rotary.rotary_dim, reader.planes.shape[0]
    for which, n in (("q", reader.n_heads), ("k", reader.n_kv_heads)):
        norms = cross = None
        for key, heads, _ in reader.head_ranges(index):
            got_norms, got_cross = found[(index, key)]
            if norms is None:
                norms = got_norms.new_empty(n, n_rot)
                cross = got_cross.new_empty(n, n_planes)
            for i, (kind, head) in enumerate(heads):
                if kind == which:
                    norms[head], cross[head] = got_norms[i], got_cross[i]
        out[which] = (norms, cross)
    return out
