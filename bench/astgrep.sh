#!/usr/bin/env bash
# Benchmarks ast_grep (Berth, through the harness protocol) against the
# ast-grep CLI on Go's own source tree, in one run, and prints match counts,
# wall times and the ratios Berth/ast-grep, cold and warm.
#
#   bench/astgrep.sh [extra flags for bench/astgrep, e.g. -root DIR]
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/berth"
if ! command -v ast-grep >/dev/null; then
  echo "installing @ast-grep/cli into $CACHE/node" >&2
  npm install --prefix "$CACHE/node" --no-audit --no-fund --loglevel=error @ast-grep/cli >&2
  export PATH="$CACHE/node/node_modules/.bin:$PATH"
fi

bin="$(mktemp -d)/orchestrator"
trap 'rm -rf "$(dirname "$bin")"' EXIT
go build -tags berthtest -o "$bin" ./cmd/orchestrator
go run ./bench/astgrep -binary "$bin" "$@"
