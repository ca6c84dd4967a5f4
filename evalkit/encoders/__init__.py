"""Embedding models computed as their authors' reference code computes them."""
