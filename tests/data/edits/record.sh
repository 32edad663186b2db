#!/usr/bin/env bash
# Re-record the edit corpus's captures (tests/edit_corpus.py) that tests/unit/test_edit_identity.py reads.
#
#   tests/data/edits/record.sh [PYTHON]      # PYTHON: a venv's python with torch, transformers, ruff and dynscope (-e .)
#
# Writes tests/data/edits/captures/<torch version>/: one capture per program version, each
# `dynscope explain -q -o NAME PROGRAM --backend eager` run in a directory of its own.
set -euo pipefail
python=${1:-python}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
version=$("$python" -c 'import torch; print(torch.__version__)')
out="$here/captures/$version"
cd "$repo"
"$python" tests/edit_corpus.py record "$out"
{
    echo "# The edit corpus recorded with torch $version"
    echo
    echo "Made $(date -u +%Y-%m-%d) by \`tests/data/edits/record.sh\` at dynscope $(git rev-parse --short HEAD 2>/dev/null || echo '?'),"
    "$python" -c 'import platform, sys, torch, transformers
print(f"on {platform.system()} {platform.machine()}, Python {sys.version.split()[0]}, torch {torch.__version__}, transformers {transformers.__version__}, CPU, backend eager.")'
} > "$out/README.md"
du -sh "$out"
