"""Evaluation: measures, per-query values and their aggregation, statistics, dev/test selection, paired comparisons."""
