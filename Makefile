# Two entry points: `make demo` and `make test`. Both create .venv on first use.
# `make docs` builds the documentation into site/ (installs the docs extra into .venv).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

DOCS_STAMP := $(VENV)/.docs-installed

.PHONY: demo test test-slow docs bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[test]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/scorebayes demo --out demo-output

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 -p no:cacheprovider

$(DOCS_STAMP): $(STAMP) pyproject.toml
	$(BIN)/pip install -q -e ".[docs]"
	touch $(DOCS_STAMP)

# --strict: a warning (a broken link, a docstring mkdocstrings cannot read) fails the build
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 -p no:cacheprovider -m slow

clean:
	rm -rf $(VENV) demo-output site
