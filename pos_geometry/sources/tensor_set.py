"""Several named tensors of one model checkpoint, read without building the model.

:func:`open_checkpoint` gives a :class:`Checkpoint`: the model's ``config.json`` and a :meth:`Checkpoint.read`
that returns exactly the tensors asked for, from the places :func:`pos_geometry.load` reads, as safely:

* a local Hugging Face model directory (``model.safetensors``, a shard index plus shards, or
  ``pytorch_model.bin``): only the headers and the wanted tensors' bytes are read;
* a hub repo id at one revision, pinned to ONE resolved commit for every file and tensor:
  pos_geometry's cache first (keyed by that commit), then weight files already in the HF cache,
  then HTTP range reads of the safetensors header and each wanted tensor (whole files are never
  downloaded); every tensor :meth:`Checkpoint.read` fetches is stored atomically in the cache, so
  a second read makes no request. Offline, only the caches are read.

:meth:`Checkpoint.visit_rows` hands a tensor's row ranges to a visitor one at a time (one streamed
request from the hub; memory holds one range); :meth:`Checkpoint.store_result` keeps what it computes.
Headers are parsed once per :class:`Checkpoint`. From a server that sends no version validator, every
read is checked against one answer holding all the bytes read (:mod:`pos_geometry.sources.reread`).
"""

from __future__ import annotations

import contextvars
import dataclasses
import math
import sys
import warnings
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch
from huggingface_hub import hf_hub_url

from pos_geometry.errors import (
    CheckpointFormatError,
    MissingTensorError,
    NotCachedError,
)
from pos_geometry.sources._deadline import timed
from pos_geometry.sources.byte_source import ByteSource, FileByteSource
from pos_geometry.sources.cache import (
    cache_dir,
    cached_path,
    cached_result,
    cached_tensor,
    store_result,
)
from pos_geometry.sources.hf_cache import hf_cached_file
from pos_geometry.sources.http import DEFAULT_READAHEAD, HttpByteSource
from pos_geometry.sources.hub import _model_info, _remember
from pos_geometry.sources.hub_errors import hub_errors
from pos_geometry.sources.metadata_files import metadata_file
from pos_geometry.sources.network import fetch_hint
from pos_geometry.sources.reread import check_one_version
from pos_geometry.sources.row_ranges import check_ranges, visit_ranges
from pos_geometry.sources.sharded import INDEX_SUFFIX, WEIGHT_FILES, parse_index
from pos_geometry.sources.tensor_record import TensorRecord, dtype_name
from pos_geometry.sources.weight_file import PiecewiseReads, WeightFile

__all__ = ["Checkpoint"]


