"""The study layer, split by job; the notebooks call these modules.

- `params`: the notebooks' one parameter contract and its checks;
- `steps`: the study API's steps (the collection, the runs, per-query values, aggregates, paired
  tests, intervals, Human and published rows);
- `tables`: relevance (Table 1), instruction following (Table 2), sensitivity (Table 3) assembled
  from the steps;
- `hybrid_study`: the facet-hybrid experiment's steps and its verdict;
- `prompt_selection`: Promptriever-style prompt selection on CSFCube's folds, step by step;
- `findings`: the paper's three findings from the built tables;
- `tradeoff`: relevance against instruction following (points and figure);
- `figures`: deterministic saving of tables and figures, the tables' plots.

The HTML report of the executed notebooks is `evalkit.pages.report`; make's launcher and budget are
`evalkit.make`, a front end above this layer.
"""
