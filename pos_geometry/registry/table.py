"""The model table: plain data, one record per model.

A new model is a new record here (and, for a new training-checkpoint schedule, an entry
in :mod:`~pos_geometry.registry.schedules`), never a branch in code. Each record is a
dict of :class:`~pos_geometry.registry.spec.ModelSpec` fields; the fields shared by a
whole family live in :data:`FAMILY_DEFAULTS` and are overridden by the record. A row's
leading non-position rows are not stated here: they follow from its ``model_type`` by the
one rule, :data:`~pos_geometry.registry.lookup.ROW_OFFSET_BY_MODEL_TYPE`.

Where the numbers come from (checked against the published config.json files):

* GPT-2 (openai-community): n_positions 1024; n_embd 768 / 1024 / 1280 / 1600.
* Stanford CRFM replicas: GPT-2 small (768) and medium (1024) architectures, 1024 positions.
* Pythia (GPTNeoX): hidden_size/num_attention_heads 14m 128/4, 31m 256/8, 70m 512/8,
  160m 768/12, 410m 1024/16, 1b 2048/8, 1.4b 2048/16, 2.8b 2560/32, 6.9b 4096/32,
  12b 5120/40; every size rotary_pct 0.25, rotary_emb_base 10000, max_position_embeddings
  2048. Deduplicated-Pile twins exist for 70m..12b (not for 14m and 31m).
* Mistral 7B: hidden_size 4096, 32 heads (head_dim 128), max_position_embeddings 32768;
  rope_theta 10000.0 in v0.1 and 1000000.0 in v0.3.
* OPT: hidden_size 125m 768, 350m 1024, 1.3b 2048, 2.7b 2560, 6.7b 4096, 13b 5120,
  30b 7168, 66b 9216; max_position_embeddings 2048, stored with 2 extra leading rows.
* GPT-Neo: hidden_size 768 / 2048 / 2560, max_position_embeddings 2048.
* BERT base/large 768/1024 and DistilBERT 768, 512 positions; RoBERTa
  max_position_embeddings 514 with pad_token_id 1 (positions start at row 2).
"""

from __future__ import annotations

from typing import Any

__all__ = ["FAMILY_DEFAULTS", "ROWS"]

_PYTHIA_ROPE = {"rotary_pct": 0.25, "rotary_emb_base": 10000, "max_position_embeddings": 2048}

FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {
    "gpt2": {
        "model_type": "gpt2",
        "kind": "learned",
        "position_key": "wpe.weight",
        "token_key": "wte.weight",
        "n_positions": 1024,
    },
    "stanford-crfm": {
        "model_type": "gpt2",
        "kind": "learned",
        "position_key": "transformer.wpe.weight",
        "token_key": "transformer.wte.weight",
        "n_positions": 1024,
        "revisions": "stanford-crfm",
        "weight_files": ["pytorch_model.bin"],
        "notes": (
            "GPT-2 replica trained on OpenWebText by Stanford CRFM (Mistral project); the number after "
            "'x' is the seed. The hub repo ships only pytorch_model.bin (no safetensors): the positional "
            "tensor is float16 at the final checkpoint and float32 at checkpoint-0. 609 training "
            "checkpoints are published as revisions checkpoint-N."
        ),
    },
    "pythia": {
        "model_type": "gpt_neox",
        "kind": "rotary",
        "token_key": "gpt_neox.embed_in.weight",
        "n_positions": 2048,
        "revisions": "pythia",
        "notes": (
            "GPT-NeoX architecture with rotary embeddings on the first 25% of each head's dimensions "
            "(rotary_pct 0.25); no learned positional table. 154 training checkpoints are published "
            "as revisions stepN."
        ),
    },
    "mistral": {
        "model_type": "mistral",
        "kind": "rotary",
        "token_key": "model.embed_tokens.weight",
        "n_positions": 32768,
        "d_model": 4096,
        "notes": "Rotary embeddings on the full head dimension (128); no learned positional table.",
    },
    "openai-gpt": {
        "model_type": "openai-gpt",
        "kind": "learned",
        "position_key": "positions_embed.weight",
        "token_key": "tokens_embed.weight",
        "n_positions": 512,
        "d_model": 768,
    },
    "opt": {
        "model_type": "opt",
        "kind": "learned",
        "position_key": "decoder.embed_positions.weight",
        "token_key": "decoder.embed_tokens.weight",
        "n_positions": 2048,
        "notes": (
            "OPTLearnedPositionalEmbedding stores 2050 rows: position p is row p + 2, the first 2 rows "
            "are an offset inherited from fairseq and are not positions."
        ),
    },
    "gpt-neo": {
        "model_type": "gpt_neo",
        "kind": "learned",
        "position_key": "transformer.wpe.weight",
        "token_key": "transformer.wte.weight",
        "n_positions": 2048,
    },
    "bert": {
        "model_type": "bert",
        "kind": "learned",
        "position_key": "bert.embeddings.position_embeddings.weight",
        "token_key": "bert.embeddings.word_embeddings.weight",
        "n_positions": 512,
    },
    "roberta": {
        "model_type": "roberta",
        "kind": "learned",
        "position_key": "roberta.embeddings.position_embeddings.weight",
        "token_key": "roberta.embeddings.word_embeddings.weight",
        "n_positions": 512,
        "notes": (
            "max_position_embeddings is 514: positions are numbered from padding_idx + 1 = 2, so rows 0 "
            "and 1 (row 1 is the padding row) are not positions."
        ),
    },
    "distilbert": {
        "model_type": "distilbert",
        "kind": "learned",
        "position_key": "distilbert.embeddings.position_embeddings.weight",
        "token_key": "distilbert.embeddings.word_embeddings.weight",
        "n_positions": 512,
        "d_model": 768,
    },
}


