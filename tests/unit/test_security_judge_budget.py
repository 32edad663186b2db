"""MCP's judge_patch has a budget of its own (issue 39, item 4): before, it waited on the fix child up to
the server's --run-timeout (an hour by default). Its ``budget_s`` defaults to minutes, is capped, goes to
fix as --budget, and the child is stopped JUDGE_GRACE_S after it; a bad one is refused with its reason
before anything runs. (The stop itself, on a real hanging program: tests/integration/test_security_fix.py.)"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from dynscope.agents.served import ServedDirectory
from dynscope.agents.tools import JUDGE_BUDGET_S, JUDGE_GRACE_S, MAX_JUDGE_BUDGET_S, Tools
from dynscope.errors import DynscopeError


@pytest.fixture
def served(tmp_path) -> ServedDirectory:
    root = tmp_path / "served"
    root.mkdir()
    (root / "prog.py").write_text("print(1)\n")
    return ServedDirectory.at(str(root))


@pytest.mark.parametrize("budget", [0, -1, float("nan"), float("inf"), MAX_JUDGE_BUDGET_S + 1, 3600.0, "300", True])
def test_a_budget_past_the_cap_or_not_a_number_is_refused_before_anything_runs(served, budget):
    tools = Tools(served, allow_run=True)
    with pytest.raises(DynscopeError, match=rf"budget_s must be a number of seconds above 0 and at most "
                                            rf"{MAX_JUDGE_BUDGET_S:g} \(default {JUDGE_BUDGET_S:g}\)"):
        tools.judge_patch("prog.py", "--- a/prog.py\n+++ b/prog.py\n", budget_s=budget)
    assert not Path(served.root, ".dynscope-mcp").exists()


def test_the_default_is_minutes_and_the_cap_under_the_run_timeout(served):
    default = inspect.signature(Tools.judge_patch).parameters["budget_s"].default
    assert default == JUDGE_BUDGET_S <= 600
    assert MAX_JUDGE_BUDGET_S + JUDGE_GRACE_S < Tools(served).run_timeout_s
