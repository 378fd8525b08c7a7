"""Embedders: texts to the vectors a space's model gives, float16-exact and L2-normalised.

    base.py     the Embedder interface, document/query texts, `finish`, the embedder errors
    local.py    all-MiniLM-L6-v2 in-process on onnxruntime (packaged weights, digest-checked);
                minilm_graph.py builds its ONNX graph from the weights
    ollama.py   an Ollama server (/api/embed; the digest from /api/tags)
    openai.py   an OpenAI-compatible server (/v1/embeddings; the digest set by the operator)
    hashing.py  a deterministic feature-hashing embedder for tests
    remote.py   what the HTTP embedders share: bounded retries, answer checks

Providers are imported from their modules, so that importing this package loads neither the
model nor an HTTP client.
"""

from engram_index.embed.base import (
    DEFAULT_BATCH_SIZE,
    BadEmbedding,
    Embedder,
    EmbedderBusy,
    EmbedderError,
    EmbedderRejected,
    EmbedderUnavailable,
    ModelFilesError,
    document_text,
    finish,
    query_text,
)

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "BadEmbedding",
    "Embedder",
    "EmbedderBusy",
    "EmbedderError",
    "EmbedderRejected",
    "EmbedderUnavailable",
    "ModelFilesError",
    "document_text",
    "finish",
    "query_text",
]