def _crfm(name: str, d_model: int) -> dict[str, Any]:
    seed = name.rsplit("-", 1)[1]
    size = "small" if "small" in name else "medium"
    return {
        "name": name,
        "repo_id": f"stanford-crfm/{name}",
        "family": "stanford-crfm",
        "d_model": d_model,
        "aliases": [f"crfm-gpt2-{size}-{seed}"],
    }


def _pythia(size: str, hidden: int, heads: int, *, deduped: bool = False) -> dict[str, Any]:
    name = f"pythia-{size}" + ("-deduped" if deduped else "")
    return {
        "name": name,
        "repo_id": f"EleutherAI/{name}",
        "family": "pythia",
        "d_model": hidden,
        "rotary": {"hidden_size": hidden, "num_attention_heads": heads, **_PYTHIA_ROPE},
    }


def _mistral(version: str, theta: float) -> dict[str, Any]:
    return {
        "name": f"mistral-7b-{version}",
        "repo_id": f"mistralai/Mistral-7B-{version}",
        "family": "mistral",
        "rotary": {
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "rope_theta": theta,
            "max_position_embeddings": 32768,
        },
    }


def _opt(size: str, hidden: int) -> dict[str, Any]:
    return {"name": f"opt-{size}", "repo_id": f"facebook/opt-{size}", "family": "opt", "d_model": hidden}


_PYTHIA_SIZES = [
    ("14m", 128, 4),
    ("31m", 256, 8),
    ("70m", 512, 8),
    ("160m", 768, 12),
    ("410m", 1024, 16),
    ("1b", 2048, 8),
    ("1.4b", 2048, 16),
    ("2.8b", 2560, 32),
    ("6.9b", 4096, 32),
    ("12b", 5120, 40),
]
_PYTHIA_DEDUPED = {"70m", "160m", "410m", "1b", "1.4b", "2.8b", "6.9b", "12b"}

