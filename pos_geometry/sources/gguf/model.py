"""A runnable transformers model from a GGUF file, for hidden states, attention and interventions.

transformers can load a GGUF file itself (``from_pretrained(..., gguf_file=...)``), and that is the
reference. It also parses the whole header with ``gguf.GGUFReader``, builds a random model and
maps every tensor name once per submodule: 30 s for SmolLM2-135M on this machine. For the
architectures whose GGUF tensors transformers converts one at a time (no tensor processor, or one
of :data:`PER_TENSOR_PROCESSORS`), :func:`gguf_model` builds the transformers model from the GGUF's
config (:func:`~pos_geometry.sources.gguf.config.gguf_config`: the same config every other path
reads) without initialising its weights, and fills every parameter through
:class:`~pos_geometry.sources.gguf.checkpoint.GGUFWeights`, which applies transformers' own processor
to each tensor (a few seconds). Any other architecture (processors that merge experts), or a
parameter the file does not hold, goes to transformers' own loader. Tests check on the real SmolLM2
bytes and on files written by llama.cpp's converter that both give the same parameters.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from pos_geometry.sources.byte_source import FileByteSource
from pos_geometry.sources.gguf.checkpoint import GGUFWeights

__all__ = ["gguf_model", "fast_path_applies", "PER_TENSOR_PROCESSORS"]

#: transformers' GGUF tensor processors that turn each GGUF tensor into one transformers tensor on its own
#: (a permutation, a transpose, an offset): :class:`GGUFWeights` applies them tensor by tensor.
PER_TENSOR_PROCESSORS = frozenset(
    {"LlamaTensorProcessor", "Gemma2TensorProcessor", "NemotronTensorProcessor", "GPT2TensorProcessor",
     "BloomTensorProcessor", "Lfm2TensorProcessor"}
)  # fmt: skip


def fast_path_applies(arch: str) -> bool:
    """Whether transformers' GGUF loader converts ``arch``'s tensors one by one, as :class:`GGUFWeights` reads them."""
    from transformers.modeling_gguf_pytorch_utils import TENSOR_PROCESSORS

    return arch not in TENSOR_PROCESSORS or TENSOR_PROCESSORS[arch].__name__ in PER_TENSOR_PROCESSORS


def _transformers_load(path: Path, dtype: torch.dtype, head: str | None) -> Any:
    import transformers

    from pos_geometry.registry.direction import auto_class

    try:
        model, info = auto_class(head).from_pretrained(
            str(path.parent), gguf_file=path.name, dtype=dtype, output_loading_info=True
        )
    except ValueError as exc:  # an architecture transformers' GGUF loader does not read
        from pos_geometry.errors import CheckpointFormatError

        raise CheckpointFormatError(
            f"{path.name!r} cannot be run here: pos_geometry's GGUF reader does not place every tensor this "
            f"model needs, and transformers {transformers.__version__} cannot load it either "
            f"({str(exc).splitlines()[0][:200]}). pg.load and the atlas read what the file holds."
        ) from None
    tied = set(getattr(model, "_tied_weights_keys", None) or {})
    _refuse_missing(path, sorted(set(info.get("missing_keys") or ()) - tied))
    return model


def _refuse_missing(path: Path, missing: list[str]) -> None:
    """A GGUF lacking tensors the model needs is refused: transformers would fill them with random values."""
    if missing:
        from pos_geometry.errors import MissingTensorError

        shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
        raise MissingTensorError(
            f"{path.name!r} lacks {len(missing)} tensor(s) the model needs ({shown}); transformers "
            "would fill them with random initial values. Running the model needs a complete GGUF file; the atlas "
            "and load read what a partial file holds.",
            keys=tuple(missing),
        )


def _config(path: Path, weights: GGUFWeights) -> Any:
    """transformers' config object built from the GGUF's config (the one every other path reads)."""
    import transformers

    fields = {k: v for k, v in weights.config.items() if k != "gguf"}
    try:
        return transformers.AutoConfig.for_model(**fields)
    except (ValueError, KeyError, TypeError) as exc:  # a value transformers' config class refuses
        from pos_geometry.errors import CheckpointFormatError

        first = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
        raise CheckpointFormatError(
            f"transformers cannot build the config of {path.name!r} from its GGUF metadata ({first}); fix or "
            "re-convert the file."
        ) from None


def gguf_heads(config: dict[str, Any]) -> frozenset[str]:
    """The objectives transformers builds a head for, for a GGUF's config dict
    (:func:`~pos_geometry.registry.direction.objective_heads`); none when transformers cannot build the config."""
    import transformers

    from pos_geometry.registry.direction import objective_heads

    try:
        fields = {k: v for k, v in config.items() if k != "gguf"}
        return objective_heads(transformers.AutoConfig.for_model(**fields))
    except (ValueError, KeyError, TypeError):
        return frozenset()


def no_head(head: str) -> str:
    """Why a GGUF file gives no ``head`` loss, in words (shared by the refusal and an opened model's note)."""
    why = " (llama.cpp's converter keeps no masked-LM head of an encoder)" if head == "masked-token" else ""
    return f"the file holds no {head} head{why}"


def _head_refused(path: Path, head: str, missing: list[str]) -> Exception:
    from pos_geometry.errors import MissingTensorError

    shown = ", ".join(missing[:3]) + (" ..." if len(missing) > 3 else "")
    return MissingTensorError(
        f"{path.name!r}: {no_head(head)}; {shown} not in it, so its {head} loss cannot be measured on it. "
        "hidden_positions and attention_by_offset read the file; the loss needs a checkpoint that holds the head "
        "(the model's transformers folder).",
        keys=tuple(missing),
    )


def gguf_model(
    path: str | os.PathLike[str],
    *,
    dtype: torch.dtype = torch.float32,
    head: str | None = "next-token",
    required: bool = True,
) -> Any:
    """The transformers model of the GGUF file ``path`` in eval mode, weights dequantised to ``dtype``: with the
    head of objective ``head`` (``"next-token"``: ``AutoModelForCausalLM``; ``"masked-token"``:
    ``AutoModelForMaskedLM``; None: the bare ``AutoModel``, built without its pooler).

    Fast path (module docstring) where it applies, else transformers' ``from_pretrained(gguf_file=...)``. A
    head the file does not hold (llama.cpp's converter keeps no masked-LM head): refused when ``required``,
    else the bare model.
    """
    path = Path(path)
    weights = GGUFWeights(FileByteSource(path))
    if not fast_path_applies(weights.arch):
        return _transformers_load(path, dtype, head).eval()
    config = _config(path, weights)
    model, placed, missing = _placed(weights, config, head, dtype)
    prefix = f"{model.base_model_prefix}."
    if (
        missing and head is not None and not any(k.startswith(prefix) for k in missing)
    ):  # only the head is absent
        if required:
            raise _head_refused(path, head, missing)
        model, placed, missing = _placed(weights, config, None, dtype)  # the bare model; a loss says why not
    if missing:  # a tensor the name table does not place: the reference loader decides (and refuses a gap)
        return _transformers_load(path, dtype, head).eval()
    state = {key: weights.read(name).to(dtype) for key, name in placed.items()}  # read once all are placed
    model.load_state_dict(state, strict=False, assign=True)
    if config.tie_word_embeddings:
        model.tie_weights()
    model.name_or_path = str(path)
    return model.eval()


def _placed(
    weights: GGUFWeights, config: Any, head: str | None, dtype: torch.dtype
) -> tuple[Any, dict[str, str], list[str]]:
    """``(model, placed, missing)``: the model with the head of ``head``, built without initialising its weights,
    each parameter's GGUF name where the file holds it, and the parameters it does not hold (a tied output
    embedding is not missing). Nothing is read."""
    from transformers.initialization import no_init_weights

    from pos_geometry.registry.direction import auto_class, bare_options

    # every parameter is overwritten by the caller; buffers (the rotary inv_freq) are built as usual
    with no_init_weights():
        model = auto_class(head).from_config(config, dtype=dtype, **({} if head else bare_options(config)))
    prefix = f"{model.base_model_prefix}."
    keys = list(model.state_dict())
    tied = _tied_keys(model, keys) if config.tie_word_embeddings else set()
    placed: dict[str, str] = {}
    missing = []
    for key in keys:
        # a model's parameters answer under the bare model's names and under the head model's (llama.cpp's name
        # table knows BERT's bare names and Phi-3's fused ones with their head model's prefix)
        found = next((k for k in (key, key.removeprefix(prefix), prefix + key) if weights.has(k)), None)
        if found is not None:
            placed[key] = found
        elif key not in tied:
            missing.append(key)
    return model, placed, missing


def _tied_keys(model: Any, keys: list[str]) -> set[str]:
    """The parameter names transformers ties to another one (the output embedding of a tied head)."""
    tied = getattr(model, "_tied_weights_keys", None) or {}
    return set(tied) | {k for k in keys if k.endswith("lm_head.weight")}
