"""Every command in README.md's "## Usage" section runs as written, on fresh captures.

Each line of each ```bash block in that section runs with bash, in order, in one scratch
directory that holds the checkout's `examples/`, `tests/` and `docs/` (so the README's paths
resolve) and stand-ins for what the README assumes the reader has:

- `train.py`: the reader's training script (tests/programs/readme/train.py: a tiny model trained
  with Inductor: a GELU kernel, a graph break, a recompile); `mypkg/train.py` the same as a module;
- `change.diff`: a change to train.py for `fix --patch` to judge (compile it with dynamic=True);
- `main.dynscope`, `branch.dynscope` (two runs to compare: copies of one recorded capture of
  examples/graph_breaks.py from tests/data/captures, so the baseline check passes), `known.toml`
  (an allow file for its print break), and per-rank captures `run.rankN`, `main.rankN`,
  `branch.rankN.dynscope` imported from the recorded two-rank TORCH_TRACE logs in tests/data.

`run.dynscope`, which most commands read, is not a stand-in: the README's first command writes it.

Conventions for README authors (lines are skipped or judged by their trailing comment):
- a comment containing "needs " (`# needs a GPU`, `# needs torchrun (2 processes)`, `# needs an
  interactive terminal`) skips the line: the test lists it as skipped;
- every other line must exit 0, or 0 or 1 when its comment says "exit 1" (`check` limits,
  `minify` on a program that does not fail); none may print a traceback.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, needs_program, run_dynscope

pytestmark = pytest.mark.readme
STAND_INS = REPO / "tests" / "programs" / "readme"
RANK_LOGS = REPO / "tests" / "data" / "torch_trace" / "rank_divergence"


def usage_commands(readme: str) -> list[str]:
    """The lines of the ```bash blocks between "## Usage" and the next "## " heading."""
    section = readme.split("\n## Usage", 1)[1]
    section = re.split(r"\n## (?!#)", section, maxsplit=1)[0]
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", section, flags=re.S):
        commands += [line.strip() for line in block.splitlines() if line.strip() and not line.strip().startswith("#")]
    return commands


def comment_of(command: str) -> str:
    """The trailing `# ...` comment (a `#` outside quotes, after a space)."""
    match = re.search(r"\s#\s(.*)$", command)
    return match.group(1) if match else ""


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("readme")
    for name in ("examples", "tests", "docs"):
        (work / name).symlink_to(REPO / name)
    shutil.copy(STAND_INS / "train.py", work / "train.py")
    shutil.copy(STAND_INS / "change.diff", work / "change.diff")
    (work / "mypkg").mkdir()
    (work / "mypkg" / "__init__.py").write_text("")
    shutil.copy(STAND_INS / "mypkg_train.py", work / "mypkg" / "train.py")
    (work / "known.toml").write_text('[[allow]]\ngb_id = "GB0059"\nreason = "the print in graph_breaks.py, on purpose"\n')
    # Any torch version's capture: tests/unit/test_recorded_captures.py reads every one of them.
    recorded = sorted((REPO / "tests" / "data" / "captures").glob("*/graph_breaks_eager.dynscope"))[0]
    for name in ("main", "branch"):
        shutil.copy(recorded, work / f"{name}.dynscope")
    for name in ("run", "main", "branch"):
        imported = run_dynscope("import", str(RANK_LOGS), "-o", f"{name}.dynscope", cwd=work)
        assert imported.returncode == 0, imported.stderr
        # import wrote name.rankN.dynscope only; name.dynscope is the copy above (run.dynscope: the README's own)
    assert not (work / "run.dynscope").exists()
    return work


def test_usage_section_has_commands():
    commands = usage_commands((REPO / "README.md").read_text())
    assert len(commands) >= 20
    assert any(c.startswith("dynscope diff run.dynscope --compile 0/0 --from dynamo --to aot_forward") for c in commands)
    # the capture most commands read is the one the first command writes (the test makes no run.dynscope)
    assert commands[0].startswith("dynscope explain -o run.dynscope train.py")


@needs_program("dot")  # `dynscope graph -o g.svg` draws with graphviz, as the README says
def test_every_usage_command_runs_as_written(scratch):
    # conftest.py puts this python's commands first on PATH (the commands call dynscope and python
    # by name) and sets HF_HUB_OFFLINE=1, for the whole session: the runs can fork from its warm pool.
    assert os.environ["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)
    env = dict(os.environ)
    failures, skipped = [], []
    for command in usage_commands((REPO / "README.md").read_text()):
        comment = comment_of(command)
        if "needs " in comment:
            skipped.append(command)
            continue
        result = subprocess.run(["bash", "-c", command], cwd=scratch, env=env, capture_output=True, text=True,
                                timeout=600, stdin=subprocess.DEVNULL)
        allowed = (0, 1) if "exit 1" in comment else (0,)
        if result.returncode not in allowed or "Traceback (most recent call last)" in result.stderr:
            failures.append(f"{command}\n  exit {result.returncode}: {result.stderr.strip()[-600:]}")
    print("skipped (need something special):", *skipped, sep="\n  ")
    assert not failures, "README commands that do not run as written:\n" + "\n".join(failures)
