"""Opening a model once: a name, a local checkpoint, a ``.gguf`` file, or a model already in memory.

:func:`open_model` turns what the user passed into a :class:`~pos_geometry.hidden.model.LoadedModel`. A
model-table name (``"gpt2"``, ``"pythia-70m"``) resolves through :mod:`pos_geometry.registry` to its hub
repository and default revision; transformers then reads it from the local Hugging Face cache (or the
hub). Loading never executes checkpoint code (``trust_remote_code`` stays off; transformers reads ``.bin``
files with ``weights_only``). Every analysis that runs a model takes an opened model in place of the model
and loads nothing again, so a card opens and dequantises its model once.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
from pathlib import Path
from typing import Any

from pos_geometry._device import Device
from pos_geometry.errors import InvalidArgumentError, NotApplicableError
from pos_geometry.hidden.model import LoadedModel, _config_dict, _wrap, quiet_transformers
from pos_geometry.registry.direction import auto_class, bare_options, objective_heads

__all__ = ["open_model", "refuse_headless", "refuse_next_token_loss"]


def refuse_next_token_loss(config: dict[str, Any], model_id: str) -> None:
    """Refuse a next-token loss on a model that attends both ways (the token it would predict is in view)."""
    from pos_geometry.registry.direction import attention_direction

    direction = attention_direction(config)
    if not direction.causal:
        raise NotApplicableError(
            f"a next-token loss does not apply to {model_id}: it attends in both directions "
            f"({direction.reason}), so every position sees the token it would predict. Its objective is a "
            "masked-token loss (pg.intervene measures that one on a model opened with its masked-LM head)."
        )


def refuse_headless(config: dict[str, Any], heads: frozenset[str], model_id: str) -> None:
    """Refuse a loss transformers builds no head for: the objective that fits the model (its attention
    direction) must be one of ``heads``. A causal decoder's next-token loss is refused on a model that attends
    both ways before anything else (:func:`refuse_next_token_loss`)."""
    from pos_geometry.registry.direction import attention_direction

    direction = attention_direction(config)
    if direction.objective not in heads:
        raise NotApplicableError(
            f"a {direction.objective} loss does not apply to {model_id}: it attends "
            f"{'causally' if direction.causal else 'in both directions'} ({direction.reason}), so its objective "
            f"is a {direction.objective} loss, and transformers builds no {direction.objective} head for model_type "
            f"{config.get('model_type')!r}. hidden_positions (hidden states and attention by offset) reads it."
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


def _reuse(opened: LoadedModel, device: Any, revision: str | None, head: bool | None) -> LoadedModel:
    """An already opened model, checked against what the caller asks of it (nothing is loaded again)."""
    if revision is not None and revision != opened.revision:
        raise InvalidArgumentError(
            f"the model was opened at revision {opened.revision!r}, but revision={revision!r} was asked; open "
            "that revision with pg.open_model(..., revision=...) or leave revision out."
        )
    _check_device(device, opened.device, f"open it there (pg.open_model(..., device={device!r}))")
    if head:
        _check_head(opened)
    return opened


def _check_head(opened: LoadedModel) -> None:
    """Refuse a model whose module has no head for the objective that fits it (its attention direction)."""
    objective = opened.direction.objective
    if opened.head == objective:
        return
    if objective == "next-token":
        refuse_next_token_loss(opened.config, opened.model_id)
    if opened.headless:
        from pos_geometry.errors import MissingTensorError

        raise MissingTensorError(
            f"{opened.model_id} has no {objective} loss: {opened.headless}. hidden_positions and "
            "attention_by_offset read it; the loss needs a checkpoint that holds the head (the model's "
            "transformers folder)."
        )
    what = f"a {opened.head} head" if opened.head else "the bare model, with no language-model head"
    raise NotApplicableError(
        f"{opened.model_id} was opened as {what}, so it has no {objective} loss, the objective that fits it "
        f"({opened.direction.reason}). Open it with that head: pg.open_model(..., head=True), or a model in "
        f"memory loaded with transformers.{auto_class(objective).__name__}."
    )


def _config_object(repo: str, revision: str | None, local: bool) -> Any:
    """transformers' config object of ``repo`` (None when it cannot be read: the weights' load says why)."""
    import transformers

    try:
        with quiet_transformers():
            return transformers.AutoConfig.from_pretrained(repo, revision=revision, local_files_only=local)
    except Exception:
        return None


def _chosen_head(
    config: dict[str, Any] | None, heads: frozenset[str], head: bool | None, model_id: str
) -> str | None:
    """The objective whose head to load (None: the bare model), as :func:`open_model` describes ``head``;
    ``head=True`` on a model transformers builds no such head for is refused before any weight is read."""
    from pos_geometry.registry.direction import attention_direction

    if head is False:
        return None
    if config is None:  # the config cannot be read here: the load itself says why
        return "next-token" if head else None
    objective = attention_direction(config).objective
    if head:
        refuse_headless(config, heads, model_id)
        return objective
    return objective if objective in heads and not _saved_bare(config) else None


def _saved_bare(config: dict[str, Any]) -> bool:
    """Whether the checkpoint says it was saved from the bare model (``architectures`` names only the class
    ``AutoModel`` builds for its model_type), so it holds no head to look for."""
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    names = config.get("architectures")
    bare = MODEL_MAPPING_NAMES.get(str(config.get("model_type", "")))
    return (
        bool(names) and isinstance(names, list | tuple) and bare is not None and all(n == bare for n in names)
    )


def open_model(
    model: Any,
    *,
    device: Device = "auto",
    revision: str | None = None,
    head: bool | None = None,
) -> LoadedModel:
    """A model opened once: the weights loaded, the config and its description resolved; every analysis
    that runs a model (:func:`~pos_geometry.hidden_positions`, :func:`~pos_geometry.attention_by_offset`,
    :func:`~pos_geometry.intervene`, :func:`~pos_geometry.intervene_sweep`, :func:`~pos_geometry.rotary_atlas`,
    :func:`~pos_geometry.cards.card`) takes the result in place of the model and loads nothing again.

    ``model``: a model-table name, a hub repo id, a local folder, a ``.gguf`` file, a loaded transformers model,
    or an opened model (returned as it is, checked against ``device``, ``revision`` and ``head``).

    A ``.gguf`` file is dequantised to float32 by :func:`~pos_geometry.sources.gguf.model.gguf_model`
    (transformers' own GGUF loader where pos_geometry's fast path does not apply).
    A model already in memory (a ``transformers.PreTrainedModel``) stays where it is: ``device``
    must then be ``"auto"`` or its own device (pos_geometry never moves a model silently). Names and
    paths are loaded in float32 onto ``device`` (``"auto"``: CUDA, then MPS, else CPU).

    ``head``: the head of the model's training objective, which a loss needs: the next-token head
    (``AutoModelForCausalLM``) of a causal decoder, the masked-token head (``AutoModelForMaskedLM``) of a model
    that attends both ways (:attr:`LoadedModel.direction`). True: that head, required (a model transformers
    builds no such head for is refused before its weights are read; a model in memory must have it); False:
    the bare model (``AutoModel``); None (the default): with the head where transformers builds one and the
    checkpoint holds it, else bare. A bare encoder is built without its pooler (the ``[CLS]`` summary no
    analysis reads), so a checkpoint saved without one still opens.
    """
    from pos_geometry._device import resolve_device

    if isinstance(model, LoadedModel):
        return _reuse(model, device, revision, head)
    if hasattr(model, "config") and hasattr(model, "named_modules"):
        loaded = _wrap(model, str(getattr(model, "name_or_path", "") or type(model).__name__), revision, None)
        if head:
            _check_head(loaded)
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
        from pos_geometry.sources.gguf.model import gguf_heads, gguf_model, no_head
        from pos_geometry.sources.opening import open_checkpoint

        config = open_checkpoint(path).config  # the header only: a refusal comes before any weight is read
        chosen = _chosen_head(config, gguf_heads(config), head, str(path))
        module = gguf_model(path, head=chosen, required=bool(head))
        module.to(resolve_device(device))
        loaded = _wrap(module, str(path), None, str(path), name)  # the file holds its tokenizer too
        if chosen is not None and loaded.head is None:
            loaded = dataclasses.replace(loaded, headless=no_head(chosen))
        return loaded
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
    # the config as transformers reads it, once, before any weight (None when it cannot be read here: the load
    # itself then says why): the head to load, and how to build the bare model
    found = _config_object(repo, rev, why is not None)
    config = None if found is None else _config_dict(found)
    heads = frozenset() if found is None else objective_heads(found)
    bare = bare_options(found)
    chosen = _chosen_head(config, heads, head, model_id)
    headless = ""
    try:
        module = _from_pretrained(repo, rev, name, path, why, head=chosen, bare=bare)
    except MissingTensorError as exc:
        if head is not None or chosen is None:
            raise
        # saved without its (untied) head: the bare model still runs; its loss says why not
        module = _from_pretrained(repo, rev, name, path, why, head=None, bare=bare)
        headless = (
            f"its checkpoint holds no {chosen} head ({', '.join(exc.keys[:3]) or 'its weights are missing'})"
        )
    module.to(resolve_device(device))
    loaded = _wrap(module, model_id, rev, repo, name, base_paths=head is None)
    return dataclasses.replace(loaded, headless=headless) if headless else loaded


def _from_pretrained(
    repo: str,
    rev: str | None,
    name: str,
    path: Path,
    why: str | None,
    *,
    head: str | None,
    bare: dict[str, Any],
) -> Any:
    """The transformers module of ``repo`` with the head of objective ``head`` (``AutoModelForCausalLM`` for
    ``"next-token"``, ``AutoModelForMaskedLM`` for ``"masked-token"``, else the bare ``AutoModel`` built with
    ``bare``, :func:`~pos_geometry.registry.direction.bare_options`), float32, complete, or a typed error that says
    what is wrong and how to fix it."""
    from huggingface_hub.errors import StrictDataclassError

    from pos_geometry.errors import CheckpointFormatError, NotCachedError
    from pos_geometry.sources.network import fetch_hint

    try:
        auto = auto_class(head)
        extra = {} if head else bare
        with quiet_transformers():
            module, info = auto.from_pretrained(
                repo,
                revision=rev,
                dtype="float32",
                output_loading_info=True,
                local_files_only=why is not None,
                **extra,
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
            "partial folder can be read by pg.load / position_qk_atlas, not run.",
            keys=tuple(missing),
        )
