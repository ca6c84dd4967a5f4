"""Model families: each turns a registry entry (`evalkit.models.registry`) into a `Scorer`
(`evalkit.models.base`): BM25, dense encoders, the paper's models, LLM rerankers, a user's objects."""
