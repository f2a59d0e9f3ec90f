# The course's commands. `make lab` to learn, `make test` to check the whole course.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed
PROFILE ?= workshop
# INSTALLER=auto: uv (pinned in loaderlab/tools/install.py, put into .venv from the package index) where it can be
# had, else pip; INSTALLER=pip or INSTALLER=uv to choose. WHEELS=dir: install from that folder only, no index.
INSTALLER ?= auto
WHEELS ?=
INSTALL := $(PY) -m loaderlab.tools.install

.PHONY: help lab test data data-ci grade doctor hint quiz clean clean-all check-platforms wheelhouse progress watch reset reset-all scoreboard learner-copy playbook capstone league league-peers test-targets test-proofs test-pythons test-python storage storage-stop

$(INSTALLED): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(INSTALL) install --installer $(INSTALLER) $(if $(WHEELS),--wheels $(WHEELS)) --record $@

help:  ## every target with a line here, and what it does
	@sed -nE 's/^([a-z-]+):[^#]*## (.*)/  make \1: \2/p' $(firstword $(MAKEFILE_LIST))

lab: $(INSTALLED) data  ## set up, make the data, open JupyterLab on notebooks/
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks $(if $(filter 0,$(shell id -u)),--allow-root)

data: $(INSTALLED)  ## the dataset for PROFILE (default workshop); nothing to do if it is there
	$(PY) -m data_gen --profile $(PROFILE)
	$(PY) -m data_gen --profile $(PROFILE) --imbalance 10

data-ci: PROFILE = ci
data-ci: data  ## the small dataset the tests use: `make data PROFILE=ci`

grade: $(INSTALLED)  ## grade your exercises [EX=ex11: that one only] [NAME="your name": saved with your results, for an instructor]
	$(if $(EX),$(if $(wildcard grader/test_$(EX)_*.py grader/test_$(EX).py),,$(error EX=$(EX) names no exercise; choose one of: $(foreach f,$(wildcard grader/test_ex*.py),$(word 2,$(subst _, ,$(notdir $f)))))))
	$(if $(NAME),LOADERLAB_LEARNER="$(NAME)") $(PY) -m pytest $(if $(EX),$(wildcard grader/test_$(EX)_*.py grader/test_$(EX).py),grader/)

progress: $(INSTALLED)  ## where you are: every exercise and step from your saved grades, and what to do next
	$(PY) -m grader.progress

capstone: $(INSTALLED)  ## train your exercise-11 script for the profile's full epoch budget: time to accuracy, images/s and data stall per epoch, saved to .grader/capstone.json
	$(PY) -m grader.capstone

league: $(INSTALLED) data  ## the league table on PROFILE's data: the course's loaders beside torchvision, tf.data, webdataset, OpenCV, torchcodec, SPDL and DALI (the last three after `make league-peers`) and two decode-only ceilings (.grader/league.json and .png); SOURCE=s3: from module 10's S3 server through the `region` proxy, beside the naive per-object DataLoader, webdataset over HTTP, obstore and s3torchconnector (.grader/league-s3.json and .png)
	LOADERLAB_PROFILE=$(PROFILE) $(PY) -m league $(if $(SOURCE),--source $(SOURCE))

# The league's optional peers live in requirements-peers.txt (DALI: a 424 MB wheel, Linux only; SPDL: FFmpeg's libraries
# from the system), out of the lock.
league-peers: $(INSTALLED)  ## the league's optional peers (requirements-peers.txt): NVIDIA DALI (Linux only), torchcodec, SPDL (needs FFmpeg 4-8), s3torchconnector (Linux only)
	$(INSTALL) install -r requirements-peers.txt --installer $(INSTALLER)

playbook: $(INSTALLED)  ## the page you keep: this machine, your measured figures per module, the capstone's run (.grader/playbook.md and .html)
	$(PY) -m grader.playbook

watch: $(INSTALLED)  ## make watch EX=ex02: re-grade that exercise on every save (Ctrl-C stops)
	$(PY) -m grader.watch $(EX)

reset: $(INSTALLED)  ## make reset EX=ex02: put the stub back and clear its grades (asks first)
	$(PY) -m grader.reset $(EX)

reset-all: $(INSTALLED)  ## every exercise back to its stub, every grade cleared (asks first)
	$(PY) -m grader.reset --all

scoreboard: $(INSTALLED)  ## make scoreboard DIR=folder: a room's results files as one HTML page and Markdown
	$(PY) -m grader.collect $(DIR)

learner-copy: $(INSTALLED)  ## make learner-copy DEST=folder: the course without solutions/, ready to hand out
	$(PY) -m grader.learner_copy $(DEST)

