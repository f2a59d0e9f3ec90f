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

.PHONY: lab test data data-ci grade doctor hint quiz clean clean-all check-platforms wheelhouse progress watch reset reset-all scoreboard learner-copy playbook capstone league league-peers test-alternatives test-pythons test-python

$(INSTALLED): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(INSTALL) install --installer $(INSTALLER) $(if $(WHEELS),--wheels $(WHEELS)) --record $@

lab: $(INSTALLED) data  ## set up, make the data, open JupyterLab on notebooks/
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks $(if $(filter 0,$(shell id -u)),--allow-root)

data: $(INSTALLED)  ## the dataset for PROFILE (default workshop); nothing to do if it is there
	$(PY) -m data_gen --profile $(PROFILE)
	$(PY) -m data_gen --profile $(PROFILE) --imbalance 10

data-ci: $(INSTALLED)
	$(PY) -m data_gen --profile ci
	$(PY) -m data_gen --profile ci --imbalance 10

grade: $(INSTALLED)  ## grade your exercises [EX=ex11: that one only] [NAME="your name": saved with your results, for an instructor]
	$(if $(EX),$(if $(wildcard grader/test_$(EX)_*.py grader/test_$(EX).py),,$(error EX=$(EX) names no exercise; choose one of: $(foreach f,$(wildcard grader/test_ex*.py),$(word 2,$(subst _, ,$(notdir $f)))))))
	$(if $(NAME),LOADERLAB_LEARNER="$(NAME)") $(PY) -m pytest $(if $(EX),$(wildcard grader/test_$(EX)_*.py grader/test_$(EX).py),grader/)

progress: $(INSTALLED)  ## where you are: every exercise and step from your saved grades, and what to do next
	$(PY) -m grader.progress

capstone: $(INSTALLED)  ## train your exercise-11 script for the profile's full epoch budget: time to accuracy, images/s and data stall per epoch, saved to .grader/capstone.json
	$(PY) -m grader.capstone

league: $(INSTALLED) data  ## the league table on PROFILE's data: the course's loaders beside torchvision, tf.data, webdataset, OpenCV, torchcodec, SPDL and DALI (the last three after `make league-peers`) and two decode-only ceilings (.grader/league.json and .png)
	LOADERLAB_PROFILE=$(PROFILE) $(PY) -m league

# The league's optional peers live in requirements-peers.txt (DALI: a 424 MB wheel, Linux only; SPDL: FFmpeg's libraries
# from the system), out of the lock.
league-peers: $(INSTALLED)  ## the league's optional peers (requirements-peers.txt): NVIDIA DALI (Linux only), torchcodec, SPDL (needs FFmpeg 4-8)
	if [ -x $(VENV)/bin/uv ]; then $(VENV)/bin/uv pip install --python $(PY) -r requirements-peers.txt; else $(PY) -m pip install -r requirements-peers.txt; fi

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

quiz: $(INSTALLED)  ## make quiz M=04: the module's self-check questions, graded here
	$(PY) -m grader.quiz $(M)

# `make test` runs every phase even when one fails, then prints each phase's time and fails if any did.
# What times nothing runs in parallel (pytest-xdist): the project tests with the graders' correctness
# checks on solutions/ in one session, UNTIMED_WORKERS at a time (three on 2 cores: the third keeps the cores
# busy while the tests of hangs and timeouts wait; measured 294 s with two, 236 s with three), then the same
# checks again under spawn for the exercises that start processes, and the notebooks (a notebook's cells
# together), two at a time. What measures speed (the `timing` tests, the
# graders' throughput checks) runs last, alone.
CI_PYTEST := LOADERLAB_PROFILE=ci LOADERLAB_WAITING_PROCESSES=10 $(PY) -m pytest
# Where tests run side by side, torch's OpenMP threads must sleep, not spin, while they wait for work: three
# trainings of the capstone's model at once took 20-30 s each with the default policy and 6-10 s with a passive
# one (3.3 s alone; 2 cores, one run each). The timed phase keeps the default, as a learner's machine has it.
PARALLEL_PYTEST := OMP_WAIT_POLICY=PASSIVE $(CI_PYTEST)
PHASES := .grader/phases.txt
UNTIMED_WORKERS ?= 3
# The hand-out, as `make learner-copy` writes it (no solutions/, no tests/), beside the checkout: the notebooks run
# there and the stubs are graded there (tests/test_course_structure.py), with only the copy importable.
HANDOUT ?= $(or $(TMPDIR),/tmp)/loaderlab-handout-$(notdir $(CURDIR))
HANDOUT_PYTEST := cd $(HANDOUT) && PYTHONPATH=$(HANDOUT)/.isolate:$(HANDOUT) OMP_WAIT_POLICY=PASSIVE LOADERLAB_PROFILE=ci \
	LOADERLAB_WAITING_PROCESSES=10 $(CURDIR)/$(PY) -m pytest
