#!/usr/bin/env bash
# Re-record the captures the TUI's tests read (tests/integration/test_tui.py, test_tui_screens.py):
#
#   tests/data/tui/record.sh [PYTHON]      # PYTHON: a venv's python with torch and dynscope (-e .)
#
# Each is `dynscope explain` of a program run from /tmp/dynscope-snapshots (a copy of the
# programs), so the paths the screens show are the same on every machine; the tests copy the
# programs there again, for the views that show source. After re-recording, update the snapshots:
#   pytest tests/integration/test_tui_screens.py --snapshot-update
set -euo pipefail
python=${1:-python}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
root=/tmp/dynscope-snapshots
made=()
record() {  # name, program, args...
    local name=$1 program=$2; shift 2
    mkdir -p "$root/$(dirname "$program")"
    cp "$repo/$program" "$root/$program"
    made+=("- \`$name.dynscope\`: \`dynscope explain --cold -q -o $name.dynscope $program $*\` (in $root)")
    rm -f "$here/$name.dynscope"
    (cd "$root" && "$python" -m dynscope explain --cold -q -o "$here/$name.dynscope" "$program" "$@")
    "$python" - "$here/$name.dynscope" <<'PY'
import sqlite3, sys
# Small and self-contained: fold the WAL into the file and drop free pages.
db = sqlite3.connect(sys.argv[1]); db.execute("PRAGMA wal_checkpoint(TRUNCATE)"); db.execute("VACUUM"); db.close()
PY
}

record breaks examples/graph_breaks.py --backend aot_eager
record recompiles examples/recompiles.py --backend eager
record markup tests/programs/tui_markup.py
record conv examples/conv_net.py --backend inductor
{
    echo "# Captures the TUI's tests read"
    echo
    echo "Made $(date -u +%Y-%m-%d) by \`tests/data/tui/record.sh\` at dynscope $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?'),"
    "$python" -c 'import platform, sys, torch
print(f"on {platform.system()} {platform.machine()}, Python {sys.version.split()[0]}, torch {torch.__version__}, CPU:")'
    echo
    printf '%s\n' "${made[@]}"
    echo
    echo "The tests read them instead of compiling the programs at every run; the screens they check"
    echo "are those of this torch. Kernel code depends on the CPU's vector ISA: the kernels' Pilot"
    echo "tests compare the screen with this capture's own kernels, so any machine reads the same."
} > "$here/README.md"
ls -l "$here"
