"""Run a model over a corpus in batches, handing each requested residual stream to a callback.

Forward hooks on the transformer blocks, not ``output_hidden_states``, for three reasons:

* a layer's states are folded into its running sums the moment the block produces them and are
  then free, so at most one layer's batch of states is held besides the model's own activations
  (``output_hidden_states`` keeps all ``n_layers + 1`` of them until the forward returns);
* the last entry of ``output_hidden_states`` has the final norm applied in GPT-2, Llama and most
  decoders, whereas layer ``n_layers`` here is the last block's output *before* that norm, like
  every other layer (the residual stream itself);
* the forward stops right after the deepest block that is needed (the final norm and the LM head,
  often the largest matrix, never run).

Layer ``i < n_layers`` is the input of block ``i`` (a pre-hook); layer ``n_layers`` is the output
of the last block. Hooks are removed whatever happens.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from typing import Any

import torch

from pos_geometry import _progress
from pos_geometry.hidden.model import LoadedModel
from pos_geometry.hidden.run import Run

__all__ = ["run_batches", "hook_point"]


class _Stop(Exception):
    """Raised from a hook once everything needed from this batch has been seen."""


def hook_point(loaded: LoadedModel, layer: int) -> str:
    """Where layer ``layer`` is read: ``"transformer.h.3 (input)"`` or ``"transformer.h.11 (output)"``."""
    if layer < loaded.n_layers:
        return f"{loaded.blocks_path}.{layer} (input)"
    return f"{loaded.blocks_path}.{loaded.n_layers - 1} (output)"


def _first_tensor(value: Any) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, tuple | list) and value and isinstance(value[0], torch.Tensor):
        return value[0]
    if hasattr(value, "last_hidden_state"):
        return value.last_hidden_state
    raise TypeError(f"cannot find the hidden states in a block output of type {type(value).__name__}")


def run_batches(
    run: Run,
    *,
    hidden_layers: Iterable[int] = (),
    on_hidden: Callable[[int, torch.Tensor], None] | None = None,
    through_block: int = -1,
) -> None:
    """Run every context of ``run.corpus``, ``run.batch_size`` at a time, under ``torch.inference_mode``;
    call ``on_hidden(layer, states (batch, seq_len, d_model))`` and then ``run.progress(done, total)``.

    ``through_block``: the last block that must run completely (for attention statistics); the
    forward is cut after it or after the deepest hidden layer, whichever comes later.
    """
    loaded, corpus, batch_size, progress = run.loaded, run.corpus, run.batch_size, run.progress
    n = loaded.n_layers
    layers = sorted(set(hidden_layers))
    # positions along the forward: block i's input is 2i, its output 2i + 1
    stop = max([2 * layer if layer < n else 2 * n - 1 for layer in layers] + [2 * through_block + 1])
    handles = []

    def pre_hook(index: int) -> Callable[..., None]:
        def hook(module: Any, args: tuple, kwargs: dict) -> None:
            if index in layers and on_hidden is not None:
                on_hidden(index, args[0] if args else kwargs["hidden_states"])
            if 2 * index == stop:
                raise _Stop

        return hook

    def post_hook(index: int) -> Callable[..., None]:
        def hook(module: Any, args: tuple, kwargs: dict, output: Any) -> None:
            if index == n - 1 and n in layers and on_hidden is not None:
                on_hidden(n, _first_tensor(output))
            if 2 * index + 1 == stop:
                raise _Stop

        return hook

    try:
        for i, block in enumerate(loaded.blocks):
            if i in layers or 2 * i == stop:
                handles.append(block.register_forward_pre_hook(pre_hook(i), with_kwargs=True))
            if (i == n - 1 and n in layers) or 2 * i + 1 == stop:
                handles.append(block.register_forward_hook(post_hook(i), with_kwargs=True))
        tokens = torch.from_numpy(corpus.tokens)
        total = corpus.n_sequences
        # no callback: a bar of its own in a terminal or Jupyter (the CLI passes its bar's callback)
        bar = (
            _progress.task("contexts", total, show=run.show) if progress is None else contextlib.nullcontext()
        )
        with torch.inference_mode(), bar as step:
            for start in range(0, total, batch_size):
                ids = tokens[start : start + batch_size].to(loaded.device)
                with contextlib.suppress(_Stop):  # the hooks cut the forward after the deepest block needed
                    loaded.module(input_ids=ids, use_cache=False)
                if progress is not None:
                    progress(min(start + batch_size, total), total)
                else:
                    step(int(ids.shape[0]))
    finally:
        for handle in handles:
            handle.remove()
