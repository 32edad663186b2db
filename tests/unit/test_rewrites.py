"""The source-rewrite catalogue (dynscope/rewrites): each rule on real source snippets.

Every case gives the file before, the line torch named and its break text, and the file
after, exactly; the generated code must compile and differ from the original only in the
lines the rule means to change. Negative cases show where a rule must not fire.
"""

from __future__ import annotations

import difflib
import textwrap

import pytest

from dynscope.rewrites import BreakSite, Rewrite
from dynscope.rewrites.catalogue import RULES, rewrites_for

BRANCH = "Data-dependent branching"
BRANCH_REASON = "attempted to jump with TensorVariable()"
ITEM = "Unsupported Tensor.item() call with capture_scalar_outputs=False"
PRINT = "Failed to trace builtin operator"
SKIPPED = "Attempted to call function marked as skipped"


def _src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def candidates(before: str, line: int, gb_type: str, reason: str = "") -> dict[str, Rewrite]:
    found = rewrites_for(_src(before), BreakSite(line=line, gb_type=gb_type, reason=reason))
    assert len({r.rule for r in found}) == len(found), "one candidate per rule"
    return {r.rule: r for r in found}


def changed_lines(before: str, after: str) -> tuple[list[str], list[str]]:
    """(lines removed, lines added), as difflib sees them."""
    diff = list(difflib.ndiff(before.splitlines(), after.splitlines()))
    return [d[2:] for d in diff if d.startswith("- ")], [d[2:] for d in diff if d.startswith("+ ")]


def check(before: str, line: int, gb_type: str, rule: str, after: str, *, reason: str = "",
          removed: int | None = None) -> Rewrite:
    """The rule's candidate equals ``after`` exactly, compiles, and removes only ``removed`` lines
    (by default: as many as differ from ``after``)."""
    found = candidates(before, line, gb_type, reason)
    assert rule in found, f"{rule} did not fire; got {sorted(found)}"
    rewrite = found[rule]
    assert rewrite.source == _src(after)
    compile(rewrite.source, "<rewritten>", "exec")
    assert rewrite.line == line and rewrite.title and rewrite.cause
    gone, _added = changed_lines(_src(before), rewrite.source)
    if removed is not None:
        assert len(gone) == removed, gone
    return rewrite


def assert_declines(before: str, line: int, gb_type: str, rule: str, reason: str = "") -> None:
    assert rule not in candidates(before, line, gb_type, reason)


def test_every_rule_is_registered_once_under_its_name() -> None:
    names = [name for name, _rule in RULES]
    assert len(names) == len(set(names))


def test_an_unparseable_file_gives_no_candidate() -> None:
    assert rewrites_for("def f(:\n", BreakSite(1, BRANCH, "")) == []


# ---- 1. print / logging / warnings --------------------------------------------------------------

def test_print_is_guarded_and_torch_imported_after_the_other_imports() -> None:
    check('''
        """A module."""
        import os

        def forward(x):
            # say what we do
            print("shape", x.shape)  # debugging
            return x + 1
        ''', 6, PRINT, "guard-logging", '''
        """A module."""
        import os
        import torch

        def forward(x):
            # say what we do
            if not torch.compiler.is_compiling():
                print("shape", x.shape)  # debugging
            return x + 1
        ''', removed=1)


@pytest.mark.parametrize("call", ["logger.warning('slow path %s', n)", "self.logger.info('x')", "logging.info('x')",
                                  "warnings.warn('deprecated', FutureWarning)", "_LOG.debug('x')", "logger.warning_once('x')"])
def test_logging_and_warnings_calls_are_guarded(call: str) -> None:
    check(f'''
        import torch

        def forward(self, x, n):
            {call}
            return x
        ''', 4, SKIPPED, "guard-logging", f'''
        import torch

        def forward(self, x, n):
            if not torch.compiler.is_compiling():
                {call}
            return x
        ''', removed=1)


@pytest.mark.parametrize("line", [
    "y = print('x')",  # the call is inside an expression: guarding it would leave y unset
    "catalog.info('x')",  # not a logger
    "model.warn_once(x)",
    "x = x + 1",
])
def test_guard_logging_declines_other_statements(line: str) -> None:
    assert_declines(f'''
        import torch

        def forward(x):
            {line}
            return x
        ''', 4, PRINT, "guard-logging")


def test_guard_logging_declines_a_break_of_another_kind() -> None:
    assert_declines('''
        import torch

        def forward(x):
            print(x)
            return x
        ''', 4, BRANCH, "guard-logging", BRANCH_REASON)


def test_a_plain_print_may_also_go_through_torchs_print_operator() -> None:
    check('''
        import torch

        def forward(x):
            print("mean", x.mean())
            return x
        ''', 4, PRINT, "traced-print", '''
        import torch

        def forward(x):
            torch._higher_order_ops.print("{} {}", "mean", x.mean())
            return x
        ''', removed=1)


def test_traced_print_declines_print_keywords() -> None:
    assert_declines('''
        import sys, torch

        def forward(x):
            print("mean", x.mean(), file=sys.stderr)
            return x
        ''', 4, PRINT, "traced-print")


# ---- 2. branches on a tensor's value ------------------------------------------------------------

