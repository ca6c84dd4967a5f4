"""The study layer, split by job; the notebooks call these modules.

- `params`: the notebooks' one parameter contract and its checks;
- `tables`: relevance (Table 1), instruction following (Table 2), sensitivity (Table 3),
  the paper's published rows;
- `hybrid_study`: the facet-hybrid experiment and its verdict;
- `prompt_selection`: Promptriever-style prompt selection on CSFCube's folds;
- `findings`: the paper's three findings from the built tables;
- `tradeoff`: relevance against instruction following (points and figure);
- `figures`: deterministic saving of tables and figures, the tables' plots.

The HTML report of the executed notebooks is `evalkit.pages.report`.
"""
