"""Write the GGUF parity fixtures: tiny random transformers models and their GGUF files written by
llama.cpp's own converter (``convert_hf_to_gguf.py``).

For every architecture in :data:`ARCHITECTURES`, a tiny model is built with transformers from its own
config class (seeded, random weights), saved as a folder (``config.json`` + ``model.safetensors``), and
converted by llama.cpp's converter at F32 (so the GGUF holds the same numbers) and at Q8_0. The tests in
``tests/sources/gguf/test_gguf_parity.py`` then ask every path of pos_geometry to give the same answer on the
folder and on its GGUF.

llama.cpp's code is run, never copied: point ``--llama-cpp`` at a llama.cpp tree, for example the one
inside the ``llama-cpp-python`` source distribution on PyPI::

    pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36 -d /tmp
    mkdir /tmp/llamacpp && tar xzf /tmp/llama_cpp_python-0.3.36.tar.gz -C /tmp/llamacpp --strip-components=3 \
        llama_cpp_python-0.3.36/vendor/llama.cpp/convert_hf_to_gguf.py \
        llama_cpp_python-0.3.36/vendor/llama.cpp/conversion llama_cpp_python-0.3.36/vendor/llama.cpp/gguf-py
    .venv/bin/python scripts/make_gguf_fixtures.py --llama-cpp /tmp/llamacpp

For the K-quant files, build llama.cpp's ``llama-quantize`` from the same tree (the whole
``vendor/llama.cpp`` folder of the sdist: ``cmake -B build -DLLAMA_CURL=OFF && cmake --build build
--target llama-quantize``) and pass ``--quantize build/bin/llama-quantize``.

The one thing the converter is not given is a trained tokenizer (a random model has none): its
``set_vocab`` step is replaced by a stand-in vocabulary of ``vocab_size`` plain tokens. Every tensor and
every hyperparameter in the files is the converter's own. ``provenance.json`` records the llama.cpp
commit, the versions, the seeds and each file's SHA-256.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "gguf_parity"
LLAMA_CPP_COMMIT = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"  # vendored by llama-cpp-python 0.3.36

_SMALL = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 256,
    "vocab_size": 256,
}

#: name -> (model_type, config fields beyond _SMALL). Each one is a case the parity matrix must cover:
#: llama's q/k row permutation, Qwen2's q/k biases, Qwen3's q/k norms, Phi-3's fused qkv, Gemma's ``1 + w``
#: norms (stored by llama.cpp with the 1 added), Gemma-3's two rotation bases, StableLM's partial rotary
#: with LayerNorm, Starcoder2's biased LayerNorm model, GPT-2's learned table, and BERT: an encoder (it attends
#: both ways) with a learned table, saved with its masked-LM head and a WordPiece tokenizer that has a mask token.
ARCHITECTURES: dict[str, tuple[str, dict[str, Any]]] = {
    "llama": ("llama", {"rope_theta": 50000.0, "head_dim": 8}),
    "qwen2": ("qwen2", {"rope_theta": 1000000.0}),
    "qwen3": ("qwen3", {"rope_theta": 1000000.0, "head_dim": 8}),
    "phi3": (
        "phi3",
        {
            "rope_theta": 10000.0,
            "num_key_value_heads": 4,
            "pad_token_id": 0,
            "bos_token_id": 1,
            "eos_token_id": 2,
        },
    ),
    "gemma2": ("gemma2", {"head_dim": 8, "sliding_window": 32}),
    "gemma3": (
        "gemma3_text",
        {"head_dim": 8, "num_hidden_layers": 6, "sliding_window": 32, "rope_theta": 1000000.0},
    ),
    "stablelm": ("stablelm", {"partial_rotary_factor": 0.5, "num_key_value_heads": 4, "rope_theta": 10000.0}),
    "starcoder2": (
        "starcoder2",
        {"rope_theta": 100000.0, "use_bias": True, "bos_token_id": 0, "eos_token_id": 0},
    ),
    "gpt2": (
        "gpt2",
        {
            "n_embd": 32,
            "n_layer": 2,
            "n_head": 4,
            "n_positions": 256,
            "n_ctx": 256,
            "bos_token_id": 0,
            "eos_token_id": 0,
        },
    ),
    "bert": ("bert", {"type_vocab_size": 2}),
}
#: config fields of _SMALL an architecture's config class does not have (they would be saved as strays)
_DROP = {"bert": ("num_key_value_heads",)}
#: architectures saved with a head other than the causal-LM one, and with a tokenizer of their own
_MASKED_LM = ("bert",)
_GPT2_DROP = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
              "num_key_value_heads", "max_position_embeddings")  # fmt: skip

OUTTYPES = ("f32", "q8_0")

#: Wider models for the K-quants (a K-quant block spans 256 values of a row, so rows must be that long):
#: converted at F32, then quantised to Q4_K_M by llama.cpp's own ``llama-quantize`` (``--quantize``); only
#: the quantised file is kept (its oracle is transformers' own GGUF loader on the same bytes).
_WIDE = {"hidden_size": 256, "intermediate_size": 256, "num_hidden_layers": 1, "head_dim": 64}
K_QUANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "llama-wide": ("llama", {**_WIDE, "rope_theta": 50000.0}),
    "gemma2-wide": ("gemma2", {**_WIDE, "sliding_window": 32}),
}


def _config(model_type: str, extra: dict[str, Any]) -> Any:
    import transformers

    fields = {**_SMALL, **extra}
    if model_type == "gpt2":
        fields = {k: v for k, v in fields.items() if k not in _GPT2_DROP}
    fields = {k: v for k, v in fields.items() if k not in _DROP.get(model_type, ())}
    return transformers.AutoConfig.for_model(model_type, **fields)


def _save_model(name: str, model_type: str, extra: dict[str, Any], folder: Path, seed: int) -> None:
    import torch
    import transformers

    config = _config(model_type, extra)
    torch.manual_seed(seed)
    auto = (
        transformers.AutoModelForMaskedLM if model_type in _MASKED_LM else transformers.AutoModelForCausalLM
    )
    model = auto.from_config(config).float().eval()
    with torch.no_grad():  # norm gains away from their initial 1 (or 0) and biases away from 0, so a
        for key, param in model.named_parameters():  # wrong offset or a left-out bias shows
            if "norm" in key or "ln" in key.split(".")[-2]:
                param.add_(0.3 * torch.randn_like(param))
            elif key.endswith("bias"):
                param.add_(0.1 * torch.randn_like(param))
    model.save_pretrained(folder, safe_serialization=True)
    if model_type in _MASKED_LM:
        _wordpiece(folder, config.vocab_size)


def _wordpiece(folder: Path, n: int) -> None:
    """A WordPiece tokenizer of ``n`` tokens with BERT's special tokens ([MASK] is id 4), saved in ``folder``."""
    import transformers

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"t{i}" for i in range(5, n)]
    transformers.BertTokenizer(vocab={word: i for i, word in enumerate(vocab)}).save_pretrained(folder)


