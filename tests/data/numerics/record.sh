#!/usr/bin/env bash
# Re-record the numerics captures the torch-free unit tests read (tests/unit/test_numerics_record.py).
#
#   tests/data/numerics/record.sh [PYTHON]      # PYTHON: a venv's python with torch and dynscope (-e .)
#
# Each is `dynscope numerics` of an example, run from the repository root as a user would.
set -uo pipefail
python=${1:-python}
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
record() {  # name, example, args...
    local name=$1 example=$2; shift 2
    rm -f "$here/$name.dynscope" "$here/$name.json"
    "$python" -m dynscope numerics -o "$here/$name.dynscope" --json "$here/$name.json" "examples/$example" "$@"
    "$python" - "$here/$name.dynscope" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1]); db.execute("PRAGMA wal_checkpoint(TRUNCATE)"); db.execute("VACUUM"); db.close()
PY
}
record relu_bug numerics_relu_bug.py --inject-relu-bug   # exits 1: the relu is suspect
record bf16_within numerics_bf16.py                       # exits 0: within eager's own error
