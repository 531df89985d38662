# ClinTrace Kit. `make help` lists every target.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TORCH := torch==2.13.0
NB_TIMEOUT ?= 900

.DEFAULT_GOAL := help
.PHONY: help install reproduce test lint format unit pipeline-quick synth cohort dialogues \
        questions strategies run pipeline notebooks bench-cohort bench-strategies bench-harness lab \
        app-dialogues clean clean-build

help: ## list every target with a one-line description
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*## "}{printf "  %-16s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch first and pinned: unpinned, pip pulls a multi-GB CUDA build
	$(BIN)/python -m pip install --quiet $(TORCH)
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP) ## create .venv and install the kit with everything it needs

reproduce: install ## the main job: whole pipeline + every notebook on the paper profile (synthetic, offline)
	$(BIN)/clintrace reproduce --profile paper

test: install lint pipeline-quick ## lint, build the quick profile, run unit tests and every notebook
	CLINTRACE_PROFILE=quick $(BIN)/python -m pytest -q tests -p no:cacheprovider
	# every notebook, two kernels at a time (nbmake runs them one by one); exit 1 if any fails
	$(BIN)/clintrace notebooks --profile quick --timeout $(NB_TIMEOUT)

lint: install ## ruff check + ruff format --check over clinlib/ and tests/
	$(BIN)/ruff check clinlib tests
	$(BIN)/ruff format --check clinlib tests

format: install ## apply ruff format and safe fixes
	$(BIN)/ruff format clinlib tests
	$(BIN)/ruff check --fix clinlib tests

unit: install ## unit tests only (no notebooks)
	CLINTRACE_PROFILE=quick $(BIN)/python -m pytest -q tests

pipeline-quick: install ## build every stage on the quick profile
	$(BIN)/clintrace pipeline --profile quick

synth: install ## synthetic MIMIC-IV-shaped hosp tables (PROFILE=quick|paper)
	$(BIN)/clintrace synth --profile $(or $(PROFILE),quick)

cohort: install ## cohort, attrition and events (PROFILE=...)
	$(BIN)/clintrace cohort --profile $(or $(PROFILE),quick)

dialogues: install ## dialogues + verifier (PROFILE=...)
	$(BIN)/clintrace dialogues --profile $(or $(PROFILE),quick)

questions: install ## T1-T9 questions + L0-L4 gates (PROFILE=...)
	$(BIN)/clintrace questions --profile $(or $(PROFILE),quick)

strategies: install ## build every history representation (PROFILE=...)
	$(BIN)/clintrace strategies --profile $(or $(PROFILE),quick)

run: install ## evaluate the offline readers over every strategy (PROFILE=...)
	$(BIN)/clintrace run --profile $(or $(PROFILE),quick) --backbones reference,eager --settings post,pre \
	  --strategies no-context-blind,last-visit-only,full-context,dense-retrieval,structured-timeline,llm-summary,mem0,a-mem

pipeline: install ## every stage (PROFILE=...)
	$(BIN)/clintrace pipeline --profile $(or $(PROFILE),quick)

notebooks: install ## execute every notebook on PROFILE (outputs under data/build/<profile>/notebooks)
	$(BIN)/clintrace notebooks --profile $(or $(PROFILE),quick)

bench-cohort: install ## MIMIC-scale synthetic data (364,627 patients) + cohort build, DuckDB vs pandas
	$(BIN)/python -m clinlib.bench.cohort

bench-strategies: install ## build every strategy cold then warm, then static vs MiniLM encoder: times and hit@k (PROFILE, default paper)
	$(BIN)/python -m clinlib.bench.strategies --profile $(or $(PROFILE),paper)

bench-harness: install ## harness vs bare openai SDK vs inspect_ai on a local 100 ms server; cached re-run
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python -m clinlib.bench.harness
	CLINTRACE_TIMING_TESTS=1 $(BIN)/python -m pytest -q tests/test_llm_throughput.py -p no:cacheprovider

lab: install ## open JupyterLab on the notebooks
	$(BIN)/jupyter lab notebooks

app-dialogues: install ## the marimo dialogue viewer
	$(BIN)/marimo run notebooks/apps/dialogue_viewer.py

clean-build: ## remove data/build (generated artifacts)
	rm -rf data/build

clean: clean-build ## remove generated artifacts and the venv
	rm -rf $(VENV) figures/*.png figures/*.svg