def _stand_in_vocab(self: Any) -> None:
    """The converter's ``set_vocab`` for a model with no trained tokenizer: ``vocab_size`` plain tokens."""
    n = int(self.hparams.get("vocab_size") or self.hparams.get("n_vocab"))
    self.gguf_writer.add_tokenizer_model("gpt2")
    self.gguf_writer.add_tokenizer_pre("default")
    self.gguf_writer.add_token_list([f"<t{i}>" for i in range(n)])
    self.gguf_writer.add_token_types([1] * n)
    if (Path(self.dir_model) / "tokenizer_config.json").is_file():  # a folder with its own tokenizer (BERT):
        import gguf  # its special ids (the mask token among them) as the converter's SpecialVocab writes them

        gguf.SpecialVocab(self.dir_model, load_merges=False, n_vocab=n).add_to_gguf(self.gguf_writer)
        return
    # the special token ids SpecialVocab would have written from a real tokenizer's files
    for field, add in (("bos_token_id", "add_bos_token_id"), ("eos_token_id", "add_eos_token_id"),
                       ("pad_token_id", "add_pad_token_id")):  # fmt: skip
        value = self.hparams.get(field)
        if isinstance(value, int) and 0 <= value < n:
            getattr(self.gguf_writer, add)(value)


def _vocab_file(folder: Path, arch: tuple[str, dict[str, Any]]) -> None:
    """A ``tokenizer.json`` naming ``vocab_size`` tokens, for converters that count the vocabulary from it
    (Gemma-3 cuts ``embed_tokens`` to that count); only the conversion's copy of the folder gets it, and only
    when the folder has no tokenizer of its own."""
    if (folder / "tokenizer.json").exists():
        return
    n = int({**_SMALL, **arch[1]}["vocab_size"])
    vocab = {f"<t{i}>": i for i in range(n)}
    (folder / "tokenizer.json").write_text(json.dumps({"model": {"vocab": vocab}, "added_tokens": []}))


