"""The kit inside other tools: CSFCube as mteb tasks, runs and judgments as ranx and ir_measures objects,
collections and models in PyTerrier.

- `evalkit.integrations.mteb`: `csfcube_tasks()`, CSFCube's facet-instructed reranking of the
  judged pools (and its instruction pairs for p-MRR) as mteb task objects, so
  ``mteb.evaluate(model, tasks=csfcube_tasks())`` runs it;
- `evalkit.integrations.ranx`: `to_ranx(run, collection)`, ranx ``Qrels`` and ``Run``;
- `evalkit.integrations.ir_measures`: `to_ir_measures(run, collection)`, the ``Qrel`` /
  ``ScoredDoc`` iterables ir_measures evaluates;
- `evalkit.integrations.pyterrier`: `dataset(collection)`, a collection as a PyTerrier dataset
  whose ``retriever(model)`` and ``reranker(model)`` are any kit model as PyTerrier transformers
  (built by the kit's runner, ranked by its tie rule), for ``pt.Experiment``;
- `evalkit.integrations.library_input`: what every one of them is handed (the judgments a
  protocol scores against, a run's scores along the kit's ranking).

Nothing here is imported by ``import evalkit``: each module imports its library (mteb, ranx) at
its top, so importing the module is the choice to load that library.
"""
