"""Reading positional (and token) embedding tables from checkpoints, lazily.

Only the bytes that are needed are read: a safetensors header and one tensor's range; a
PyTorch zip checkpoint's directory, ``data.pkl`` (unpickled by a restricted, inert
unpickler) and one storage slice; a ``.npy``/``.npz`` header and array. Several tensors of one
model (its query/key projections, read by role) come through :func:`open_checkpoint` / :func:`read_qk`.
"""

from pos_geometry.sources.byte_source import ByteSource, BytesSource, FileByteSource
from pos_geometry.sources.keys import POSITION_KEYS, TOKEN_KEYS, find_key, select_key
from pos_geometry.sources.local import FORMATS, detect_format, read_checkpoint_tensor, read_local
from pos_geometry.sources.opening import open_checkpoint
from pos_geometry.sources.roles import QKReader, QKWeights, open_qk, read_qk
from pos_geometry.sources.sharded import WEIGHT_FILES, shard_for
from pos_geometry.sources.tensor_record import TensorRecord, Which
from pos_geometry.sources.tensor_set import Checkpoint

__all__ = [
    "ByteSource",
    "BytesSource",
    "FileByteSource",
    "POSITION_KEYS",
    "TOKEN_KEYS",
    "find_key",
    "select_key",
    "FORMATS",
    "detect_format",
    "read_checkpoint_tensor",
    "read_local",
    "WEIGHT_FILES",
    "shard_for",
    "TensorRecord",
    "Which",
    "Checkpoint",
    "open_checkpoint",
    "QKReader",
    "QKWeights",
    "open_qk",
    "read_qk",
]
