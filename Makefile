# The course's commands. `make lab` to learn, `make test` to check the whole course.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed
PROFILE ?= workshop
PIP := $(PY) -m pip

.PHONY: lab test data data-ci grade doctor hint quiz clean clean-all

$(INSTALLED): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --disable-pip-version-check -r requirements.txt
	$(PIP) install --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $@

lab: $(INSTALLED) data  ## set up, make the data, open JupyterLab on notebooks/
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks $(if $(filter 0,$(shell id -u)),--allow-root)

data: $(INSTALLED)  ## the dataset for PROFILE (default workshop); nothing to do if it is there
	$(PY) -m data_gen --profile $(PROFILE)
	$(PY) -m data_gen --profile $(PROFILE) --imbalance 10

data-ci: $(INSTALLED)
	$(PY) -m data_gen --profile ci
	$(PY) -m data_gen --profile ci --imbalance 10

grade: $(INSTALLED)  ## grade your exercises
	$(PY) -m pytest grader/

doctor: $(INSTALLED)  ## what this machine offers, and what will hurt
	$(PY) -m loaderlab.doctor

hint: $(INSTALLED)  ## make hint EX=ex02 [LEVEL=2]
	$(PY) -m grader.hints $(EX) $(LEVEL)

quiz: $(INSTALLED)  ## make quiz M=04: the module's self-check questions, graded here
	$(PY) -m grader.quiz $(M)

test: $(INSTALLED) data-ci  ## the whole suite, as CI runs it
	LOADERLAB_PROFILE=ci $(PY) -m pytest tests/ --durations=15
	LOADERLAB_PROFILE=ci $(PY) -m pytest grader/ --target solutions --results .grader/solutions.json --durations=10
	LOADERLAB_PROFILE=ci $(PY) -m pytest grader/ --target solutions --start-method spawn --results .grader/solutions-spawn.json
	LOADERLAB_PROFILE=ci $(PY) -m pytest --nbval-lax --nbval-current-env notebooks/ --durations=10

clean:  ## generated data, grades and caches (keeps .venv)
	rm -rf data .grader .pytest_cache
	find . -name __pycache__ -prune -exec rm -rf {} +

clean-all: clean  ## also the virtual environment
	rm -rf $(VENV)
