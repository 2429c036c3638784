"""GGUF files (llama.cpp's format) as checkpoints: the header, the config through transformers, the tensors.

:mod:`~pos_geometry.sources.gguf.header` parses the header (metadata and where each tensor's bytes lie);
:mod:`~pos_geometry.sources.gguf.config` builds the transformers config from the metadata;
:mod:`~pos_geometry.sources.gguf.checkpoint` reads tensors under their transformers names, through
transformers' own tensor processors; :mod:`~pos_geometry.sources.gguf.opening` opens a local, cached or hub
file; :mod:`~pos_geometry.sources.gguf.model` builds a transformers model from one without dequantising twice.
"""
