"""The model whose hidden states are read: a name, a local checkpoint, or a model already in memory.

:func:`open_model` turns what the user passed into a :class:`LoadedModel`: the transformers module
in eval mode on its device, the list of its transformer blocks, and what provenance needs (model
id, revision, config fields). A model-table name (``"gpt2"``, ``"pythia-70m"``) resolves through
:mod:`pos_geometry.registry` to its hub repository and default revision; transformers then reads
it from the local Hugging Face cache (or the hub). Loading never executes checkpoint code
(``trust_remote_code`` stays off; transformers reads ``.bin`` files with ``weights_only``).

The blocks are found without naming any architecture: they are the ``nn.ModuleList`` whose
length is the config's number of layers (``transformer.h`` in GPT-2, ``model.layers`` in Llama,
``gpt_neox.layers`` in Pythia, ``encoder.layer`` in BERT).
"""

from __future__ import annotations

import contextlib
import os
import pickle
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pos_geometry.errors import InvalidArgumentError, NoLearnedTableError, NotApplicableError

__all__ = ["LoadedModel", "open_model", "positional_kind", "quiet_transformers"]


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers at error verbosity and without progress bars for the block, then as it was: its load
    report (ANSI-coloured), config warnings and download bars would otherwise land in our output."""
    from transformers.utils import logging as tlog

    level, bars = tlog.get_verbosity(), tlog.is_progress_bar_enabled()
    tlog.set_verbosity_error()
    tlog.disable_progress_bar()
    try:
        yield
    finally:
        tlog.set_verbosity(level)
        if bars:
            tlog.enable_progress_bar()


@dataclass(frozen=True, eq=False)
class LoadedModel:
    """A transformers model ready to run, and what its results' provenance records.

    Attributes:
        module: the ``torch.nn.Module`` (eval mode).
        blocks: the transformer blocks, in order (an ``nn.ModuleList``).
        blocks_path: the blocks' attribute path inside ``module`` (``"transformer.h"``).
        model_id: the name, path or ``name_or_path`` it came from.
        revision: the revision asked for (names), else None.
        config: the model's config as a plain dict.
        device: the device its parameters live on.
        tokenizer_source: where a tokenizer can be loaded from (a folder, repo id or ``.gguf`` file), or None.
    """

    module: Any
    blocks: Any
    blocks_path: str
    model_id: str
    revision: str | None
    config: dict[str, Any]
    device: Any
    tokenizer_source: str | None

    @property
    def n_layers(self) -> int:
        return len(self.blocks)

    @property
    def d_model(self) -> int:
        for key in ("hidden_size", "n_embd", "d_model"):
            if isinstance(self.config.get(key), int):
                return int(self.config[key])
        raise InvalidArgumentError(f"config of {self.model_id!r} has no hidden_size/n_embd/d_model.")

    @property
    def vocab_size(self) -> int:
        value = self.config.get("vocab_size")
        if not isinstance(value, int) or value < 1:
            raise InvalidArgumentError(
                f"config of {self.model_id!r} has no usable vocab_size (got {value!r})."
            )
        return value

    @property
    def context_length(self) -> int | None:
        for key in ("n_positions", "max_position_embeddings", "n_ctx", "seq_length"):
            value = self.config.get(key)
            if isinstance(value, int) and value > 0:
                return value
        return None

    @property
    def model_type(self) -> str:
        return str(self.config.get("model_type", ""))


def positional_kind(config: dict[str, Any]) -> str:
    """``"learned"``, ``"rotary"``, or ``"none"`` (ALiBi, relative biases, sinusoidal...): how position enters."""
    from pos_geometry.registry import kind_from_config

    try:
        return kind_from_config(config)
    except (NoLearnedTableError, InvalidArgumentError):
        return "none"


def _find_blocks(module: Any, n_layers: int | None) -> tuple[Any, str]:
    import torch

    candidates = [
        (name, child)
        for name, child in module.named_modules()
        if isinstance(child, torch.nn.ModuleList)
        and len(child) > 0
        and (n_layers is None or len(child) == n_layers)
    ]
    if not candidates:
        raise NotApplicableError(
            f"no list of {n_layers} transformer blocks was found in {type(module).__name__}; hidden states are read "
            "at the blocks' inputs and outputs. Pass a transformers decoder or encoder model."
        )
    name, blocks = min(candidates, key=lambda c: c[0].count("."))  # the outermost: a model's own blocks
    return blocks, name


def _config_dict(config: Any) -> dict[str, Any]:
    out = config.to_dict() if hasattr(config, "to_dict") else dict(config)
    if "model_type" not in out and getattr(config, "model_type", None):
        out["model_type"] = config.model_type
    return out


def _wrap(module: Any, model_id: str, revision: str | None, tokenizer_source: str | None) -> LoadedModel:
    config = _config_dict(module.config)
    if config.get("is_encoder_decoder"):
        raise NotApplicableError(
            f"{model_id!r} is an encoder-decoder model; hidden_positions reads one stack of blocks. "
            "Pass a decoder-only or encoder-only model."
        )
    n_layers = next(
        (config[k] for k in ("num_hidden_layers", "n_layer", "num_layers") if config.get(k)), None
    )
    blocks, path = _find_blocks(module, n_layers)
    _check_finite(module, model_id)
    module.eval()
    device = next(module.parameters()).device
    return LoadedModel(module, blocks, path, model_id, revision, config, device, tokenizer_source)


def _check_finite(module: Any, model_id: str) -> None:
    """Refuse a model whose weights hold NaN or inf: every number measured on it would be NaN or meaningless."""
    import torch

    from pos_geometry._describe import printable
    from pos_geometry.errors import NonFiniteError

    with torch.no_grad():
        for name, param in module.named_parameters():
            if param.is_floating_point() and not bool(torch.isfinite(param).all()):
                bad = int((~torch.isfinite(param)).sum())
                raise NonFiniteError(
                    f"{printable(model_id)}: the weight {name!r} holds {bad} NaN or infinite value(s) of "
                    f"{param.numel()}; a model with such weights cannot be measured. Check or re-export the checkpoint."
                )


def open_model(
    model: Any,
    *,
    device: str | Any = "auto",
    revision: str | None = None,
    causal_lm: bool = False,
) -> LoadedModel:
    """A :class:`LoadedModel` from a model-table name, a hub repo id, a local folder, or a loaded model.

    A ``.gguf`` file is dequantised to float32 by :func:`~pos_geometry.sources.gguf.model.gguf_model`
    (transformers' own GGUF loader where pos_geometry's fast path does not apply).
    A model already in memory (a ``transformers.PreTrainedModel``) stays where it is: ``device``
    must then be ``"auto"`` or its own device (pos_geometry never moves a model silently). Names and
    paths are loaded in float32 onto ``device`` (``"auto"``: CUDA, then MPS, else CPU).
    ``causal_lm``: load with the language-model head (``AutoModelForCausalLM``), which the loss needs;
    a model in memory must then have one.
    """
    from pos_geometry._device import resolve_device, same_device
    from pos_geometry.errors import DeviceMismatchError

    if hasattr(model, "config") and hasattr(model, "named_modules"):
        if causal_lm and getattr(model, "get_output_embeddings", lambda: None)() is None:
            raise NotApplicableError(
                f"{type(model).__name__} has no language-model head, so it has no next-token loss; load it with "
                "transformers.AutoModelForCausalLM (or pass its name or folder)."
            )
        loaded = _wrap(model, str(getattr(model, "name_or_path", "") or type(model).__name__), revision, None)
        if not (device is None or device == "auto") and not same_device(
            resolve_device(device), loaded.device
        ):
            raise DeviceMismatchError(
                f"the model lives on {loaded.device} but device={device!r} was asked; move it first "
                f"(model.to({str(resolve_device(device))!r})) or pass device='auto'."
            )
        source = getattr(model, "name_or_path", None)
        if source and Path(str(source)).is_dir():
            loaded = _wrap(model, str(source), revision, str(source))
        return loaded
    if not isinstance(model, str | os.PathLike):
        raise InvalidArgumentError(
            f"model must be a model-table name, a hub repo id, a local folder or a transformers model; "
            f"got {type(model).__name__}."
        )
    import transformers

    from pos_geometry.registry import check_revision, find_spec

    name = os.fspath(model)
    path = Path(name).expanduser()
    if path.is_file() and path.suffix.lower() == ".gguf":  # dequantised (pos_geometry.sources.gguf.model)
        from pos_geometry.sources.gguf.model import gguf_model

        module = gguf_model(path)
        module.to(resolve_device(device))
        return _wrap(module, str(path), None, str(path))  # the file holds its tokenizer too
    if path.is_file():
        raise InvalidArgumentError(
            f"{name!r} is a single {path.suffix or 'extensionless'} file: a table or some tensors at most, not a "
            "model that can run. Running needs the whole model: a transformers folder (config.json and every "
            "weight), a .gguf file, or a model name in the Hugging Face cache. pg.load reads a table from this file."
        )
    if path.exists():
        if not (path / "config.json").is_file():
            raise InvalidArgumentError(
                f"{name!r} is not a transformers model folder (it has no config.json); save one with "
                "model.save_pretrained(folder)."
            )
        from pos_geometry._limits import read_config_json

        read_config_json(
            path / "config.json", repr(str(path / "config.json"))
        )  # its values, before transformers
        repo, rev, model_id = str(path), None, str(path)
    else:
        spec = find_spec(name)
        if spec is not None:
            repo, rev, model_id = spec.repo_id, check_revision(spec, revision), spec.name
        elif name.count("/") == 1 and all(name.split("/")):
            repo, rev, model_id = name, revision, name
        else:
            raise InvalidArgumentError(
                f"{name!r} is neither an existing folder, a model-table name nor a hub repo id ('org/name')."
            )
    from huggingface_hub.errors import StrictDataclassError

    from pos_geometry.errors import CheckpointFormatError, NotCachedError
    from pos_geometry.sources.network import fetch_hint, offline_reason

    why = None if path.exists() else offline_reason()
    try:
        auto = transformers.AutoModelForCausalLM if causal_lm else transformers.AutoModel
        with quiet_transformers():
            module, info = auto.from_pretrained(
                repo,
                revision=rev,
                dtype="float32",
                output_loading_info=True,
                local_files_only=why is not None,
            )
    except OSError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if path.exists():
            raise CheckpointFormatError(f"transformers could not load the folder {name!r}: {first}") from None
        reason = f"{why}, and" if why else "transformers could not fetch it, and"
        raise NotCachedError(
            f"{reason} the model {name!r} ({repo}) is not in the Hugging Face cache; running it needs the whole "
            f"model. {fetch_hint(repo, '', rev)}"
        ) from None
    except pickle.UnpicklingError as exc:  # torch's weights_only unpickler refused a global: nothing ran
        from pos_geometry.errors import UnsafeCheckpointError

        raise UnsafeCheckpointError(
            f"{name!r} holds a PyTorch pickle (pytorch_model.bin) that asks to run code outside tensor storage; "
            f"torch refused to unpickle it, and nothing was executed ({str(exc).splitlines()[0][:200]}). It is not a "
            "safe checkpoint: convert it to safetensors in an environment you trust "
            "(model.save_pretrained(folder, safe_serialization=True)), or use the publisher's safetensors files."
        ) from None
    except (
        ValueError,
        RuntimeError,
        KeyError,
        TypeError,
        StrictDataclassError,
    ) as exc:  # a malformed config or state dict
        first = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
        raise CheckpointFormatError(
            f"transformers could not build {name!r} from its files ({type(exc).__name__}: {first}). Check its "
            "config.json and weights, or re-save the model with save_pretrained."
        ) from None
    _check_complete(module, info, name)
    module.to(resolve_device(device))
    return _wrap(module, model_id, rev, repo)


def _check_complete(module: Any, info: dict[str, Any], name: str) -> None:
    """Refuse a checkpoint that lacks weights the model needs: transformers would fill them with random
    initial values, and every number measured on it would be a number about noise."""
    from pos_geometry.errors import MissingTensorError

    tied = getattr(module, "_tied_weights_keys", None) or {}
    missing = sorted(set(info.get("missing_keys") or ()) - set(tied))
    if missing:
        shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
        raise MissingTensorError(
            f"{name!r} lacks {len(missing)} weight(s) the whole model needs ({shown}); transformers would fill them "
            "with random initial values. Running the model needs a complete checkpoint: a position table or a "
            "partial folder can be read by pg.load / position_qk_atlas, not run."
        )
