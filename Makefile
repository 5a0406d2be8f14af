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
ifeq ($(TORCH),0)
INSTALL = $(BIN)/python -m pip install -q -c requirements.lock -e '.[workflow,dev]'
else
INSTALL = $(BIN)/python -m pip install -q -r requirements.lock && \
	$(BIN)/python -m pip install -q --no-deps -e .
endif

# make installs only into a venv it created for this clone: creating one, it writes the
# clone's folder into $(OWNER). A venv without that mark (a link to another clone's venv, one
# made by hand) or with another folder in it is used as it is: nothing is installed into it,
# so a shared venv's editable install keeps pointing where its owner put it. A venv made by an
# earlier Makefile (no mark, not a link, its editable gradsched this clone) is adopted.
OWNER := $(VENV)/.gradsched-owner
HERE := $(shell pwd -P)

$(STAMP): requirements.lock pyproject.toml
	@set -e; \
	if [ ! -e $(VENV) ] && [ ! -L $(VENV) ]; then \
	  $(PYTHON) -m venv $(VENV); echo "$(HERE)" > $(OWNER); \
	elif [ ! -L $(VENV) ] && [ ! -f $(OWNER) ] && [ -x $(BIN)/python ] && \
	  [ "$$($(BIN)/python tools/venv_editable_root.py 2>/dev/null)" = "$(HERE)" ]; then \
	  echo "$(HERE)" > $(OWNER); fi; \
	if [ "$$(cat $(OWNER) 2>/dev/null)" != "$(HERE)" ]; then \
	  test -x $(BIN)/python || { echo "error: $(VENV) has no bin/python (remove it and run" \
	    "make env to create one)" >&2; exit 1; }; \
	  echo "$(VENV): not created by make for this clone (a link or another's venv): used as" \
	    "it is, nothing installed into it (remove it to let make create one)"; \
	  exit 0; fi; \
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV); \
	echo "$(VENV): installing the pinned environment (requirements.lock) for $(HERE)"; \
	$(BIN)/python -m pip install -q --upgrade pip; \
	$(INSTALL); \
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

## Tests: lint (ruff, snakefmt), the whole suite, and the paper build (TeX and poppler are
## installed first where possible).
test: $(STAMP) tex
	$(BIN)/ruff check src tests benchmarks workflow/scripts
	$(BIN)/snakefmt --check Snakefile workflow/rules
	$(BIN)/python -m pytest -n $(CORES) -q

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks workflow/scripts
	$(BIN)/snakefmt --check Snakefile workflow/rules

## TeX for the paper and poppler-utils for its legibility tests (pdftohtml, pdftotext, pdfinfo,
## pdftoppm): installed with apt when missing and we are root; otherwise no PDF, and the tests
## that need them skip (CI, which sets GRADSCHED_CI=1, fails instead), with a message saying how.
TEX_PACKAGES := latexmk texlive-latex-recommended texlive-fonts-recommended poppler-utils
tex:
	@if ! command -v latexmk >/dev/null 2>&1 || ! command -v pdftohtml >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing TeX and poppler-utils ($(TEX_PACKAGES))"; \
	    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	      $(TEX_PACKAGES) >/dev/null \
	      || echo "warning: TeX/poppler could not be installed: no paper/main.pdf, legibility tests skip"; \
	  else echo "warning: latexmk or pdftohtml missing and not root: no paper/main.pdf, and the"; \
	    echo "  legibility tests skip. To get them: sudo apt-get install $(TEX_PACKAGES)"; \
	    echo "  (or any TeX Live with latexmk, and poppler), then: make reproduce"; fi; \
	fi

smoke: $(STAMP)
	$(BIN)/snakemake --profile profiles/default smoke

bench: $(STAMP)
	$(BIN)/python -m pytest benchmarks --benchmark-only -q

clean-results:
	rm -rf results logs
