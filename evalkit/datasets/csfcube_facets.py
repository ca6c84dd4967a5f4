"""CSFCube's facets and the sentence labels that map onto them: read by the release's loader
(`evalkit.datasets.csfcube`), the corpus reader (`csfcube_corpus`) and the instruction variants
(`csfcube_variants`) alike, so none of them imports another for them."""

FACETS = ("background", "method", "result")
# Sentence labels in readable_annotations; `objective` counts as background.
LABEL_TO_FACET = {
    "background": "background",
    "objective": "background",
    "method": "method",
    "result": "result",
    "other": "other",
}
