# Two entry points: `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-slow bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[test]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/scorebayes demo --out demo-output

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 -p no:cacheprovider

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 -p no:cacheprovider -m slow

clean:
	rm -rf $(VENV) demo-output
