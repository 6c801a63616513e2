#!/usr/bin/env bash
# scripts/semver-check.sh: what the working tree changes in the library's
# public API since a baseline, by cargo-semver-checks: a change that needs a
# new major version (0.x: a new minor) and is not in the version in
# Cargo.toml fails, naming each item. Installs cargo-semver-checks with
# `cargo install --locked` if it is missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() {
    cat <<EOF
usage: scripts/semver-check.sh [--baseline REV] [--no-install]

  --baseline REV  the git revision to compare with (a tag, a commit, a
                  branch); default: the latest tag reachable from HEAD,
                  else the commit before HEAD
  --no-install    fail instead of installing a missing cargo-semver-checks

cargo-semver-checks builds the rustdoc of both revisions (REV in a work tree
of its own), so the first run takes minutes. Exit status: 0 when the
version in Cargo.toml allows every change, 1 when it does not (or the check
could not run), 2 for a bad command line.
EOF
}

baseline=""
install=1
while (($#)); do
    case $1 in
    --baseline)
        baseline=${2:-}
        if [[ -z $baseline ]]; then
            echo "semver-check: --baseline needs a revision (try --help)" >&2
            exit 2
        fi
        shift 2
        ;;
    --baseline=*)
        baseline=${1#--baseline=}
        shift
        ;;
    --no-install) install=0; shift ;;
    -h | --help) usage; exit 0 ;;
    *)
        echo "semver-check: unknown option: $1 (try --help)" >&2
        exit 2
        ;;
    esac
done

if [[ -z $baseline ]]; then
    if ! baseline=$(git describe --tags --abbrev=0 2>/dev/null); then
        baseline=$(git rev-parse --verify --quiet 'HEAD~1') || {
            echo "semver-check: no tag and no commit before HEAD to compare with" >&2
            exit 1
        }
    fi
fi
if ! git rev-parse --verify --quiet "$baseline^{commit}" >/dev/null; then
    echo "semver-check: $baseline is not a revision of this repository" >&2
    exit 2
fi

if ! cargo semver-checks --version >/dev/null 2>&1; then
    if ((install == 0)); then
        echo "semver-check: cargo-semver-checks is missing (cargo install --locked cargo-semver-checks)" >&2
        exit 1
    fi
    echo "semver-check: installing cargo-semver-checks (cargo install --locked)"
    cargo install --locked cargo-semver-checks
fi

package=$(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
echo "semver-check: $package, $(git rev-parse --short HEAD) (working tree) against $baseline ($(git rev-parse --short "$baseline"))"
# --package: the crate says publish = false until its first release, and
# cargo-semver-checks leaves such crates out unless they are named.
cargo semver-checks check-release --package "$package" --baseline-rev "$baseline"
