"""make's front end: what the Makefile runs around the study notebooks.

- `launch`: runs one notebook headlessly under papermill with the parameters make exported, and
  turns a failure into the kit's one line;
- `budget`: what `make all` will compute and how long it should take, then what each stage took.

Like the CLI, it sits above the study layer: the notebooks and `evalkit.study` never import it.
"""
