# arXiv RAG Lab — every target creates/reuses .venv and installs from the project's own files.
PY      ?= python3
VENV    ?= .venv
PROFILE ?= default
# extra `rag report` flags, e.g. make report REPORT_ARGS=--force
REPORT_ARGS ?=
# extra bench-report flags, e.g. make bench-report BENCH_ARGS=--phases=cold,warm
BENCH_ARGS ?=
# llama-cpp-python compiles llama.cpp from source (PyPI has no wheel): skip its multimodal library
# (mtmd/llava), which nothing here loads; measured build 4 min 21 s on 2 cores without it
LLAMA_CMAKE_ARGS ?= -DLLAVA_BUILD=OFF
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.PHONY: setup report test test-slow judge judge-train calibrate bench bench-scale bench-sweep bench-rerank bench-report ict lab lint check-params clean-smoke

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS) $$CMAKE_ARGS" $(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,lab]'
	@touch $(STAMP)

setup: $(STAMP)  ## create .venv and install the project (CPU torch, offline models)

report: setup  ## run all notebooks on PROFILE (default: default) and render outputs/PROFILE/index.html
	$(BIN)/rag report --profile $(PROFILE) $(REPORT_ARGS)

test: setup  ## the offline test suite, smoke-profile notebooks included (what CI runs)
	$(BIN)/python -m pytest

test-slow: setup  ## real corpus / real models: the slow tier
	$(BIN)/python -m pytest -m slow

judge: setup  ## refit the offline judges on SciFact train (full + the smoke profile's 240 pairs) and pin them in data/judge/ (~3 min)
	$(BIN)/python -m rag.judge.pin

judge-train: setup  ## rebuild the entailment judge (nli-minilm-v1) from SciFact train + rule-made pairs and compare it with the pinned data/judge/ copy (~25-40 min on 2 cores; resumes)
	$(BIN)/rag judge train --check

calibrate: setup  ## rechoose 05's support threshold on its held-out questions (default profile) and pin it in data/calibration/ (~18 min from an empty cache, ~1 min warm, on 2 busy cores)
	$(BIN)/python -m rag.report.calibrate

bench: setup  ## throughput and latency benchmarks (not tests)
	$(BIN)/rag bench

bench-scale: setup  ## dense index kinds + BM25 + stage growth at 1x..100x the corpus -> outputs/bench/scale.json (heavy: ~1 h on 2 busy cores; resumes by size)
	nice -n 10 $(BIN)/rag bench scale

bench-sweep: setup  ## a 6-cell sweep of notebook 04 (smoke) serially vs 2 workers, warm caches -> outputs/bench/sweep_speed.json (~15 min; quiet machine)
	$(BIN)/python -m rag.bench.sweep_speed

bench-rerank: setup  ## offline rerankers vs hybrid on SciFact + corpus gold, with CIs (slow: e5 ~4 passages/s, cached)
	$(BIN)/python -m rag.bench.rerank

bench-report: setup  ## time `make report` from a fresh clone, cold (empty cache) then warm -> outputs/bench/report_timing.json (measured 37 min cold + 2 s warm, plus a forced warm run; quiet machine; BENCH_ARGS=--phases=cold,warm skips the forced one)
	$(BIN)/python -m rag.bench.report_timing $(BENCH_ARGS)

ict: setup  ## train the offline ICT cross-encoder reranker from MiniLM (no labels; ~20-30 min); use with -p reranker ict-minilm
	$(BIN)/rag train-ict

lab: setup  ## open the notebooks in JupyterLab
	$(BIN)/jupyter lab notebooks/

lint: setup
	$(BIN)/ruff check rag tests experiments notebooks

check-params: setup  ## every params/*.yaml key is declared by its notebook
	$(BIN)/rag check-params

clean-smoke:  ## forget the smoke report the tests keep in .test-outputs/: the next make test executes every notebook
	rm -rf .test-outputs
