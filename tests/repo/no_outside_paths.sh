#!/usr/bin/env bash
# The repository stands alone: no code, build file or test reads a folder beside the checkout
# (the developers' shared/ folder). Documentation (*.md, docs/) may mention it.
# Usage: no_outside_paths.sh REPO_ROOT
set -euo pipefail
root=${1:?usage: no_outside_paths.sh REPO_ROOT}
pattern='\.\.[/]shared'
hits=$(grep -rnE "$pattern" "$root" --exclude-dir=.git --exclude-dir='build*' --exclude-dir=out \
         --exclude-dir=docs --exclude-dir=data --exclude='*.md' || true)
if [ -n "$hits" ]; then
  echo "these files read a path outside the repository (vendor the data under tests/data instead):"
  echo "$hits"
  exit 1
fi
echo "no path outside the repository: ok"
