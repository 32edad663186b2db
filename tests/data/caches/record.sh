#!/usr/bin/env bash
# Re-record the compile-cache captures the torch-free unit tests read (tests/unit/test_caches.py).
#
#   tests/data/caches/record.sh [PYTHON]      # PYTHON: a venv's python with torch and dynscope (-e .)
#
# Writes tests/data/caches/<torch version>/ with, each a `dynscope explain` of examples/warm_start.py
# as a user would run it:
#   warm.dynscope, warm.cold.dynscope   explain --warm (cold then warm, one fresh cache directory);
#                                       the program saves torch's portable cache artifacts
#   changed.dynscope                    explain (caches kept), fresh cache directory: compiles, changes
#                                       one Inductor setting (comment_origin), compiles again
#   loaded.dynscope                     explain (caches kept), fresh cache directory: the program first
#                                       loads the portable cache artifacts the warm run saved
set -euo pipefail
python=${1:-python}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
version=$("$python" -c 'import torch; print(torch.__version__)')
out="$here/$version"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$out"
rm -f "$out"/*.dynscope
cd "$repo"
explain() { "$python" -m dynscope explain -q "$@"; }
explain --warm -o "$out/warm.dynscope" examples/warm_start.py --save-cache "$scratch/portable.bin"
TORCHINDUCTOR_CACHE_DIR="$scratch/changed" TRITON_CACHE_DIR="$scratch/changed/triton" \
    explain -o "$out/changed.dynscope" examples/warm_start.py --then-comment-origin
TORCHINDUCTOR_CACHE_DIR="$scratch/loaded" TRITON_CACHE_DIR="$scratch/loaded/triton" \
    explain -o "$out/loaded.dynscope" examples/warm_start.py --load-cache "$scratch/portable.bin"
for capture in "$out"/*.dynscope; do
    "$python" - "$capture" <<'PY'
import sqlite3, sys
# Small and self-contained: fold the WAL into the file and drop free pages.
db = sqlite3.connect(sys.argv[1]); db.execute("PRAGMA wal_checkpoint(TRUNCATE)"); db.execute("VACUUM"); db.close()
PY
done
{
    echo "# Compile-cache captures recorded with torch $version"
    echo
    echo "Made $(date -u +%Y-%m-%d) by \`tests/data/caches/record.sh\` at dynscope $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- dynscope 2>/dev/null || echo ' with uncommitted changes'),"
    "$python" -c 'import platform, sys, torch
device = f"CUDA ({torch.cuda.get_device_name()}, Triton)" if torch.cuda.is_available() else "CPU"
print(f"on {platform.system()} {platform.machine()}, Python {sys.version.split()[0]}, torch {torch.__version__}, {device}.")'
    echo "See record.sh (one directory up) for what each capture is."
} > "$out/README.md"
ls -l "$out"