def test_if_else_assigning_one_name_becomes_torch_where_keeping_comments() -> None:
    check('''
        import torch

        def forward(x):
            # shift by sign
            if x.sum() > 0:
                y = x + 1  # up
            else:
                y = x - 1
            return y * 2
        ''', 5, BRANCH, "tensor-where", '''
        import torch

        def forward(x):
            # shift by sign
            # up
            y = torch.where(x.sum() > 0, x + 1, x - 1)
            return y * 2
        ''', reason=BRANCH_REASON, removed=4)


def test_an_early_return_under_a_tensor_if_becomes_one_return() -> None:
    check('''
        import torch

        def forward(x):
            if (x > 0).any():
                return x * 2
            return x
        ''', 4, BRANCH, "tensor-where", '''
        import torch

        def forward(x):
            return torch.where((x > 0).any(), x * 2, x)
        ''', removed=3)


def test_if_without_else_keeps_the_old_value_and_not_becomes_logical_not() -> None:
    check('''
        import torch

        def forward(x, mask):
            if not mask.any():
                x += 1
            return x
        ''', 4, BRANCH, "tensor-where", '''
        import torch

        def forward(x, mask):
            x = torch.where(torch.logical_not(mask.any()), x + 1, x)
            return x
        ''', removed=2)


def test_return_arms_become_one_return() -> None:
    check('''
        import torch

        def forward(x):
            if x.max() > 3:
                return x / x.max()
            else:
                return x
        ''', 4, BRANCH, "tensor-where", '''
        import torch

        def forward(x):
            return torch.where(x.max() > 3, x / x.max(), x)
        ''')


def test_a_conditional_expression_becomes_torch_where_and_torch_is_imported() -> None:
    check('''
        def forward(x):
            return (x + 1 if x.max() > 0 else x - 1) * 2
        ''', 2, BRANCH, "tensor-where", '''
        import torch
        def forward(x):
            return torch.where(x.max() > 0, x + 1, x - 1) * 2
        ''', removed=1)


def test_multi_statement_arms_become_torch_cond_with_local_functions() -> None:
    rewrite = check('''
        import torch

        def forward(x):
            if x.sum() > 0:
                h = x.relu()
                y = h * 2
            else:
                y = x - 1
            return y
        ''', 4, BRANCH, "tensor-cond", '''
        import torch

        def forward(x):
            def _then_4():
                h = x.relu()
                return h * 2
            def _else_4():
                return x - 1
            y = torch.cond(x.sum() > 0, _then_4, _else_4, ())
            return y
        ''')
    assert "tensor-where" not in candidates(rewrite.source, 4, BRANCH)


def test_cond_is_not_offered_where_torch_where_answers() -> None:
    found = candidates('''
        import torch

        def forward(x):
            if x.sum() > 0:
                y = x + 1
            else:
                y = x - 1
            return y
        ''', 4, BRANCH)
    assert sorted(found) == ["tensor-where"]


@pytest.mark.parametrize("body", [
    # a local the arm sets is read after the if: it would vanish into the local function
    "if x.sum() > 0:\n        h = x.relu()\n        y = h * 2\n    else:\n        h = x\n        y = x - 1\n    return y + h",
    # reads the target before setting it: an unbound local inside a function
    "if x.sum() > 0:\n        h = x.relu()\n        y = y + h\n    else:\n        y = x - 1\n    return y",
])
def test_cond_declines_arms_that_do_not_fit_a_local_function(body: str) -> None:
    assert_declines(f"import torch\n\ndef forward(x, y):\n    {body}\n", 4, BRANCH, "tensor-cond")


@pytest.mark.parametrize("source", [
    # Python logic around the tensor: `and` short-circuits on a Python value first
    "def forward(self, x):\n    if self.training and x.sum() > 0:\n        x = x * 2\n    return x\n",
    # arms give different names
    "def forward(x):\n    if x.sum() > 0:\n        y = x\n    else:\n        z = x\n    return x\n",
    # an elif chain
    "def forward(x):\n    if x.sum() > 0:\n        y = x\n    elif x.sum() < -1:\n        y = -x\n"
    "    else:\n        y = 0 * x\n    return y\n",
    # the arm raises: that is a validation guard, not a choice of values
    "def forward(x):\n    if x.sum() > 0:\n        raise ValueError('no')\n    return x\n",
    # the early return is followed by more code, not a return
    "def forward(x):\n    if x.sum() > 0:\n        return x\n    x = x + 1\n    return x\n",
])
def test_tensor_where_declines(source: str) -> None:
    assert_declines(source, 2, BRANCH, "tensor-where")
    assert_declines(source, 2, BRANCH, "tensor-cond")


def test_tensor_where_declines_when_the_break_is_not_a_branch() -> None:
    assert_declines("def forward(x):\n    if x.sum() > 0:\n        x = x * 2\n    return x\n", 2, ITEM, "tensor-where")


def test_the_line_must_be_the_condition() -> None:
    source = "def forward(x):\n    if x.sum() > 0:\n        x = x * 2\n    return x\n"
    assert_declines(source, 3, BRANCH, "tensor-where")
    assert candidates(source, 2, BRANCH)
