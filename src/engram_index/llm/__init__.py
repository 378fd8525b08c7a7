"""LLM clients (OpenAI-compatible: Ollama, vLLM and llama.cpp servers speak it) and what the faces ask of them."""
