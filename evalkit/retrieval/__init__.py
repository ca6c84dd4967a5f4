"""Retrieval machinery shared by models: the embedding cache, the vector cache and whole-corpus top-k retrieval."""
