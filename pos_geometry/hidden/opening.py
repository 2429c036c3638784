"""Opening a model once: a name, a local checkpoint, a ``.gguf`` file, or a model already in memory.

:func:`open_model` turns what the user passed into a :class:`~pos_geometry.hidden.model.LoadedModel`. A
model-table name (``"gpt2"``, ``"pythia-70m"``) resolves through :mod:`pos_geometry.registry` to its hub
repository and default revision; transformers then reads it from the local Hugging Face cache (or the
hub). Loading never executes checkpoint code (``trust_remote_code`` stays off; transformers reads ``.bin``
files with ``weights_only``). Every analysis that runs a model takes an opened model in place of the model
and loads nothing again, so a card opens and dequantises its model once.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

from pos_geometry._device import Device
from pos_geometry.errors import InvalidArgumentError, NotApplicableError
from pos_geometry.hidden.model import LoadedModel, _config_dict, _wrap, quiet_transformers

__all__ = ["open_model", "refuse_next_token_loss"]


def refuse_next_token_loss(config: dict[str, Any], model_id: str) -> None:
    """Refuse a next-token loss on a model that attends both ways (the token it would predict is in view)."""
    from pos_geometry.registry.direction import attention_direction

    direction = attention_direction(config)
    if not direction.causal:
        raise NotApplicableError(
            f"a next-token loss does not apply to {model_id}: it attends in both directions "
            f"({direction.reason}), so every position sees the token it would predict. Its objective is a "
            "masked-token loss, which positional edits are not measured with here; hidden_positions (hidden "
            "states and attention by offset) reads it."
        )


def _check_device(device: Any, lives_on: Any, fix: str) -> None:
    """Refuse a ``device`` other than ``"auto"``/None that is not where the model already lives (pos_geometry
    never moves a model silently); ``fix`` says how to get it there."""
    from pos_geometry._device import resolve_device, same_device
    from pos_geometry.errors import DeviceMismatchError

    if not (device is None or device == "auto") and not same_device(resolve_device(device), lives_on):
        raise DeviceMismatchError(
            f"the model lives on {lives_on} but device={device!r} was asked; {fix} or pass device='auto'."
        )


def _reuse(opened: LoadedModel, device: Any, revision: str | None, causal_lm: bool | None) -> LoadedModel:
    """An already opened model, checked against what the caller asks of it (nothing is loaded again)."""
    if revision is not None and revision != opened.revision:
        raise InvalidArgumentError(
            f"the model was opened at revision {opened.revision!r}, but revision={revision!r} was asked; open "
            "that revision with pg.open_model(..., revision=...) or leave revision out."
        )
    _check_device(device, opened.device, f"open it there (pg.open_model(..., device={device!r}))")
    if causal_lm:
        refuse_next_token_loss(opened.config, opened.model_id)
        if getattr(opened.module, "get_output_embeddings", lambda: None)() is None:
            raise NotApplicableError(
                f"{opened.model_id} was opened without a language-model head, so it has no next-token loss "
                "(its checkpoint holds none); open a checkpoint that has one."
            )
    return opened


def _config_first(repo: str, revision: str | None, local: bool) -> tuple[dict[str, Any] | None, bool]:
    """``(config, has_head)``: the model's config as transformers reads it, before any weight (None when it
    cannot be read here: the load itself then says why), and whether transformers builds a causal LM for it."""
    import transformers

    try:
        with quiet_transformers():
            config = transformers.AutoConfig.from_pretrained(repo, revision=revision, local_files_only=local)
    except Exception:  # the weights' load reports the problem with its own typed error
        return None, False
    return _config_dict(config), type(config) in transformers.MODEL_FOR_CAUSAL_LM_MAPPING


def open_model(
    model: Any,
    *,
    device: Device = "auto",
    revision: str | None = None,
    causal_lm: bool | None = None,
) -> LoadedModel:
    """A model opened once: the weights loaded, the config and its description resolved; every analysis
    that runs a model (:func:`~pos_geometry.hidden_positions`, :func:`~pos_geometry.attention_by_offset`,
    :func:`~pos_geometry.intervene`, :func:`~pos_geometry.intervene_sweep`, :func:`~pos_geometry.rotary_atlas`,
    :func:`~pos_geometry.cards.card`) takes the result in place of the model and loads nothing again.

    ``model``: a model-table name, a hub repo id, a local folder, a ``.gguf`` file, a loaded transformers model,
    or an opened model (returned as it is, checked against ``device``, ``revision`` and ``causal_lm``).

    A ``.gguf`` file is dequantised to float32 by :func:`~pos_geometry.sources.gguf.model.gguf_model`
    (transformers' own GGUF loader where pos_geometry's fast path does not apply).
    A model already in memory (a ``transformers.PreTrainedModel``) stays where it is: ``device``
    must then be ``"auto"`` or its own device (pos_geometry never moves a model silently). Names and
    paths are loaded in float32 onto ``device`` (``"auto"``: CUDA, then MPS, else CPU).
    ``causal_lm``: load with the language-model head (``AutoModelForCausalLM``), which the loss needs (a
    model that attends both ways is refused before its weights are read, and a model in memory must have
    one); False: the bare model (``AutoModel``); None (the default): with its head when the model is a
    causal decoder transformers builds one for, else bare (an encoder).
    """
    from pos_geometry._device import resolve_device

    if isinstance(model, LoadedModel):
        return _reuse(model, device, revision, causal_lm)
    if hasattr(model, "config") and hasattr(model, "named_modules"):
        if causal_lm and getattr(model, "get_output_embeddings", lambda: None)() is None:
            raise NotApplicableError(
                f"{type(model).__name__} has no language-model head, so it has no next-token loss; load it with "
                "transformers.AutoModelForCausalLM (or pass its name or folder)."
            )
        loaded = _wrap(model, str(getattr(model, "name_or_path", "") or type(model).__name__), revision, None)
        if not (device is None or device == "auto"):
            _check_device(device, loaded.device, f"move it first (model.to({str(resolve_device(device))!r}))")
        source = getattr(model, "name_or_path", None)
        if source and Path(str(source)).is_dir():
            loaded = _wrap(model, str(source), revision, str(source), str(source))
        return loaded
    if not isinstance(model, str | os.PathLike):
        raise InvalidArgumentError(
            f"model must be a model-table name, a hub repo id, a local folder, a .gguf file, a transformers model "
            f"or a model opened by pg.open_model; "
            f"got {type(model).__name__}."
        )

    from pos_geometry.registry import check_revision, find_spec

    name = os.fspath(model)
    path = Path(name).expanduser()
    if path.is_file() and path.suffix.lower() == ".gguf":  # dequantised (pos_geometry.sources.gguf.model)
        from pos_geometry.sources.gguf.model import gguf_model

        if causal_lm:  # refused from the header, before the weights are dequantised
            from pos_geometry.sources.opening import open_checkpoint

            refuse_next_token_loss(open_checkpoint(path).config, str(path))
        module = gguf_model(path)
        module.to(resolve_device(device))
        return _wrap(module, str(path), None, str(path), name)  # the file holds its tokenizer too
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
    from pos_geometry.errors import MissingTensorError
    from pos_geometry.sources.network import offline_reason

    why = None if path.exists() else offline_reason()
    head = causal_lm
    if causal_lm is not False:
        from pos_geometry.registry.direction import attention_direction

        config, has_head = _config_first(repo, rev, why is not None)
        if causal_lm is None:  # with the next-token head where the model is a decoder that has one
            head = config is not None and has_head and attention_direction(config).causal
        elif config is not None:
            refuse_next_token_loss(config, model_id)  # before the weights are read
    try:
        module = _from_pretrained(repo, rev, name, path, why, head=bool(head))
    except MissingTensorError:
        if causal_lm is not None or not head:
            raise
        # a decoder saved without its (untied) next-token head: the bare model still runs; its loss will say why not
        module = _from_pretrained(repo, rev, name, path, why, head=False)
    module.to(resolve_device(device))
    return _wrap(module, model_id, rev, repo, name, base_paths=causal_lm is None)


def _from_pretrained(
    repo: str, rev: str | None, name: str, path: Path, why: str | None, *, head: bool
) -> Any:
    """The transformers module of ``repo`` (``AutoModelForCausalLM`` with ``head``, else ``AutoModel``), float32,
    complete, or a typed error that says what is wrong and how to fix it."""
    import transformers
    from huggingface_hub.errors import StrictDataclassError

    from pos_geometry.errors import CheckpointFormatError, NotCachedError
    from pos_geometry.sources.network import fetch_hint

    try:
        auto = transformers.AutoModelForCausalLM if head else transformers.AutoModel
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
    return module


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
