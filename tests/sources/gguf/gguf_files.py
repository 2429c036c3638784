"""GGUF files written for the tests with the ``gguf`` package's own writer.

``llama_to_gguf(model, path, qtype)`` converts a transformers Llama model the way llama.cpp's
converter does (``convert_hf_to_gguf.py``): the tensor names of gguf's table, and the query/key
rows of every head permuted from rotate-half order into adjacent pairs. The permutation is written
here from the converter's formula (``LlamaModel.permute``), not taken from pos_geometry.

``poke(src, path, tensor, offset, raw)`` copies a GGUF file with ``raw`` bytes written ``offset`` bytes
into the data of ``tensor`` (a NaN weight, a NaN quantisation scale).

``cut_gguf(src, path, layers)`` copies the metadata (tokenizer left out) and the raw, still
quantised bytes of the tensors of the first ``layers`` blocks and the non-block tensors of a real
GGUF file into a smaller one: the weights are bit-identical, and transformers loads it in seconds.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def converter_permute(weights: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's ``LlamaModel.permute``: each head's rows ``(half, j)`` -> ``(j, half)``."""
    return (
        weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


def _writer(path: Path, arch: str, config: dict) -> object:
    import gguf

    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(config["num_attention_heads"])
    writer.add_head_count_kv(config["num_key_value_heads"])
    writer.add_rope_freq_base(config["rope_theta"])
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    writer.add_vocab_size(config["vocab_size"])
    writer.add_rope_dimension_count(config["head_dim"])
    if config.get("name"):
        writer.add_name(config["name"])
    return writer


def _finish(writer) -> None:
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def llama_to_gguf(model, path: Path, qtype: str = "F32") -> Path:
    """Write ``model`` (a transformers ``LlamaForCausalLM``) as a GGUF file, every matrix in ``qtype``, with
    a 5000-token vocabulary array (longer than pos_geometry keeps) and a short float array."""
    import gguf
    from gguf.quants import quantize

    cfg = model.config
    head_dim = cfg.head_dim or cfg.hidden_size // cfg.num_attention_heads
    config = {
        "num_hidden_layers": cfg.num_hidden_layers,
        "max_position_embeddings": cfg.max_position_embeddings,
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size,
        "num_attention_heads": cfg.num_attention_heads,
        "num_key_value_heads": cfg.num_key_value_heads,
        "rope_theta": float(cfg.rope_parameters["rope_theta"]),
        "rms_norm_eps": cfg.rms_norm_eps,
        "vocab_size": cfg.vocab_size,
        "head_dim": head_dim,
        "name": "tiny",
    }
    writer = _writer(path, "llama", config)
    writer.add_token_list([f"tok{i}" for i in range(5000)])
    writer.add_array("tokenizer.ggml.scores", [0, 1, 2, 3])
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, cfg.num_hidden_layers)
    quant = gguf.GGMLQuantizationType[qtype]
    for key, value in model.state_dict().items():
        stem, _, suffix = key.rpartition(".")
        name = f"{names.get_name(stem)}.{suffix}"
        array = value.detach().float().numpy()
        if name.endswith("attn_q.weight"):
            array = converter_permute(array, cfg.num_attention_heads)
        elif name.endswith("attn_k.weight"):
            array = converter_permute(array, cfg.num_key_value_heads)
        if array.ndim == 2 and quant != gguf.GGMLQuantizationType.F32:
            writer.add_tensor(name, quantize(array, quant), raw_dtype=quant)
        else:
            writer.add_tensor(name, np.ascontiguousarray(array, dtype=np.float32))
    _finish(writer)
    return path


def cut_gguf(src: Path, path: Path, layers: int, drop: tuple[str, ...] = ()) -> Path:
    """A copy of the llama GGUF ``src`` with its first ``layers`` blocks (see the module docstring), without the
    tensors named in ``drop``."""
    from gguf.constants import GGMLQuantizationType

    from pos_geometry.sources.byte_source import FileByteSource
    from pos_geometry.sources.gguf.header import read_header

    header = read_header(FileByteSource(src))
    f = header.fields
    config = {
        "num_hidden_layers": layers,
        "max_position_embeddings": f["llama.context_length"],
        "hidden_size": f["llama.embedding_length"],
        "intermediate_size": f["llama.feed_forward_length"],
        "num_attention_heads": f["llama.attention.head_count"],
        "num_key_value_heads": f["llama.attention.head_count_kv"],
        "rope_theta": f["llama.rope.freq_base"],
        "rms_norm_eps": f["llama.attention.layer_norm_rms_epsilon"],
        "vocab_size": f["llama.vocab_size"],
        "head_dim": f["llama.rope.dimension_count"],
    }
    writer = _writer(path, "llama", config)
    with open(src, "rb") as fh:
        for name, info in header.tensors.items():
            if (name.startswith("blk.") and int(name.split(".")[1]) >= layers) or name in drop:
                continue
            fh.seek(info.offset)
            raw = np.frombuffer(fh.read(info.n_bytes), dtype=np.uint8)
            qtype = GGMLQuantizationType(info.ggml_type)
            if qtype == GGMLQuantizationType.F32:
                writer.add_tensor(name, raw.view(np.float32).reshape(info.shape))
            else:
                writer.add_tensor(name, raw.reshape(info.shape[0], -1), raw_dtype=qtype)
    _finish(writer)
    return path


def poke(src: Path, path: Path, tensor: str, offset: int, raw: bytes) -> Path:
    """A copy of ``src`` with ``raw`` written ``offset`` bytes into ``tensor``'s stored bytes (module docstring)."""
    from pos_geometry.sources.byte_source import FileByteSource
    from pos_geometry.sources.gguf.header import read_header

    info = read_header(FileByteSource(src)).tensors[tensor]
    data = bytearray(Path(src).read_bytes())
    data[info.offset + offset : info.offset + offset + len(raw)] = raw
    Path(path).write_bytes(bytes(data))
    return Path(path)


def tiny_llama_gguf(path: Path, *, heads: int = 2, scaling: str | None = None) -> Path:
    """A header-only Llama GGUF (one layer, context 64, width 16, ``heads`` heads, rope base 1e4; one zero
    ``token_embd.weight``), with ``{arch}.rope.scaling.type`` = ``scaling`` (factor 2) when given: what the
    config checks read, and nothing a model could run on."""
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(1)
    writer.add_context_length(64)
    writer.add_embedding_length(16)
    writer.add_feed_forward_length(32)
    writer.add_head_count(heads)
    writer.add_head_count_kv(heads)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(8)
    if scaling is not None:
        writer.add_string("llama.rope.scaling.type", scaling)
        writer.add_float32("llama.rope.scaling.factor", 2.0)
    writer.add_tensor("token_embd.weight", np.zeros((8, 16), dtype=np.float32))
    _finish(writer)
    return path
