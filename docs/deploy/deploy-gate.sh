#!/bin/sh
# The deploy gate as a plain shell script (docs/deploy.md), run from the repository root: any
# exit but 0 stops the deploy. The commands are the README's, word for word
# (tests/test_deploy_recipe.py); keep reports/ as the run's artefacts.
python3 -m venv .venv && . .venv/bin/activate && pip install -e . && verify fetch-model || exit $?
. .venv/bin/activate && verify attention --fresh --junit reports/junit.xml --html reports/verify-attention.html
