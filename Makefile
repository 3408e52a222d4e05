# Set-up from a fresh clone: `make test` (tests) and `make run` (the main job).
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.PHONY: venv run test lint bench report clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first, pinned exactly: this machine's pip has a local CPU wheel for 2.13.0;
	# anything looser downloads several GB of CUDA packages.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dashboard,validation,dev]'
	touch $(STAMP)

venv: $(STAMP)

# the dashboard, on http://127.0.0.1:8501 (dashboard/.streamlit/config.toml holds the same)
run: $(STAMP)
	$(BIN)/streamlit run dashboard/app.py --server.address 127.0.0.1 --server.port 8501 \
		--server.headless true --browser.gatherUsageStats false

# the CLI report the first issue shipped as `make run`
report: $(STAMP)
	$(BIN)/kvcalc show llama-3-70b
	$(BIN)/kvcalc kv llama-3-70b --seq 8192

test: $(STAMP)
	$(BIN)/python -m pytest -q -n auto

lint: $(STAMP)
	$(BIN)/ruff check calc dashboard tests benchmarks
	$(BIN)/ruff format --check calc dashboard tests benchmarks

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_core.py
	$(BIN)/python benchmarks/bench_cli.py
	$(BIN)/python benchmarks/bench_capacity.py
	$(BIN)/python benchmarks/bench_dashboard.py
	$(BIN)/python benchmarks/bench_quant.py

clean:
	rm -rf $(VENV) build *.egg-info
