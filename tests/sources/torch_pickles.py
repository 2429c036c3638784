"""Builders of hand-made PyTorch zip checkpoints, for tests (registered by conftest.py).

``Storage(key, numel, kind)`` stands for a storage while pickling (it becomes the persistent id
torch.save writes); ``Tensor(storage, offset, shape, stride)`` pickles as a call to
``torch._utils._rebuild_tensor_v2``. Any of their fields may be a hostile object. ``checkpoint``
pickles a state (protocol 2) into ``archive/data.pkl`` beside the given storage records;
``zip_members`` writes any members.
"""

from __future__ import annotations

import collections
import io
import pickle
import zipfile

import torch


class Storage:
    def __init__(self, key: object, numel: object, kind: object = torch.FloatStorage):
        self.key, self.numel, self.kind = key, numel, kind


class Tensor:
    def __init__(self, storage: object, offset: object, shape: object, stride: object):
        self.args = (storage, offset, shape, stride, False, collections.OrderedDict())

    def __reduce__(self):
        return (torch._utils._rebuild_tensor_v2, self.args)


class Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", obj.kind, obj.key, "cpu", obj.numel)
        return None


def dumps(state: object) -> bytes:
    """``state`` pickled (protocol 2), with :class:`Storage` objects as persistent ids."""
    buf = io.BytesIO()
    Pickler(buf, protocol=2).dump(state)
    return buf.getvalue()


def zip_members(
    members: dict[str, bytes], *, method: int = zipfile.ZIP_STORED, comment: bytes = b""
) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=method) as zf:
        zf.comment = comment
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def checkpoint(
    state: object,
    storages: dict[str, bytes],
    byteorder: bytes | None = b"little",
    *,
    pkl: bytes | None = None,
    **kw,
) -> bytes:
    """A torch-style zip whose data.pkl is ``pkl`` or exactly ``state`` pickled (protocol 2)."""
    members = {"archive/data.pkl": dumps(state) if pkl is None else pkl}
    if byteorder is not None:
        members["archive/byteorder"] = byteorder
    members.update({f"archive/data/{k}": v for k, v in storages.items()})
    return zip_members(members, **kw)