doctor: $(INSTALLED)  ## what this machine offers, and what will hurt
	$(PY) -m loaderlab.tools.doctor

check-platforms: $(INSTALLED)  ## the lock resolves to binary wheels on Linux x86-64 and aarch64, macOS arm64, Windows (needs the index)
	$(INSTALL) check-platforms

wheelhouse:  ## make wheelhouse [WHEELS=dir]: every pinned wheel for this platform, for `make lab WHEELS=dir` offline
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(INSTALL) wheelhouse $(or $(WHEELS),wheelhouse)

hint: $(INSTALLED)  ## make hint EX=ex02 [LEVEL=2] [CHECK=a_check_the_grade_named]
	$(PY) -m grader.hints $(EX) "$(LEVEL)" $(CHECK)

storage: $(INSTALLED)  ## module 10's S3 server (SeaweedFS, on 127.0.0.1 only) kept running for notebooks and grades: prints where it answers; its data stays in data/storage/
	$(PY) -m loaderlab.storage.server start

storage-stop: $(INSTALLED)  ## stop the S3 server `make storage` started
	$(PY) -m loaderlab.storage.server stop

quiz: $(INSTALLED)  ## make quiz M=04: the module's self-check questions, graded here
	$(PY) -m grader.quiz $(M)

# `make test`: the phases of tests/phases.py (each declared once there: what it selects, how many at a time, where),
# after a hand-out (`make learner-copy`, beside the checkout; HANDOUT=dir to choose where). Every phase runs even
# when one fails; each phase's time is printed and written to .grader/phases.txt; the run fails if any phase did.
RUN_PHASES := $(PY) -m tests.phases

test: $(INSTALLED) data-ci  ## the whole suite, as CI runs it
	$(RUN_PHASES) --phases course $(if $(HANDOUT),--handout $(HANDOUT))

# Run when `make test` says a proof is stale (tests/phases.py: TARGETS and PROOFS; tests/proofs.py), and commit the record.
test-targets: $(INSTALLED) data-ci  ## prove the timed targets, one at a time: planted slow implementations miss them, correct alternatives meet them; records each proof (tests/target-proofs.json)
	$(RUN_PHASES) --phases targets --record .grader/targets.txt

test-proofs: $(INSTALLED) data-ci  ## re-run every correctness proof (each planted wrong implementation fails its check, each correct alternative passes) and record it (tests/correctness-proofs.json); `make test` re-runs only those whose code changed
	$(RUN_PHASES) --phases proofs --record .grader/proofs.txt

# The course on other Pythons (README "Platforms"), outside `make test`: for each of PYTHONS (a version, found as
# pythonX.Y on PATH or with `pyenv prefix`, or an interpreter's path) a venv of its own, .venv-pyX.Y, gets the lock
# from the same installer, then runs the graders' correctness checks on solutions/ and every notebook, as `make
# test`'s untimed phases do. `make test-python VENV=.venv-py3.12 PYTHON=...` does one of them.
PYTHONS ?= 3.12 3.13
PYTHONS_RECORD := .grader/pythons.txt
test-pythons:  ## make test-pythons [PYTHONS="3.12 3.13"]: install into .venv-pyX.Y and run the graders on solutions/ and the notebooks there
	@mkdir -p .grader; : > $(PYTHONS_RECORD); failed=""; \
	for want in $(PYTHONS); do \
	  py=$$want; case $$want in */*) ;; *) py=python$$want; $$py -c '' 2>/dev/null || py=$$(pyenv prefix $$want 2>/dev/null)/bin/python;; esac; \
	  version=$$($$py -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) || { echo "  no Python $$want here" >> $(PYTHONS_RECORD); failed="$$failed $$want"; continue; }; \
	  $(MAKE) --no-print-directory test-python VENV=.venv-py$$version PYTHON=$$py || failed="$$failed $$want"; \
	done; echo; echo "make test-pythons, time by phase:"; cat $(PYTHONS_RECORD); \
	if [ -n "$$failed" ]; then echo "FAILED:$$failed"; exit 1; fi; echo "all passed"

test-python: $(INSTALLED) data-ci
	$(RUN_PHASES) --phases python --label $(VENV) --installed $(INSTALLED) --record $(PYTHONS_RECORD) --append

clean:  ## generated data (the S3 server's data folders in data/storage/ too), grades and caches (keeps .venv); stops `make storage`'s server first
	if [ -x $(PY) ]; then $(PY) -m loaderlab.storage.server stop; fi
	rm -rf data .grader .pytest_cache
	find . -name __pycache__ -prune -exec rm -rf {} +

clean-all: clean  ## also the virtual environment
	rm -rf $(VENV) .venv-py*
