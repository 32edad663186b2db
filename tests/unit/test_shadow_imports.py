"""The shadow serves changed source to a trial child without touching a file.

A real child Python imports a module of the program and one of an "installed library" (a
directory on sys.path) through the shadow, runs the changed script, and raises from changed
code: it runs the changed text, its traceback quotes the changed lines, and nothing on disk
changes (no file, no __pycache__ of a shadowed module).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

CHILD = textwrap.dedent('''
    import json, sys
    from dynscope.runner import shadow
    sources = json.loads(sys.argv[1])
    shadow.install(sources)
    sys.path[:0] = [sys.argv[2], sys.argv[3]]
    script = sys.argv[4]
    try:
        exec(compile(shadow.script_source(script), script, "exec"), {"__name__": "__main__", "__file__": script})
    except RuntimeError:
        sys.excepthook(*sys.exc_info())  # as the runner reports the program's exception
''')


def _digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_changed_modules_and_script_run_from_the_shadow_only(tmp_path):
    program, library = tmp_path / "program", tmp_path / "site" / "lib"
    program.mkdir()
    library.mkdir(parents=True)
    (program / "helpers.py").write_text("VALUE = 1\n")
    (library / "__init__.py").write_text("def scale(x):\n    return x * 10\n")
    (program / "train.py").write_text(
        "import helpers, lib\nprint('result', lib.scale(helpers.VALUE))\n")
    (program / "untouched.py").write_text("ANSWER = 42\n")
    sources = {
        str(program / "helpers.py"): "VALUE = 2\n",
        str(library / "__init__.py"): "def scale(x):\n    return x * 100  # changed in the shadow\n",
        str(program / "train.py"): (
            "import helpers, lib, untouched\nprint('result', lib.scale(helpers.VALUE), untouched.ANSWER)\n"
            "raise RuntimeError('from the changed script')\n"),
    }
    before = _digest(tmp_path)
    result = subprocess.run([sys.executable, "-c", CHILD, json.dumps(sources), str(program), str(tmp_path / "site"),
                             str(program / "train.py")], capture_output=True, text=True, timeout=60)
    assert result.stdout == "result 200 42\n", result.stderr
    assert "raise RuntimeError('from the changed script')" in result.stderr  # the traceback quotes the shadow
    after = _digest(tmp_path)
    # the only new files are the bytecode of the module nobody changed
    assert {k: v for k, v in after.items() if "__pycache__" not in k} == before
    assert [k for k in after if "__pycache__" in k] == [k for k in after if "untouched" in k and "__pycache__" in k]