def _convert(llama_cpp: Path, folder: Path, out: Path, outtype: str) -> None:
    """Run llama.cpp's converter in this process, its ``set_vocab`` replaced (module docstring)."""
    sys.path.insert(0, str(llama_cpp))
    converter = importlib.import_module("convert_hf_to_gguf")
    original = converter.get_model_class

    def get_model_class(name: str, mmproj: bool = False) -> Any:
        cls = original(name, mmproj=mmproj)
        return type(cls.__name__, (cls,), {"set_vocab": _stand_in_vocab, "model_arch": cls.model_arch})

    converter.get_model_class = get_model_class
    argv = sys.argv
    sys.argv = ["convert_hf_to_gguf.py", str(folder), "--outfile", str(out), "--outtype", outtype]
    try:
        converter.main()
    finally:
        sys.argv = argv
        converter.get_model_class = original


def _k_quants(args: argparse.Namespace, done: dict[str, Any]) -> dict[str, Any]:
    """Write ``{name}-q4_k_m.gguf`` for each of :data:`K_QUANTS`: saved, converted at F32, quantised by
    ``llama-quantize`` (temporary folders; only the quantised file is kept)."""
    for name, (model_type, extra) in K_QUANTS.items():
        if args.only and name not in args.only:
            continue
        seed = 100 + list(K_QUANTS).index(name)
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / name
            _save_model(name, model_type, extra, folder, seed)
            _vocab_file(folder, (model_type, extra))
            f32 = Path(tmp) / f"{name}-f32.gguf"
            _convert(args.llama_cpp, folder, f32, "f32")
            target = args.out / f"{name}-q4_k_m.gguf"
            subprocess.run(
                [str(args.quantize), str(f32), str(target), "Q4_K_M"], check=True, capture_output=True
            )
        done[name] = {"model_type": model_type, "config": extra, "seed": seed, "quantized_by": "llama-quantize Q4_K_M",
                      "sha256": {target.name: _sha(target)}}  # fmt: skip
        print(f"{name}: {target.name}")
    return done


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--llama-cpp", type=Path, required=True, help="a llama.cpp tree (convert_hf_to_gguf.py)"
    )
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--only", nargs="*", help="architectures to (re)write; default: all")
    parser.add_argument(
        "--quantize",
        type=Path,
        help="llama.cpp's llama-quantize binary: also write the Q4_K_M files of K_QUANTS",
    )
    args = parser.parse_args()
    import transformers

    names = [n for n in (args.only or ARCHITECTURES) if n in ARCHITECTURES]
    args.out.mkdir(parents=True, exist_ok=True)
    provenance_path = args.out / "provenance.json"
    provenance = json.loads(provenance_path.read_text()) if provenance_path.exists() else {"models": {}}
    commit = (
        subprocess.run(
            ["git", "-C", str(args.llama_cpp), "rev-parse", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        or LLAMA_CPP_COMMIT
    )
    for name in names:
        model_type, extra = ARCHITECTURES[name]
        seed = list(ARCHITECTURES).index(name)
        folder = args.out / name
        shutil.rmtree(folder, ignore_errors=True)
        _save_model(name, model_type, extra, folder, seed)
        files = {}
        for outtype in OUTTYPES:
            with tempfile.TemporaryDirectory() as tmp:
                source = Path(tmp) / name
                shutil.copytree(folder, source)
                _vocab_file(source, ARCHITECTURES[name])
                target = Path(tmp) / f"{name}-{outtype}.gguf"
                _convert(args.llama_cpp, source, target, outtype)
                shutil.move(target, args.out / target.name)
            files[f"{name}-{outtype}.gguf"] = _sha(args.out / f"{name}-{outtype}.gguf")
        files["model.safetensors"] = _sha(folder / "model.safetensors")
        provenance["models"][name] = {
            "model_type": model_type,
            "config": extra,
            "seed": seed,
            "sha256": files,
        }
        print(f"{name}: {', '.join(files)}")
    if args.quantize is not None:
        provenance["k_quants"] = _k_quants(args, provenance.get("k_quants", {}))
    provenance.update(
        llama_cpp_commit=commit,
        converter="convert_hf_to_gguf.py (llama.cpp), set_vocab replaced by a stand-in vocabulary",
        transformers=transformers.__version__,
        script="scripts/make_gguf_fixtures.py",
    )
    provenance_path.write_text(json.dumps(provenance, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
