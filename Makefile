# regtriage: the two commands a newcomer needs.
#   make demo   set everything up and run the main job on bundled data (SQLite default)
#   make test   install what the tests need (system packages too) and run the whole suite
PYTHON ?= python3
VENV   ?= .venv
PIP     = $(VENV)/bin/pip
BIN     = $(VENV)/bin
# Debian packages the test suite starts for real (public-inbox server, ...).
SYSTEM_PACKAGES = public-inbox git $(shell cat tests/system-packages.txt 2>/dev/null)

.PHONY: demo test install install-test system-deps bench model clean

$(VENV)/.installed: setup.cfg pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -c constraints.txt -e '.[test]'
	touch $@

install: $(VENV)/.installed

# The demo keeps its own state (database, outbox) under .demo/, never in the default
# $$REGTRIAGE_HOME the real bot uses; --db wins over $$REGTRIAGE_DB too.
DEMO_HOME ?= $(CURDIR)/.demo
DEMO = REGTRIAGE_HOME="$(DEMO_HOME)" $(BIN)/regtriage --config deploy/demo.toml --db "sqlite:///$(DEMO_HOME)/regtriage.sqlite3"
DEMO_RECORD = $$($(DEMO) query 'open regressions in mm/' --json | $(BIN)/python -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')

demo: install
	@echo "== demo state in $(DEMO_HOME) (make clean removes it)"
	@echo "== ingest the bundled real kernel-list messages (claims are extracted and tracked on the way)"
	$(DEMO) ingest tests/data/corpus tests/data/threads
	@echo "== threads"
	$(DEMO) threads --limit 10
	@echo "== regression records: open regressions in fs/"
	$(DEMO) query "open regressions in fs/"
	@echo "== one record with its evidence and history"
	$(DEMO) show "$(DEMO_RECORD)"
	@echo "== the reply the bot would post on the report's thread (printed, not sent)"
	$(DEMO) reply "$(DEMO_RECORD)" --stdout
	@echo "== would the demo lab (one local QEMU machine) rerun it? (the reasons when not)"
	-$(DEMO) lab match "$(DEMO_RECORD)"
	-$(DEMO) lab plan "$(DEMO_RECORD)"
	@echo "== builds from a kernel tree with TuxMake: Debian's linux-source-6.1 in git (+ a slow commit), a report about it"
	@if [ -f /usr/src/linux-source-6.1.tar.xz ]; then \
	  $(BIN)/python tests/linux_tree.py >/dev/null && \
	  $(BIN)/python tests/linux_tree.py --demo-report > "$(DEMO_HOME)/syscall-report.eml" && \
	  $(DEMO) ingest "$(DEMO_HOME)/syscall-report.eml" >/dev/null && \
	  rid=$$($(DEMO) query "write_null" --json | $(BIN)/python -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])') && \
	  $(DEMO) lab plan "$$rid"; \
	  echo "== to build both kernels (a few minutes each with 2 cores; cached, ccache):"; \
	  echo '   $(DEMO) lab build <commit>   (the two commits above)'; \
	  echo '   $(DEMO) rerun '"$$rid"' --wait   (builds, boots both under QEMU, judges)'; \
	else echo "(apt-get install linux-source-6.1 for this part)"; fi

system-deps:
	@missing=""; for p in $(SYSTEM_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  SUDO=""; [ "$$(id -u)" -eq 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

# Under CI ($$CI set) the real LAVA test runs too (it installs lava-server + lava-dispatcher from
# Debian the first time: ~5 min); elsewhere it is opt-in: REGTRIAGE_LAVA=1 make test, or
# tests/run-lava-tests.sh on its own.
test: system-deps install
	REGTRIAGE_LAVA=$${REGTRIAGE_LAVA:-$${CI:+1}} $(BIN)/python -m pytest -q

# retrain the extractor's decision models from bench/corpus/train (seeded, reproducible);
# writes extractors/data/model.json, which ships with the package
model: install
	$(BIN)/python bench/train_model.py

bench: install
	$(BIN)/python bench/ingest.py
	$(BIN)/python bench/hostile.py
	$(BIN)/python bench/accuracy.py
	$(BIN)/python bench/extract_speed.py
	$(BIN)/python bench/stats_power.py

clean:
	rm -rf $(VENV) build *.egg-info .demo
