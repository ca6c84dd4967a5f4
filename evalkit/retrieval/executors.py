"""Where a whole corpus is encoded and searched: in this process (`IN_PROCESS`, the default) or on
a Ray cluster (`evalkit.retrieval.ray_executor`, chosen per run: `executor_for`).

An executor does two things for `evalkit.retrieval.vector_index`, and neither changes a number:

- `encode_batches`: the index's batches (the corpus's distinct model inputs, a fixed number at a
  time: `evalkit.retrieval.vector_index.batch_plan`, the same whoever encodes them) encoded by the
  model alone, with no cache in between, and given back in corpus order, so the index commits
  them in order under its lock and its files are byte-identical whatever the executor and the
  worker count;
- `search`: each query's top ``k`` of the index; a cluster searches it shard by shard (a range
  of rows each) and merges each query's shard tops exactly
  (`evalkit.retrieval.exact_search.merge_top`: the kit's tie rule over their union; a document's
  score is a function of its own vector, so it is the same in a shard as in the whole index).

`describe` is what the run's sidecar records (the executor, its workers, the nodes' devices,
where the vectors went); it is no part of the run's key, except the device kind the documents
are encoded on where an executor's workers choose it themselves (`device_part`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np

from evalkit.core.extras import missing
from evalkit.data.collection import Document


class InProcess:
    """Everything in this process: each batch encoded when the index asks for it."""

    name = "local"

    def encode_batches(self, encode: Callable[[list[Document]], np.ndarray], batches: Iterable[list[Document]],
                       folder) -> Iterator[tuple[list[Document], np.ndarray]]:
        for batch in batches:  # as `evalkit.retrieval.vector_index` does without an executor
            yield batch, encode(batch)

    def search(self, index, queries: np.ndarray, k: int, exclude: Sequence[str | None], metric: str,
               similarity) -> list[dict[str, float]]:
        return index.search(queries, k, exclude, metric, similarity)

    def encoding_device(self) -> str | None:
        """None: the documents are encoded by the model as built here, on its own device."""
        return None

    def describe(self) -> dict:
        return {"executor": self.name}

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


IN_PROCESS = InProcess()


def device_part(executor) -> dict:
    """What the run's key and the corpus index's key add for where the documents are encoded:
    ``{"device": kind}`` when the executor's workers choose their device themselves and it is not
    the CPU (a Ray worker on a GPU: GPU kernels change the last bits of a vector), else nothing, so
    an in-process run and a run of CPU workers (byte-identical to it) keep one key and one index."""
    kind = executor.encoding_device()
    return {} if kind in (None, "cpu") else {"device": kind}


def executor_for(name: str, workers: int | None = None):
    """The executor a run asked for (checked by `evalkit.pipeline.settings.check_execution`):
    `IN_PROCESS`, or a Ray executor that starts (or joins) its cluster when first used."""
    if name == "local":
        return IN_PROCESS
    try:  # lazy: ray is an optional extra, imported only when a run asks for it
        from evalkit.retrieval import ray_executor
    except ImportError as exc:
        found = missing(exc, "the Ray executor")
        if found is None:
            raise
        raise found from None
    return ray_executor.RayExecutor(workers)
