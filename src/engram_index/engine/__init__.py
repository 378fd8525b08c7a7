"""The search engine: analyzer, keyword (BM25) and vector indexes, fusion and explanations.

Nothing here knows of HTTP or the AT Protocol: documents are generic (text fields, tags,
metadata, timestamps, a vector), so that several APIs can stand on the same engine.
"""