@dataclasses.dataclass
class Checkpoint:
    """A model's config and lazy access to its tensors (see the module docstring).

    Attributes:
        config: the parsed ``config.json``.
        model_id: the name to record (model-table name, repo id, or the path).
        revision: the revision asked for (hub) or given as a label (local), or None.
        commit: the resolved commit (hub), else None.
        location: where the files are: a folder path, or ``"<repo>@<commit>"``.
    """

    config: dict[str, Any]
    model_id: str
    revision: str | None
    commit: str | None
    location: str
    _directory: Path | None = None
    _repo_id: str | None = None
    _files: tuple[str, ...] | None = None
    _offline: bool = False
    _why_offline: str | None = None
    _weight_map: dict[str, str] | None = None
    _opened: dict[str, WeightFile] = dataclasses.field(default_factory=dict)
    _cached: dict[str, WeightFile] = dataclasses.field(default_factory=dict)
    _warned_cache: bool = False
    _single: Any = None  # a file that is the whole checkpoint, config included (GGUF)

    # --- which file holds a key ---------------------------------------------------------------
    def _file_names(self) -> tuple[str, ...]:
        """The files of the model folder, or of the repo at the pinned commit (listed once, when first needed)."""
        if self._single is not None:
            return (self._single_name,)
        if self._directory is not None:
            return tuple(n for n in WEIGHT_FILES if (self._directory / n).is_file())
        if self._files is None:
            repo, commit = str(self._repo_id), str(self.commit)
            if self._offline:
                self._files = tuple(n for n in WEIGHT_FILES if hf_cached_file(repo, commit, n) is not None)
            else:
                self._files = _model_info(repo, commit)[1]
        return self._files

    @property
    def _single_name(self) -> str:
        return str(self._single.src.name)

    def _weight_file(self) -> str:
        if self._single is not None:
            return self._single_name
        names = self._file_names()
        present = [n for n in WEIGHT_FILES if n in names]
        if not present and self._offline:
            raise NotCachedError(
                f"{self._why_offline or 'Offline'}, and what was asked of {self.location} is not in pos_geometry's "
                f"cache, and none of its weight files ({', '.join(WEIGHT_FILES)}) is in the HF cache. "
                + fetch_hint(str(self._repo_id), "", self.commit)
            )
        if not present:
            raise CheckpointFormatError(
                f"{self.location} holds none of the weight files {', '.join(WEIGHT_FILES)}. "
                "Download the model's weights, or pass another revision."
            )
        return present[0]

    def _index(self) -> dict[str, str] | None:
        """The shard index's weight map, or None for a single weight file."""
        if self._weight_map is not None or not self._weight_file().endswith(INDEX_SUFFIX):
            return self._weight_map
        name = self._weight_file()
        data = self._fetch_small(name)
        weight_map = parse_index(data, f"{self.location}/{name}").get("weight_map")
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise CheckpointFormatError(f"{self.location}/{name} has no weight_map object; re-download it.")
        self._weight_map = weight_map
        return weight_map

    @timed
    def _fetch_small(self, name: str) -> bytes:
        if self._directory is not None:
            from pos_geometry._limits import check_regular_file

            check_regular_file(self._directory / name)
            return (self._directory / name).read_bytes()
        repo, commit = str(self._repo_id), str(self.commit)
        with hub_errors(repo, self.revision, name):
            path = metadata_file(repo, name, commit, offline=self._offline)
        return Path(path).read_bytes()

    @timed
    def _open(self, name: str) -> WeightFile:
        if self._single is not None and name == self._single_name:
            return self._single
        if name not in self._opened:
            if self._directory is not None:
                path = self._directory / name
                if not path.is_file():
                    raise CheckpointFormatError(
                        f"{str(path)!r} is named by the shard index but does not exist."
                    )
                src: ByteSource = FileByteSource(path)
            else:
                repo, commit = str(self._repo_id), str(self.commit)
                cached = hf_cached_file(repo, commit, name)
                if cached is not None:
                    src = FileByteSource(cached, name=f"{repo}@{commit[:10]}/{name} (HF cache)")
                elif self._offline:
                    raise NotCachedError(
                        f"{self._why_offline or 'Offline'}, and {name} of {self.location} is in neither the "
                        "pos_geometry cache nor the HF cache. " + fetch_hint(repo, name, commit)
                    )
                else:
                    url = hf_hub_url(repo, name, revision=commit)
                    with hub_errors(repo, self.revision, name):  # one GET: size, ETag, CDN location, header
                        src = PiecewiseReads(
                            HttpByteSource.open_first(
                                url, DEFAULT_READAHEAD, name=f"{repo}@{commit[:10]}/{name}"
                            )
                        )
            self._opened[name] = WeightFile(src)
        return self._opened[name]

    def _file_of(self, key: str) -> str:
        weight_map = self._index()
        if weight_map is None:
            return self._weight_file()
        if key not in weight_map:
            raise MissingTensorError(
                f"{self.location} has no tensor {key!r} (its shard index lists {len(weight_map)} keys).",
                keys=tuple(weight_map),
            )
        name = weight_map[key]
        if "/" in name or "\\" in name or name.startswith("."):
            raise CheckpointFormatError(
                f"{self.location}: the shard index names {name!r}, not a file beside it."
            )
        return name

    # --- public ---------------------------------------------------------------------------------
    def keys(self) -> tuple[str, ...]:
        """Every tensor key of the checkpoint (from the shard index, or the single file's header)."""
        weight_map = self._index()
        if weight_map is not None:
            return tuple(weight_map)
        return self._open(self._weight_file()).keys

    def has(self, key: str) -> bool:
        """Whether the checkpoint holds ``key`` (a GGUF file also answers to the transformers name of a tensor)."""
        if self.is_cached(key):
            return True
        weight_map = self._index()
        if weight_map is not None:
            return key in weight_map
        return self._open(self._weight_file()).has(key)

    def stored_type(self, key: str) -> str:
        """How ``key`` is stored: its dtype (``"bfloat16"``), or a GGUF quantisation type (``"Q4_1"``)."""
        opened = self._cache_entry(key) or self._located(key)[1]
        quantization = getattr(opened, "quantization", None)
        if quantization is not None:
            return quantization(key)
        span = opened.span(key)
        return dtype_name(span[0]) if span is not None else dtype_name(opened.read_rows(key, 0, 0).dtype)

    @property
    def _keeps_cache(self) -> bool:
        """Whether pos_geometry's cache serves and keeps this checkpoint's tensors and results: a hub
        checkpoint at a pinned commit, not a local folder, and not a GGUF file (its transformers key names
        would collide with those of the repo's other weight files at the same commit)."""
        return self._directory is None and self._single is None and self.commit is not None

    def stored_name(self, key: str) -> str:
        """``key`` as the file names it: a GGUF file's own tensor name (``blk.0.attn_q.weight``), else ``key``."""
        name = getattr(self._single, "gguf_name", None)
        return (name(key) or key) if callable(name) else key

    def knows_keys(self) -> bool:
        """Whether :meth:`has` can answer without a request: a local checkpoint, or a hub one whose weight file
        header has already been read."""
        return not self._keeps_cache or bool(self._opened)

    def _cache_entry(self, key: str) -> WeightFile | None:
        """pos_geometry's cache file of ``key`` at this commit, opened (when :attr:`_keeps_cache`), else None."""
        if not self._keeps_cache:
            return None
        if key not in self._cached:
            path = cached_path(str(self._repo_id), str(self.commit), key)
            if path is None:
                return None
            self._cached[key] = WeightFile(FileByteSource(path, name=f"{path} (pos_geometry cache)"))
        return self._cached[key]

    def is_cached(self, key: str) -> bool:
        """Whether ``key`` is in pos_geometry's cache for this commit (hub only; only its header is read)."""
        return self._cache_entry(key) is not None

    @property
    def bytes_read(self) -> int:
        """Bytes read from weight files through this checkpoint (headers and tensors; cache hits cost 0)."""
        opened = [*self._opened.values(), *([self._single] if self._single is not None else [])]
        return sum(o.src.bytes_read for o in opened)

    @timed
    def read(self, keys: Iterable[str]) -> dict[str, torch.Tensor]:
        """``{key: tensor}`` for each key, on CPU in the stored dtype and shape.

        Raises:
            MissingTensorError: a key is not in the checkpoint (the message lists what is).
            NotCachedError: offline and a tensor is in no local cache.
        """
        wanted = list(dict.fromkeys(keys))
        out: dict[str, torch.Tensor] = {}
        for key in wanted:
            if self.is_cached(key):
                hit = cached_tensor(str(self._repo_id), str(self.commit), key)
                if hit is not None:
                    out[key] = hit.tensor
                    continue
                del self._cached[key]
            name, opened = self._located(key)
            tensor = opened.read(key)
            check_one_version(opened.src)  # a server with no validator: one answer must hold every byte read
            out[key] = tensor
            if self._keeps_cache:
                record = TensorRecord(tensor, key, name, dtype_name(tensor.dtype), ())
                _remember(str(self._repo_id), self.revision or str(self.commit), str(self.commit), record)
        return out

    def _located(self, key: str) -> tuple[str, WeightFile]:
        """``(file name, opened file)`` of the weight file holding ``key``."""
        name = self._file_of(key)
        opened = self._open(name)
        if not opened.has(key):
            raise MissingTensorError(
                f"{self.location}/{name} has no tensor {key!r}; it has {len(opened.keys)} keys, e.g. "
                f"{', '.join(opened.keys[:8])}.",
                keys=opened.keys,
            )
        return name, opened

    def open_files(self, keys: Iterable[str], *, workers: int = 8) -> None:
        """Parse the headers of the weight files holding ``keys`` (those not in pos_geometry's cache), from
        the hub up to ``workers`` files at once (one GET each). Afterwards :meth:`visit_rows`,
        :meth:`shape` and :meth:`read` of these keys open nothing, so they may run in several threads."""
        names = [self._file_of(key) for key in dict.fromkeys(keys) if self._cache_entry(key) is None]
        names = [name for name in dict.fromkeys(names) if name not in self._opened]
        if self._directory is not None or len(names) < 2 or workers < 2:
            for name in names:
                self._open(name)
            return
        with ThreadPoolExecutor(min(workers, len(names)), thread_name_prefix="pos_geometry-open") as pool:
            # each in a copy of this context: the load's deadline applies there too
            jobs = [pool.submit(contextvars.copy_context().run, self._open, name) for name in names]
            for job in jobs:
                job.result()

    @timed
    def visit_rows(
        self, key: str, ranges: Sequence[tuple[int, int]], visit: Callable[[int, torch.Tensor], object]
    ) -> None:
        """Call ``visit(i, rows)`` for each row range ``i`` of ``ranges`` (``(start, stop)`` along the first
        dimension, increasing and not overlapping), in order. ``rows`` is ``(stop - start, *shape[1:])``
        in the stored dtype on the CPU: a view of one buffer reused for every range (copy what you
        keep), valid only during the call. Memory holds the longest range, whatever the tensor's size.

        Only the ranges' bytes are read from a local folder, the HF cache or pos_geometry's cache. From
        the hub (safetensors) the rows from the first range to the last arrive in ONE range request,
        copied into the buffer as the body streams in, and each range is visited as soon as it is
        complete; nothing is written to the tensor cache (:meth:`read` keeps what it fetches). A
        PyTorch zip tensor is read range by range (its stored view may be strided). After
        :meth:`open_files`, calls for different keys may run in several threads at once.

        Raises:
            InvalidArgumentError: the ranges break the rule above.
            MissingTensorError, NotCachedError: as :meth:`read`; RemoteError: the transfer failed.
        """
        opened = self._cache_entry(key) or self._located(key)[1]
        shape = opened.shape(key)
        checked = check_ranges(ranges, shape[0] if shape else 0, f"{key!r} {tuple(shape)}")
        if getattr(opened, "fmt", "") == "gguf":  # quantised rows: the tensor decoded once, in one read
            whole = opened.read(key)
            for i, (start, stop) in enumerate(checked):
                visit(i, whole[start:stop])
            return
        span = opened.span(key)
        if span is None or sys.byteorder != "little" or not checked:
            for i, (start, stop) in enumerate(checked):
                visit(i, opened.read_rows(key, start, stop))
            return
        dtype, _, offset = span
        longest = max(stop - start for start, stop in checked)
        buffer = torch.empty((longest, *shape[1:]), dtype=dtype)
        raw = memoryview(buffer.reshape(-1).view(torch.uint8).numpy())
        row_bytes = math.prod(shape[1:]) * dtype.itemsize

        def rows(i: int, _view: memoryview) -> None:
            start, stop = checked[i]
            visit(i, buffer[: stop - start])

        visit_ranges(opened.src, offset, row_bytes, checked, raw, rows)
        check_one_version(opened.src)

    def cached_result(self, name: str, spec: str) -> tuple[dict[str, torch.Tensor], dict[str, str]] | None:
        """A small result computed before from this hub commit (:func:`~pos_geometry.sources.cache.cached_result`);
        None for a local folder or when there is none with this ``spec``."""
        if not self._keeps_cache:
            return None
        return cached_result(str(self._repo_id), self.commit, name, spec)

    def store_result(
        self, name: str, tensors: dict[str, torch.Tensor], spec: str, meta: dict[str, str]
    ) -> None:
        """Keep a small result computed from this hub commit in pos_geometry's cache (nothing for a local
        folder; a cache that cannot be written only warns)."""
        if not self._keeps_cache:
            return
        try:
            store_result(str(self._repo_id), self.commit, name, tensors, spec, meta)
        except OSError as exc:
            if self._warned_cache:
                return
            self._warned_cache = True  # once per checkpoint, not once per result
            warnings.warn(
                f"pos_geometry could not write its cache under {cache_dir()} ({exc}); results such as {name!r} "
                "will be computed again next time. Set POS_GEOMETRY_CACHE to a writable directory.",
                RuntimeWarning,
                stacklevel=3,
            )

    def shape(self, key: str) -> tuple[int, ...]:
        """The stored shape of ``key`` (read from a header; no tensor bytes)."""
        cached = self._cache_entry(key)
        if cached is not None:
            return cached.shape(key)
        return self._located(key)[1].shape(key)
