# embedperf — `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV    ?= .venv
PY      := $(VENV)/bin/python
EP      := $(VENV)/bin/embedperf
STAMP   := $(VENV)/.setup-stamp
PROFILE ?= quick
RUNS    ?= runs
HOST    ?= 127.0.0.1
PORT    ?= 8086
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: help setup system-deps serve test lint bench bench-service bench-recorder bench-collectors \
        bench-report report compare capacity matrix precision clean

help: ## show this help
	@echo "embedperf: load testing and benchmarking for embedding inference services"
	@echo
	@echo "First time? 'make bench' (sets everything up, runs a quick ramp, prints the report path)"
	@echo "and 'make test'. Variables: PROFILE=quick|full RUN=runs/<id> BASE=.. CAND=.. PORT=8086"
	@echo
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*## "}{printf "  %-18s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

setup: $(STAMP) ## create .venv and install everything (quick when already done)

system-deps: ## install Debian packages the tests need (chromium, prometheus, a CJK font) when missing
	@missing=""; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	test -e /usr/share/fonts/truetype/wqy/wqy-zenhei.ttc || missing="$$missing fonts-wqy-zenhei"; \
	command -v prometheus >/dev/null || test -x /usr/bin/prometheus || missing="$$missing prometheus"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing:$$missing"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null) \
	      || { echo "apt-get could not install$$missing"; exit 1; }; \
	  else echo "missing system packages:$$missing — install them with: sudo apt-get install$$missing"; exit 1; fi; \
	fi

serve: setup ## start the reference service on $(HOST):$(PORT) (Ctrl-C stops it)
	$(EP) serve --host $(HOST) --port $(PORT)

test: setup system-deps ## run every test (unit, integration, e2e)
	$(PY) -m pytest -q tests

lint: setup ## ruff and mypy
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

bench: setup ## start the service, run the ramp (PROFILE=quick|full), stop it, write and print the report
	$(EP) bench --profile $(PROFILE) --runs-dir $(RUNS) --port $(PORT)

report: setup ## build report.html for the newest run (or RUN=runs/<id>)
	$(EP) report $(if $(RUN),$(RUN),--latest --runs-dir $(RUNS))

compare: setup ## compare BASE=runs/<id> with CAND=runs/<id> [GATE="p99_ms:+5%,qps:-3%"]
	@test -n "$(BASE)" -a -n "$(CAND)" || { echo "usage: make compare BASE=runs/<id> CAND=runs/<id> [GATE=...]"; exit 2; }
	$(EP) compare $(BASE) $(CAND) $(if $(GATE),--gate "$(GATE)")

capacity: setup ## capacity plan for RUN (SLO_P99_MS=300 TARGET_QPS=1000 HEADROOM=0.25)
	$(EP) capacity $(if $(RUN),$(RUN),--latest --runs-dir $(RUNS)) --slo-p99-ms $(or $(SLO_P99_MS),300) \
	  --target-qps $(or $(TARGET_QPS),1000) --headroom $(or $(HEADROOM),0.25)

matrix: setup ## optimisation before/after matrix (scenarios/optimizations.yaml)
	$(EP) matrix scenarios/optimizations.yaml --profile $(PROFILE) --runs-dir $(RUNS)

precision: setup ## int8 (all layers, attention only) and bf16 embeddings against fp32; each prints PASS/FAIL
	-$(EP) precision --precision int8
	-$(EP) precision --precision int8 --int8-exclude 'output\.dense|intermediate'
	-$(EP) precision --precision bf16

bench-service: setup ## service benchmark: offline ceiling vs QPS/P50/P99 at 1/10/50/100 clients, batching off/on
	$(PY) benchmarks/bench_service.py

bench-recorder: setup ## recorder cost and accuracy benchmark
	$(PY) benchmarks/bench_recorder.py

bench-collectors: setup ## collector drift, jitter and CPU benchmark
	$(PY) benchmarks/bench_collectors.py

bench-report: setup ## 1,000,000-request synthetic run -> report time and peak memory
	$(PY) benchmarks/bench_report.py

clean: ## remove caches (keeps .venv and runs/)
	rm -rf .pytest_cache .mypy_cache .ruff_cache build *.egg-info