define run_phase
start=$$SECONDS; $(2) || failed="$$failed; $(1)"; echo "  $$((SECONDS - start)) s  $(1)" >> $(PHASES)
endef

test: $(INSTALLED) data-ci  ## the whole suite, as CI runs it
	@mkdir -p .grader; : > $(PHASES); failed=""; rm -rf $(HANDOUT); \
	$(call run_phase,a hand-out (make learner-copy),$(PY) -m grader.learner_copy $(HANDOUT) --for-testing > /dev/null); \
	$(call run_phase,untimed: project tests (stubs graded in the hand-out) + graders' correctness on solutions ($(UNTIMED_WORKERS) at a time),LOADERLAB_HANDOUT=$(HANDOUT) $(PARALLEL_PYTEST) tests/ grader/ --target solutions -m "not timing and not throughput" -n $(UNTIMED_WORKERS) --dist worksteal --durations=20); \
	$(call run_phase,notebooks in the hand-out (two at a time),($(HANDOUT_PYTEST) --nbval-lax --nbval-current-env notebooks/ -n 2 --dist loadfile --durations=10)); \
	$(call run_phase,graders' correctness on solutions under spawn (two at a time),$(PARALLEL_PYTEST) grader/ -m "starts_processes and not throughput and not spawn_case_of_its_own and not spawn_covered_by" --target solutions --start-method spawn -n 2 --dist worksteal --durations=10); \
	$(call run_phase,timed: project tests that time + graders' timed checks on solutions (one at a time),$(CI_PYTEST) tests/ grader/ --target solutions -m "(timing or throughput) and not alternative_speed" --results .grader/solutions.json --durations=15); \
	echo; echo "make test, time by phase:"; cat $(PHASES); \
	if [ -n "$$failed" ]; then echo "FAILED$$failed"; exit 1; fi; echo "all phases passed"

# The correct alternatives' timed checks (tests/alternatives/, `timed` in expect.toml), one at a time: run after changing
# a timed target or an alternative. They left `make test` to keep it within 15 minutes on 2 cores (123 s there).
test-alternatives: $(INSTALLED) data-ci  ## the correct alternatives against the timed targets their route could move, one at a time
	$(CI_PYTEST) tests/test_graders.py -m alternative_speed --durations=15

# The course on other Pythons (README "Platforms"), outside `make test`: for each of PYTHONS (a version, found as
# pythonX.Y on PATH or with `pyenv prefix`, or an interpreter's path) a venv of its own, .venv-pyX.Y, gets the lock
# from the same installer, then runs the graders' correctness checks on solutions/ and every notebook, as `make
# test`'s untimed phases do. `make test-python VENV=.venv-py3.12 PYTHON=...` does one of them.
PYTHONS ?= 3.12 3.13
test-pythons:  ## make test-pythons [PYTHONS="3.12 3.13"]: install into .venv-pyX.Y and run the graders on solutions/ and the notebooks there
	@mkdir -p .grader; : > .grader/pythons.txt; failed=""; \
	for want in $(PYTHONS); do \
	  py=$$want; case $$want in */*) ;; *) py=python$$want; $$py -c '' 2>/dev/null || py=$$(pyenv prefix $$want 2>/dev/null)/bin/python;; esac; \
	  version=$$($$py -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) || { echo "  no Python $$want here" >> .grader/pythons.txt; failed="$$failed $$want"; continue; }; \
	  $(MAKE) --no-print-directory test-python VENV=.venv-py$$version PYTHON=$$py PHASES=.grader/pythons.txt || failed="$$failed $$want"; \
	done; echo; echo "make test-pythons, time by phase:"; cat .grader/pythons.txt; \
	if [ -n "$$failed" ]; then echo "FAILED:$$failed"; exit 1; fi; echo "all passed"

test-python: $(INSTALLED) data-ci
	@mkdir -p .grader; failed=""; echo "  $$(grep -h '^seconds=' $(INSTALLED) | cut -d= -f2) s  $(VENV): install ($$($(PY) -V))" >> $(PHASES); \
	$(call run_phase,$(VENV): graders' correctness on solutions ($(UNTIMED_WORKERS) at a time),$(PARALLEL_PYTEST) grader/ --target solutions -m "not throughput" -n $(UNTIMED_WORKERS) --dist worksteal --durations=10); \
	$(call run_phase,$(VENV): notebooks (two at a time),$(PARALLEL_PYTEST) --nbval-lax --nbval-current-env notebooks/ -n 2 --dist loadfile --durations=10); \
	if [ -n "$$failed" ]; then echo "FAILED$$failed"; exit 1; fi

clean:  ## generated data, grades and caches (keeps .venv)
	rm -rf data .grader .pytest_cache
	find . -name __pycache__ -prune -exec rm -rf {} +

clean-all: clean  ## also the virtual environment
	rm -rf $(VENV) .venv-py*
