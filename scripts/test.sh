#!/usr/bin/env bash
# Run every check of the workspace: ruff (lint + format), mypy on slide_core, pytest.
# Run it inside the environment: scripts/run.sh scripts/test.sh [PYTEST ARGS...]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
status=0
echo '== ruff check' >&2
ruff check src scripts launch conftest.py || status=1
echo '== ruff format --check' >&2
ruff format --check src scripts launch conftest.py || status=1
echo '== mypy slide_core' >&2
mypy || status=1
echo '== pytest' >&2
pytest "$@"
rc=$?
# pytest exits 5 when it collected no test: that is a failure here, not a pass.
if [ "$rc" -eq 5 ]; then echo 'test.sh: pytest collected no tests' >&2; rc=1; fi
[ "$rc" -ne 0 ] && status=1
exit "$status"
