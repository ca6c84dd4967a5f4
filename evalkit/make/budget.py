"""What `make all` will compute and how long it should take, then what each stage took.

At its start `make all` prints (``python -m evalkit.make.budget start TAG``) the stages it runs
with their models, the work (texts to encode, LLM prompts) and an estimate of its wall time on
this machine, saying where the estimate comes from:

- this machine's floor, when ``bench/bench_floor.py --record`` measured it (`floor_file`:
  ``$EVALKIT_FLOOR``, else ``~/.cache/evalkit/floor.json``) for the same build tag: the texts and
  prompts a cold `make all` computed, the library's own time for them (the floor) and, when
  recorded with ``--make-all-s``, that run's wall time over the floor (the ratio);
- else `evalkit plan`'s cost table (``config/costs.yaml`` rates, each row counted on its own
  although rows share cached vectors, so an upper bound).

The launcher writes each notebook's wall time to ``OUTPUT_DIR/timings/NOTEBOOK-TAG.json``
(`write_stage_time`), never into a table or a notebook, so the tables stay byte-identical; at
its end `make all` prints them (``... end TAG``) with the total since the start and the rest
(data check, the two reference tables, the report, make itself). A stage up to date (not rerun)
is shown as such.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import yaml

from evalkit.core.workspace import resolve

TIMINGS = "timings"
START = "all-{tag}.start"
MODELS_FILE = Path(__file__).resolve().parents[1] / "config" / "models.yaml"


def floor_file() -> Path:
    """This machine's floor record (bench/bench_floor.py --record)."""
    given = os.environ.get("EVALKIT_FLOOR")
    return Path(given) if given else Path.home() / ".cache" / "evalkit" / "floor.json"


def timings_dir(output_dir: str) -> Path:
    return resolve(output_dir or "build") / TIMINGS