ROWS: list[dict[str, Any]] = [
    # --- OpenAI GPT-2 -------------------------------------------------------
    {
        "name": "gpt2",
        "repo_id": "openai-community/gpt2",
        "family": "gpt2",
        "d_model": 768,
        "aliases": ["gpt2-small", "gpt2-124m"],
    },
    {
        "name": "gpt2-medium",
        "repo_id": "openai-community/gpt2-medium",
        "family": "gpt2",
        "d_model": 1024,
        "aliases": ["gpt2-355m"],
    },
    {
        "name": "gpt2-large",
        "repo_id": "openai-community/gpt2-large",
        "family": "gpt2",
        "d_model": 1280,
        "aliases": ["gpt2-774m"],
    },
    {
        "name": "gpt2-xl",
        "repo_id": "openai-community/gpt2-xl",
        "family": "gpt2",
        "d_model": 1600,
        "aliases": ["gpt2-1.5b"],
    },
    # --- Stanford CRFM GPT-2 replicas ----------------------------------------
    _crfm("alias-gpt2-small-x21", 768),
    _crfm("battlestar-gpt2-small-x49", 768),
    _crfm("caprica-gpt2-small-x81", 768),
    _crfm("darkmatter-gpt2-small-x343", 768),
    _crfm("expanse-gpt2-small-x777", 768),
    _crfm("arwen-gpt2-medium-x21", 1024),
    _crfm("beren-gpt2-medium-x49", 1024),
    _crfm("celebrimbor-gpt2-medium-x81", 1024),
    _crfm("durin-gpt2-medium-x343", 1024),
    _crfm("eowyn-gpt2-medium-x777", 1024),
    # --- EleutherAI Pythia ----------------------------------------------------
    *[_pythia(size, hidden, heads) for size, hidden, heads in _PYTHIA_SIZES],
    *[
        _pythia(size, hidden, heads, deduped=True)
        for size, hidden, heads in _PYTHIA_SIZES
        if size in _PYTHIA_DEDUPED
    ],
    # --- Mistral ----------------------------------------------------------------
    _mistral("v0.1", 10000.0),
    _mistral("v0.3", 1000000.0),
    # --- OpenAI GPT-1 -----------------------------------------------------------
    {
        "name": "openai-gpt",
        "repo_id": "openai-community/openai-gpt",
        "family": "openai-gpt",
        "aliases": ["gpt1", "gpt-1"],
    },
    # --- Meta OPT ---------------------------------------------------------------
    _opt("125m", 768),
    {
        **_opt("350m", 1024),
        "notes": (
            "OPTLearnedPositionalEmbedding stores 2050 rows: position p is row p + 2. The positional "
            "table is hidden_size (1024) wide; token embeddings are 512 wide (word_embed_proj_dim) "
            "and projected in."
        ),
    },
    _opt("1.3b", 2048),
    _opt("2.7b", 2560),
    _opt("6.7b", 4096),
    _opt("13b", 5120),
    _opt("30b", 7168),
    _opt("66b", 9216),
    # --- EleutherAI GPT-Neo -----------------------------------------------------
    {"name": "gpt-neo-125m", "repo_id": "EleutherAI/gpt-neo-125m", "family": "gpt-neo", "d_model": 768},
    {"name": "gpt-neo-1.3b", "repo_id": "EleutherAI/gpt-neo-1.3B", "family": "gpt-neo", "d_model": 2048},
    {"name": "gpt-neo-2.7b", "repo_id": "EleutherAI/gpt-neo-2.7B", "family": "gpt-neo", "d_model": 2560},
    # --- BERT-family encoders ----------------------------------------------------
    {
        "name": "bert-base-uncased",
        "repo_id": "google-bert/bert-base-uncased",
        "family": "bert",
        "d_model": 768,
    },
    {"name": "bert-base-cased", "repo_id": "google-bert/bert-base-cased", "family": "bert", "d_model": 768},
    {
        "name": "bert-large-uncased",
        "repo_id": "google-bert/bert-large-uncased",
        "family": "bert",
        "d_model": 1024,
    },
    {
        "name": "bert-large-cased",
        "repo_id": "google-bert/bert-large-cased",
        "family": "bert",
        "d_model": 1024,
    },
    {"name": "roberta-base", "repo_id": "FacebookAI/roberta-base", "family": "roberta", "d_model": 768},
    {"name": "roberta-large", "repo_id": "FacebookAI/roberta-large", "family": "roberta", "d_model": 1024},
    {
        "name": "distilbert-base-uncased",
        "repo_id": "distilbert/distilbert-base-uncased",
        "family": "distilbert",
    },
    {"name": "distilbert-base-cased", "repo_id": "distilbert/distilbert-base-cased", "family": "distilbert"},
]
