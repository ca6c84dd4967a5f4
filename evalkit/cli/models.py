"""`evalkit models`: the models of a profile."""

from __future__ import annotations

import argparse


def cmd_models(args: argparse.Namespace) -> None:
    # lazy: loaded only when this command runs (start-up cost, tests/kit/test_imports.py)
    from evalkit.models import registry

    for name in registry.model_names(args.profile):
        model = registry.spec(name, args.profile)
        print(f"{name}\t{model.family}\t{model.role}\t{model.label}")


def add_parser(command) -> None:
    """Add `evalkit models`, its options and its handler (`command` makes the subparser)."""
    models = command("models", "list the models of a profile")
    models.add_argument("--profile", default="offline")
    models.set_defaults(func=cmd_models)