def write_stage_time(output_dir: str, stem: str, seconds: float) -> None:
    """Record a stage's wall time (temp file, then rename): OUTPUT_DIR/timings/STEM.json."""
    folder = timings_dir(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f"{stem}.json.tmp"
    tmp.write_text(json.dumps({"stage": stem, "seconds": round(seconds, 2), "ended": time.time()}) + "\n")
    tmp.replace(folder / f"{stem}.json")


def _study_lists(profile: str, models: str) -> dict[str, str]:
    try:
        study = yaml.safe_load(MODELS_FILE.read_text())["profiles"][profile].get("study") or {}
    except (KeyError, TypeError, OSError, yaml.YAMLError):  # an unknown profile fails in the notebook itself
        study = {}

    def listed(key: str) -> str:
        if models.strip():
            return models
        value = study.get(key, [])
        return ",".join(value) if isinstance(value, list | tuple) else str(value or "notebook default")

    return {"relevance": listed("relevance"), "instruction_following": listed("relevance"),
            "sensitivity": listed("sensitivity"), "hybrid": listed("hybrid"), "summary": "(the four tables)",
            "promptriever": listed("promptriever")}


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def _plan_work(profile: str, protocol: str, models: str, seeds: str) -> tuple[list[str], float]:
    """Work and estimate from `evalkit plan` (costs.yaml rates): lines and seconds."""
    from evalkit.datasets import csfcube  # the plan loads the registry (torch): only without a floor record
    from evalkit.pipeline import plan

    collection = csfcube.load_collection()
    chosen = [q for q in collection.queries if q.split("_")[0] in seeds.split(",")] if seeds.strip() else None
    names = [m.strip() for m in models.split(",") if m.strip()] or None
    result = plan.plan(profile, protocol, collection, names, chosen)
    texts = sum(r["texts"] for r in result["rows"])
    prompts = result["total"]["prompts"]
    return [f"  work: {texts:,} texts to encode over its rows (rows share cached vectors: fewer), "
            f"{prompts:,} LLM prompts"], result["total"]["hours"] * 3600


def start_lines(output_dir: str, tag: str, stems: list[str], profile: str, protocol: str, models: str = "",
                seeds: str = "") -> list[str]:
    """The start lines: the stages (executed notebooks' stems, NOTEBOOK-TAG, as make names them)
    with their models, the work and the estimate with its source."""
    lists = _study_lists(profile, models)
    lines = [f"make all: profile {profile}, protocol {protocol}, build tag {tag}"]
    for stem in stems:
        name = stem.split("-", 1)[0]
        pooled = "" if stem == f"{name}-{tag}" else " (pooled protocol)"
        lines.append(f"  stage {name}{pooled}: {lists.get(name, '')}")
    record = _floor_record(tag)
    if record is not None:
        texts, prompts = record["texts"], record.get("prompts", 0)
        rates, floor = record["rates"], record["floor_s"]
        lines.append(f"  work: {', '.join(f'{n:,} {kind}' for kind, n in texts.items())} to encode; "
                     f"{prompts:,} LLM prompts (what a cold make all of this tag computed here)")
        sample = f", scaled from every {record['every']}th text and query" if record.get("every", 1) > 1 else ""
        estimate = f"floor {_minutes(floor)} ({rates['texts_per_s']} texts/s, {rates['prompts_per_s']} prompts/s, " \
                   f"{rates['fixed_s']} s of imports and loads{sample})"
        if record.get("ratio"):
            estimate += f" x {record['ratio']} (the last measured make all over its floor) = " \
                        f"~{_minutes(floor * record['ratio'])} cold"
        lines.append(f"  estimate: {estimate}; from {floor_file()} (bench/bench_floor.py, load "
                     f"{record.get('load_before', ['?'])[0]} on {record.get('cpus', '?')} cores); "
                     "less for what is cached")
    else:
        work, seconds = _plan_work(profile, protocol, models, seeds)
        lines += work
        lines.append(f"  estimate: ~{_minutes(seconds)} cold, from evalkit plan's cost table (config/costs.yaml "
                     "rates, rows counted apart: an upper bound); run bench/bench_floor.py --record for this "
                     "machine's rates")
    folder = timings_dir(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / START.format(tag=tag)).write_text(f"{time.time()}\n")
    return lines


def _floor_record(tag: str) -> dict | None:
    try:
        record = json.loads(floor_file().read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("tag") != tag or not isinstance(record.get("rates"), dict):
        return None
    return record


def end_lines(output_dir: str, tag: str, stems: list[str]) -> list[str]:
    """Each stage's wall time (or 'up to date'), the rest and the total since the start."""
    folder = timings_dir(output_dir)
    try:
        started = float((folder / START.format(tag=tag)).read_text())
    except (OSError, ValueError):
        started = None
    total = time.time() - started if started is not None else None
    lines, ran = ["stage times:"], 0.0
    for stem in stems:
        try:
            stage = json.loads((folder / f"{stem}.json").read_text())
        except (OSError, ValueError):
            stage = None
        if stage is None or started is None or stage.get("ended", 0) < started:
            lines.append(f"  {stem:<46} up to date (not rerun)")
            continue
        ran += stage["seconds"]
        lines.append(f"  {stem:<46} {stage['seconds']:8.1f} s")
    if total is not None:
        lines.append(f"  {'other (data, reference tables, report, make)':<46} {max(total - ran, 0.0):8.1f} s")
        lines.append(f"  {'total':<46} {total:8.1f} s")
    return lines


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2 or argv[0] not in ("start", "end"):
        print("usage: python -m evalkit.make.budget start|end TAG STEM... (parameters in EVALKIT_PARAM_* variables)",
              file=sys.stderr)
        return 2
    env = os.environ
    output_dir, tag, stems = env.get("EVALKIT_PARAM_OUTPUT_DIR", "build"), argv[1], argv[2:]
    if argv[0] == "start":
        lines = start_lines(output_dir, tag, stems, env.get("EVALKIT_PARAM_PROFILE", "offline"),
                            env.get("EVALKIT_PARAM_PROTOCOL", "pool"), env.get("EVALKIT_PARAM_MODELS", ""),
                            env.get("EVALKIT_PARAM_SEEDS", ""))
    else:
        lines = end_lines(output_dir, tag, stems)
    print("\n".join(lines), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
