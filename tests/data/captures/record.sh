#!/usr/bin/env bash
# Re-record the captures the torch-free unit tests read (tests/unit/test_recorded_captures.py).
#
#   tests/data/captures/record.sh [PYTHON]      # PYTHON: a venv's python with torch and dynscope (-e .)
#
# Writes tests/data/captures/<torch version>/ (e.g. 2.13.0+cpu) with one capture per case
# below. Each run is `dynscope explain` of an example, as a user would run it. The inductor
# case uses the GPU when the machine has one (examples put the model where torch says).
set -euo pipefail
python=${1:-python}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
version=$("$python" -c 'import torch; print(torch.__version__)')
out="$here/$version"
mkdir -p "$out"
cd "$repo"   # captures record paths relative to the program's directory as the user ran it

made=()  # one README line per capture
record() {  # name, example, args...
    local name=$1 example=$2; shift 2
    made+=("- \`$name.dynscope\`: \`dynscope explain --cold -q -o $name.dynscope examples/$example $*\`")
    rm -f "$out/$name.dynscope"
    "$python" -m dynscope explain --cold -q -o "$out/$name.dynscope" "examples/$example" "$@"
    "$python" - "$out/$name.dynscope" <<'PY'
import sqlite3, sys
# Small and self-contained: fold the WAL into the file and drop free pages.
db = sqlite3.connect(sys.argv[1]); db.execute("PRAGMA wal_checkpoint(TRUNCATE)"); db.execute("VACUUM"); db.close()
PY
}

record graph_breaks_eager graph_breaks.py --backend eager
record recompiles_eager recompiles.py --backend eager
record train_loop_aot_eager train_loop.py --backend aot_eager --steps 2
record conv_net_inductor conv_net.py --backend inductor
# How they were made, beside them (the unit tests take the version from the directory name).
{
    echo "# Captures recorded with torch $version"
    echo
    echo "Made $(date -u +%Y-%m-%d) by \`tests/data/captures/record.sh\` at dynscope $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- dynscope 2>/dev/null || echo ' with uncommitted changes'),"
    "$python" -c 'import platform, sys, torch
device = f"CUDA ({torch.cuda.get_device_name()}, Triton)" if torch.cuda.is_available() else "CPU"
print(f"on {platform.system()} {platform.machine()}, Python {sys.version.split()[0]}, torch {torch.__version__}, {device}:")'
    echo
    printf '%s\n' "${made[@]}"
} > "$out/README.md"
ls -l "$out"
