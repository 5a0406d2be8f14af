# gradsched: the two commands a fresh machine needs are `make reproduce` and `make test`.
# Both create the virtual environment (.venv) from the pinned lock file when it is missing.

SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.gradsched-installed
CORES ?= 2

.PHONY: reproduce test env lint tex smoke clean-results bench update-expected verify-outputs

env: $(STAMP)

# TORCH=0: a venv without torch (~0.5 GB instead of 6.2 GB with Linux's CUDA wheels), the same
# pins as constraints; enough for `make reproduce` (tiers 1-2), not for capture or re-execution.
TORCH ?= 1

$(STAMP): requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
ifeq ($(TORCH),0)
	$(BIN)/python -m pip install -q -c requirements.lock -e '.[workflow,dev]'
else
	$(BIN)/python -m pip install -q -r requirements.lock
	$(BIN)/python -m pip install -q --no-deps -e .
endif
	touch $(STAMP)

## Main job: replay the committed traces and regenerate every figure, table and the PDF (TeX is
## installed first where possible; without it everything but the PDF is made), then compare the
## outputs with paper/expected-outputs.sha256 (a report; STRICT=1 fails on any difference).
reproduce: $(STAMP) tex
	$(BIN)/snakemake --profile profiles/default all
	@$(MAKE) --no-print-directory verify-outputs

## The outputs against paper/expected-outputs.sha256: reproduced / differs / missing.
verify-outputs: $(STAMP)
	$(BIN)/python tools/verify_outputs.py $(if $(filter 1,$(STRICT)),--strict)

## Maintainers: rewrite paper/expected-outputs.sha256 and paper/expected/ (the results CSVs,
## gzip'd, that verify-outputs compares a differing CSV with) from the current outputs.
update-expected: $(STAMP)
	$(BIN)/python tools/verify_outputs.py --update

## Tests: lint, the whole suite, and the paper build (TeX is installed first where possible).
test: $(STAMP) tex
	$(BIN)/ruff check src tests benchmarks workflow/scripts
	$(BIN)/python -m pytest -n $(CORES) -q

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks workflow/scripts
	$(BIN)/snakefmt --check Snakefile workflow/rules

## TeX for the paper: installed with apt when missing and we are root; otherwise no PDF (and the
## paper test skips), with a message saying how to get it.
tex:
	@if ! command -v latexmk >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing TeX (latexmk, texlive-latex-recommended, texlive-fonts-recommended)"; \
	    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	      latexmk texlive-latex-recommended texlive-fonts-recommended >/dev/null \
	      || echo "warning: TeX could not be installed: no paper/main.pdf (the paper test skips)"; \
	  else echo "warning: latexmk missing and not root: no paper/main.pdf (the paper test skips)."; \
	    echo "  To get the PDF: sudo apt-get install latexmk texlive-latex-recommended texlive-fonts-recommended"; \
	    echo "  (or any TeX Live with latexmk), then: make reproduce"; fi; \
	fi

smoke: $(STAMP)
	$(BIN)/snakemake --profile profiles/default smoke

bench: $(STAMP)
	$(BIN)/python -m pytest benchmarks --benchmark-only -q

clean-results:
	rm -rf results logs
