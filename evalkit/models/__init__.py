"""Models as scorers (`evalkit.models.base`): BM25, dense encoders, the paper's models, LLM rerankers,
a user's objects; their families, each declared in one module of `evalkit.models.families`
(`evalkit.models.family`), and the registry that turns an entry into a scorer (`evalkit.models.registry`)."""
