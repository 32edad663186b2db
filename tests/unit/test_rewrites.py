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
from dynscope.rewrites.causes import cause_of

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


# ---- 3. .item() / int(t) / float(t) --------------------------------------------------------------

GUARD = "Could not guard on data-dependent expression Eq(u0, 1) (unhinted: Eq(u0, 1))."


def test_an_item_that_only_feeds_arithmetic_stays_a_tensor() -> None:
    check('''
        import torch

        def forward(x, t):
            scale = t.sum().item()  # a number
            y = x * scale
            return y + scale * x
        ''', 4, ITEM, "keep-tensor", '''
        import torch

        def forward(x, t):
            scale = t.sum()  # a number
            y = x * scale
            return y + scale * x
        ''', removed=1)


def test_an_inline_item_in_arithmetic_is_dropped() -> None:
    check('''
        import torch

        def forward(x, t):
            return x * t.max().item()
        ''', 4, ITEM, "keep-tensor", '''
        import torch

        def forward(x, t):
            return x * t.max()
        ''', removed=1)


def test_int_of_a_tensor_feeding_arithmetic_is_dropped() -> None:
    check('''
        def forward(x):
            k = int((x > 0).sum())
            return x / k
        ''', 2, ITEM, "keep-tensor", '''
        def forward(x):
            k = (x > 0).sum()
            return x / k
        ''', removed=1)


@pytest.mark.parametrize("uses", [
    "return s",  # returned: the caller gets a tensor instead of a number
    "return x[:s]",  # a size
    "return x * s if s > 0 else x",  # compared
    "return x * (s + 1)",  # arithmetic with a bare number: still a Python number downstream
    "return torch.zeros(int(s)) + x * s",  # passed to a call
    "s = s * 2\n    return x * s",  # assigned twice
])
def test_keep_tensor_declines_a_number_used_as_a_number(uses: str) -> None:
    assert_declines(f"import torch\n\ndef forward(x, t):\n    s = t.sum().item()\n    {uses}\n", 4, ITEM, "keep-tensor")


def test_keep_tensor_declines_int_of_a_plain_name() -> None:
    # int(n) where n may be a Python float: not plainly a tensor read
    assert_declines("def forward(x, n):\n    k = int(n)\n    return x * k\n", 2, ITEM, "keep-tensor")


def test_a_count_used_as_a_size_and_slice_gets_size_checks_after_its_assignment() -> None:
    rewrite = check('''
        import torch

        class Model:
            def forward(self, x):
                n = int((x > 0).sum())
                out = torch.zeros(n)
                return out + x[:n]
        ''', 7, GUARD, "check-size", '''
        import torch

        class Model:
            def forward(self, x):
                n = int((x > 0).sum())
                torch._check(n >= 0)
                torch._check(n <= x.shape[0])
                out = torch.zeros(n)
                return out + x[:n]
        ''', removed=0)
    assert rewrite.settings == ("capture_scalar_outputs",)


def test_the_slice_bound_names_the_sliced_dimension() -> None:
    check('''
        import torch

        def forward(x):
            n = (x > 0).sum().item()
            return x[:, :n]
        ''', 4, GUARD, "check-size", '''
        import torch

        def forward(x):
            n = (x > 0).sum().item()
            torch._check(n >= 0)
            torch._check(n <= x.shape[1])
            return x[:, :n]
        ''', removed=0)


@pytest.mark.parametrize("body", [
    "n = (x > 0).sum().item()\n    return x * n",  # no size use
    "n = (x > 0).sum().item()\n    torch._check_is_size(n)\n    return x[:n]",  # already checked
    "n = float((x > 0).sum())\n    return torch.zeros(n)",  # a float is no size
    "n = (x > 0).sum().item()\n    n = n + 1\n    return x[:n]",  # assigned twice
])
def test_check_size_declines(body: str) -> None:
    assert_declines(f"import torch\n\ndef forward(x):\n    {body}\n", 4, GUARD, "check-size")


# ---- 6. assert / 7. validation guards ----------------------------------------------------------

def test_an_assert_on_a_tensor_becomes_an_assert_operator() -> None:
    check('''
        import torch

        def forward(x):
            assert (x >= 0).all(), "negative input"  # inputs are probabilities
            return x.log()
        ''', 4, BRANCH, "assert-to-check", '''
        import torch

        def forward(x):
            torch._assert_async((x >= 0).all(), "negative input")  # inputs are probabilities
            return x.log()
        ''', removed=1)


def test_an_assert_on_a_data_dependent_number_becomes_torch_check_with_a_lambda_message() -> None:
    check('''
        import torch

        def forward(x, n):
            assert n <= x.shape[0], f"n={n} too large"
            return x[:n]
        ''', 4, GUARD, "assert-to-check", '''
        import torch

        def forward(x, n):
            torch._check(n <= x.shape[0], lambda: f"n={n} too large")
            return x[:n]
        ''', removed=1)


def test_assert_to_check_declines_or_on_tensors_and_a_computed_message() -> None:
    assert_declines("def forward(x):\n    assert x.all() or x.any()\n    return x\n", 2, BRANCH, "assert-to-check")
    assert_declines("def forward(x):\n    assert x.all() and (x.any() or x.sum())\n    return x\n", 2, BRANCH, "assert-to-check")
    assert_declines("def forward(x):\n    assert x.all(), f'{x}'\n    return x\n", 2, BRANCH, "assert-to-check")
    assert_declines("def forward(x):\n    assert x.all()\n    return x\n", 2, ITEM, "assert-to-check")


def test_an_assert_of_and_on_tensors_becomes_one_check_per_operand_in_order() -> None:
    rewrite = check('''
        import torch

        def observe(x_act):
            x_min = x_act.min()
            x_max = x_act.max()
            # no NaN may reach the running range
            assert x_max.isnan().sum() == 0 and x_min.isnan().sum() == 0, (
                "NaN detected when computing min/max of the activation"
            )
            return x_min, x_max
        ''', 7, BRANCH, "assert-to-check", '''
        import torch

        def observe(x_act):
            x_min = x_act.min()
            x_max = x_act.max()
            # no NaN may reach the running range
            torch._assert_async(x_max.isnan().sum() == 0, (
                "NaN detected when computing min/max of the activation"
            ))
            torch._assert_async(x_min.isnan().sum() == 0, (
                "NaN detected when computing min/max of the activation"
            ))
            return x_min, x_max
        ''')
    assert rewrite.title.endswith("one check per operand of `and` (2)")


def test_an_assert_of_and_on_numbers_read_out_of_tensors_checks_each_tensor() -> None:
    rewrite = check('''
        def embed(tokens, lengths):
            assert lengths.max().item() <= tokens.shape[1] and lengths.min().item() > 0, "bad lengths"
            return tokens
        ''', 2, ITEM, "assert-to-check", '''
        import torch
        def embed(tokens, lengths):
            torch._assert_async(lengths.max() <= tokens.shape[1], "bad lengths")
            torch._assert_async(lengths.min() > 0, "bad lengths")
            return tokens
        ''')
    assert "one check per operand of `and` (2)" in rewrite.title


def test_a_validation_guard_on_a_tensor_becomes_an_assert_operator_saying_the_exception_changes() -> None:
    rewrite = check('''
        import torch

        def forward(x):
            if (x > 10).any():
                raise ValueError("too big")  # the kernel overflows
            return x
        ''', 4, BRANCH, "guard-to-check", '''
        import torch

        def forward(x):
            # the kernel overflows
            torch._assert_async(torch.logical_not((x > 10).any()), "too big")
            return x
        ''', removed=2)
    assert "RuntimeError" in rewrite.title and "ValueError" in rewrite.title


def test_a_validation_guard_on_numbers_becomes_torch_check_of_its_negation() -> None:
    check('''
        import torch

        def forward(x, n):
            if n > x.shape[0] or n < 0:
                raise ValueError(f"bad n {n}")
            return x[:n]
        ''', 4, GUARD, "guard-to-check", '''
        import torch

        def forward(x, n):
            torch._check(not (n > x.shape[0] or n < 0), lambda: f"bad n {n}")
            return x[:n]
        ''', removed=2)


@pytest.mark.parametrize("body", [
    "if x.any():\n        raise ValueError('a', 'b')\n    return x",  # two arguments
    "if x.any():\n        raise ValueError('a')\n    else:\n        x = x + 1\n    return x",  # an else
    "if x.any():\n        raise make_error()\n    return x",  # not an exception class by its name
    "if x.any():\n        x = x + 1\n        raise ValueError('a')\n    return x",  # more than the raise
])
def test_guard_to_check_declines(body: str) -> None:
    assert_declines(f"def forward(x):\n    {body}\n", 2, BRANCH, "guard-to-check")


# ---- 4. NumPy ------------------------------------------------------------------------------------

NUMPY_BRANCH_REASON = "attempted to jump with NumpyNdarrayVariable()"

# Reformer's shape (transformers/models/reformer/modeling_reformer.py), cut down: np.lcm in a helper,
# its result read by the forward, the branch on it filed as data-dependent
REFORMER = '''
    import numpy as np
    import torch


    def _get_least_common_mult_chunk_len(config):
        if len(set(config.attn_layers)) == 2:
            return np.lcm(config.lsh_attn_chunk_length, config.local_attn_chunk_length)
        return config.lsh_attn_chunk_length


    class ReformerModel(torch.nn.Module):
        def forward(self, input_ids):
            input_shape = input_ids.size()
            least_common_mult_chunk_length = _get_least_common_mult_chunk_len(self.config)
            must_pad = input_shape[-1] % least_common_mult_chunk_length != 0
            if must_pad:
                input_ids = torch.nn.functional.pad(input_ids, (0, 1))
            return input_ids
    '''


def test_np_lcm_feeding_a_branch_through_a_helper_becomes_math_lcm() -> None:
    rewrite = check(REFORMER, 16, BRANCH, "numpy-int-math", REFORMER.replace(
        "import torch\n", "import torch\n    import math\n").replace("np.lcm(", "math.lcm("),
        reason=NUMPY_BRANCH_REASON, removed=1)
    assert "NumPy integer" in rewrite.cause


def test_np_gcd_on_the_line_itself_becomes_math_gcd() -> None:
    check('''
        import math
        import numpy

        def forward(x, a, b):
            if numpy.gcd(a, b) > 1:
                return x * 2
            return x
        ''', 5, BRANCH, "numpy-int-math", '''
        import math
        import numpy

        def forward(x, a, b):
            if math.gcd(a, b) > 1:
                return x * 2
            return x
        ''', removed=1)


def test_numpy_int_math_declines_an_lcm_that_does_not_feed_the_line() -> None:
    assert_declines('''
        import numpy as np

        def table(a, b):
            return np.lcm(a, b)

        def forward(x):
            if x.sum() > 0:
                return x
            return -x
        ''', 7, BRANCH, "numpy-int-math", NUMPY_BRANCH_REASON)


@pytest.mark.parametrize(("call", "twin"), [
    ("np.sqrt(x.sum())", "torch.sqrt(x.sum())"),
    ("np.maximum(torch.ones(3), x.abs())", "torch.maximum(torch.ones(3), x.abs())"),
    ("np.clip(x.mean(), 0, 1)", "torch.clamp(x.mean(), 0, 1)"),
    ("np.concatenate([x.float(), torch.zeros(2)], axis=0)", "torch.cat([x.float(), torch.zeros(2)], dim=0)"),
])
def test_numpy_on_a_plain_tensor_becomes_its_torch_twin(call: str, twin: str) -> None:
    check(f'''
        import numpy as np
        import torch

        def forward(x):
            return {call}
        ''', 5, "attempted to trace numpy function with config.trace_numpy=False", "numpy-to-torch", f'''
        import numpy as np
        import torch

        def forward(x):
            return {twin}
        ''', removed=1)


@pytest.mark.parametrize("call", ["np.sqrt(x)",  # x may be an array or a number: not plainly a tensor
                                  "np.sqrt(x.sum(), out=y)",  # a keyword torch does not take
                                  "np.linalg.norm(x.sum())",  # not in the table
                                  "np.clip(lo, x.sum(), 1)"])
def test_numpy_to_torch_declines(call: str) -> None:
    assert_declines(f"import numpy as np\n\ndef forward(x, y, lo):\n    return {call}\n", 4, "numpy", "numpy-to-torch")


# BigBird's shape (transformers/models/big_bird/modeling_big_bird.py), cut down
BIGBIRD = '''
    import numpy as np
    import torch


    class BigBirdBlockSparseAttention(torch.nn.Module):
        def forward(self, x):
            rand_attn = [self._bigbird_block_rand_mask(8, 2) for _ in range(4)]
            return x * torch.tensor(np.stack(rand_attn)).sum()

        # the random blocks each query block attends to
        def _bigbird_block_rand_mask(self, seq_length, num_rand_blocks):
            rand_attn = np.zeros((seq_length, num_rand_blocks), dtype=np.int32)
            for i in range(seq_length):
                rand_attn[i, :] = np.random.permutation(seq_length)[:num_rand_blocks]
            return rand_attn
    '''

BIGBIRD_AFTER = BIGBIRD.replace("        # the random blocks each query block attends to\n",
                                "        # the random blocks each query block attends to\n        @torch.compiler.disable\n")


@pytest.mark.parametrize("line", [7, 14])  # the call in the compiled code, or the line inside the helper
def test_a_host_side_numpy_helper_gets_compiler_disable(line: int) -> None:
    rewrite = check(BIGBIRD, line, SKIPPED, "disable-numpy-helper", BIGBIRD_AFTER, reason="module: numpy.random", removed=0)
    assert "_bigbird_block_rand_mask" in rewrite.title
    assert rewrite.leaves_graph  # fix judges what it removes as "moved to eager" unless graphs fall


def test_disable_numpy_helper_declines_forward_and_long_functions_that_compute_with_torch() -> None:
    # BigBird's attention seeds NumPy itself: disabling it would take the whole attention out of the graph
    forward = "import numpy as np\nimport torch\n\ndef forward(x):\n    np.random.seed(0)\n    return x * torch.tensor(np.random.rand(3))\n"
    assert_declines(forward, 5, SKIPPED, "disable-numpy-helper")
    long_body = "".join(f"    x = torch.relu(x + {i})\n" for i in range(40))
    attention = f"import numpy as np\nimport torch\n\ndef attention(x):\n    np.random.seed(0)\n{long_body}    return x\n"
    assert_declines(attention, 5, SKIPPED, "disable-numpy-helper")
    short_body = "".join(f"    x = torch.relu(x + {i})\n" for i in range(4))
    assert "disable-numpy-helper" in candidates(attention.replace(long_body, short_body), 5, SKIPPED)


def test_disable_numpy_helper_declines_a_helper_already_disabled() -> None:
    assert_declines(BIGBIRD_AFTER, 16, SKIPPED, "disable-numpy-helper")


# ---- 5. torch.div on ints / 8. requires_grad_ and deepcopy ---------------------------------------

def test_floor_division_of_sizes_with_torch_div_becomes_floor_division_in_parentheses() -> None:
    check('''
        import torch

        def forward(x, chunk):
            n = 2 * torch.div(x.shape[1] + 1, chunk, rounding_mode="floor")
            return x[:, :n]
        ''', 4, "Data dependent operator", "floor-div-ints", '''
        import torch

        def forward(x, chunk):
            n = 2 * ((x.shape[1] + 1) // chunk)
            return x[:, :n]
        ''', removed=1)


def test_floor_div_ints_without_parentheses_where_none_are_needed() -> None:
    check('''
        import torch

        def forward(x, chunk):
            n = torch.div(x.size(1), chunk, rounding_mode="floor")
            return x[:, :n]
        ''', 4, "Data dependent operator", "floor-div-ints", '''
        import torch

        def forward(x, chunk):
            n = x.size(1) // chunk
            return x[:, :n]
        ''', removed=1)


@pytest.mark.parametrize("call", ['torch.div(a, b, rounding_mode="trunc")',  # trunc is not // on negatives
                                  "torch.div(a, b)",  # true division
                                  'torch.div(x.sum(), b, rounding_mode="floor")'])  # a tensor
def test_floor_div_ints_declines(call: str) -> None:
    assert_declines(f"import torch\n\ndef forward(x, a, b):\n    return {call}\n", 4, "Data dependent operator", "floor-div-ints")


def test_requires_grad_on_a_fresh_tensor_is_dropped_mra() -> None:
    # transformers/models/mra/modeling_mra.py, mra2_attention without its kernel
    check('''
        import torch

        def mra2_attention(query, key, value):
            if mra_cuda_kernel is None:
                return torch.zeros_like(query).requires_grad_()
            return query
        ''', 5, "requires_grad_() intermediate leaked as output", "drop-requires-grad", '''
        import torch

        def mra2_attention(query, key, value):
            if mra_cuda_kernel is None:
                return torch.zeros_like(query)
            return query
        ''', removed=1)


def test_a_requires_grad_statement_is_dropped_or_left_as_pass() -> None:
    check('''
        def forward(x):
            y = x * 2
            y.requires_grad_()
            return y
        ''', 3, "Unsupported Tensor.requires_grad_() call", "drop-requires-grad", '''
        def forward(x):
            y = x * 2
            return y
        ''', removed=1)
    check('''
        def forward(x, y):
            if needs_grad(x):
                y.requires_grad_()
            return y
        ''', 3, "Unsupported Tensor.requires_grad_() call", "drop-requires-grad", '''
        def forward(x, y):
            if needs_grad(x):
                pass
            return y
        ''', removed=1)


def test_setting_requires_grad_drops_the_if_that_only_did_that_hubert() -> None:
    # transformers/models/hubert/modeling_hubert.py, HubertFeatureEncoder.forward
    check('''
        class HubertFeatureEncoder:
            def forward(self, input_values):
                hidden_states = input_values[:, None]

                # make sure hidden_states require grad for gradient_checkpointing
                if self._requires_grad and self.training:
                    hidden_states.requires_grad = True

                for conv_layer in self.conv_layers:
                    hidden_states = conv_layer(hidden_states)
                return hidden_states
        ''', 7, "setattr() on Tensor.requires_grad", "drop-requires-grad", '''
        class HubertFeatureEncoder:
            def forward(self, input_values):
                hidden_states = input_values[:, None]

                for conv_layer in self.conv_layers:
                    hidden_states = conv_layer(hidden_states)
                return hidden_states
        ''')


def test_setting_requires_grad_keeps_an_if_that_runs_something() -> None:
    found = candidates("def forward(x):\n    if check(x):\n        x.requires_grad = True\n    return x\n", 3,
                       "setattr() on Tensor.requires_grad")
    assert found["drop-requires-grad"].source == "def forward(x):\n    if check(x):\n        pass\n    return x\n"
    assert_declines("def forward(x):\n    x.requires_grad = False\n    return x\n", 2, "setattr() on Tensor.requires_grad",
                    "drop-requires-grad")


def test_drop_requires_grad_declines_false_and_other_breaks() -> None:
    assert_declines("def forward(x):\n    return x.requires_grad_(False)\n", 2, "requires_grad_()", "drop-requires-grad")
    assert_declines("def forward(x):\n    return x.requires_grad_()\n", 2, BRANCH, "drop-requires-grad")


def test_deepcopy_of_a_tensor_becomes_clone() -> None:
    check('''
        import copy

        def forward(x):
            y = copy.deepcopy(x[0] + 1)
            return y
        ''', 4, "Attempted to copy.deepcopy a tensor", "deepcopy-to-clone", '''
        import copy

        def forward(x):
            y = (x[0] + 1).clone()
            return y
        ''', removed=1)


def test_deepcopy_to_clone_declines_what_may_not_be_a_tensor() -> None:
    # the generic "copy.deepcopy()" break and an argument that is not plainly a tensor: a module, a dict
    assert_declines("import copy\n\ndef forward(self, x):\n    m = copy.deepcopy(self.layer)\n    return m(x)\n", 4,
                    "copy.deepcopy()", "deepcopy-to-clone")


# ---- 10. the real cause --------------------------------------------------------------------------

def test_cause_of_names_np_lcm_behind_a_data_dependent_branch() -> None:
    cause = cause_of(BRANCH, "attempted to jump with NumpyNdarrayVariable()", "    if np.lcm(a, b) > x.shape[0]:")
    assert cause is not None and "np.lcm" in cause and "NumPy integer" in cause
    assert "NumPy value" in (cause_of(BRANCH, "attempted to jump with NumpyNdarrayVariable()", "    if must_pad:") or "")
    assert cause_of(BRANCH, BRANCH_REASON, "    if x.sum() > 0:") is None  # a tensor branch is what the label says


def test_cause_of_names_torch_div_on_ints_behind_a_data_dependent_operator() -> None:
    cause = cause_of("Data dependent operator", "aten.div", '    n = torch.div(s, 2, rounding_mode="floor")')
    assert cause is not None and "torch.div on Python ints" in cause
    assert cause_of("Data dependent operator", "aten.nonzero", "    idx = x.nonzero()") is None


OBSERVED = """Observed exception
  Explanation: Dynamo found no exception handler at the top-level compiled function when encountering an exception.

  Developer debug context: raised exception KeyError('missing')

from user code:
   File "/home/u/prog.py", line 11, in g
    return helper({"a": x}) + 1
  File "/home/u/prog.py", line 3, in helper
    return d["missing"]
"""


def test_cause_of_names_the_exception_and_its_origin_behind_observed_exception() -> None:
    assert cause_of("Observed exception", OBSERVED, "") == (
        "KeyError('missing') is raised in helper() at prog.py:3 (`return d[\"missing\"]`) and nothing in the compiled code "
        "catches it")
    assert cause_of("Observed exception", "no context recorded", "") is None


def test_a_branch_on_a_numpy_value_is_no_tensor_branch() -> None:
    source = "import numpy as np\n\ndef forward(x):\n    if x.sum() > 0:\n        x = x * 2\n    return x\n"
    assert "tensor-where" not in candidates(source, 4, BRANCH, "attempted to jump with NumpyNdarrayVariable()")
    assert "tensor-where" in candidates(source, 4, BRANCH, BRANCH_REASON)


# SwitchTransformers' stack forward (transformers 5.24), cut down
SWITCH = '''
    def forward(self, inputs_embeds, attention_mask=None):
        batch_size, seq_length = inputs_embeds.shape[:2]
        if attention_mask is None and not is_torchdynamo_compiling():
            # required mask seq length can be calculated via length of past cache
            attention_mask = torch.ones(batch_size, seq_length)

        causal_mask = attention_mask[:, None, None, :]
        return inputs_embeds * causal_mask
    '''

SWITCH_OBSERVED = "Observed exception\n  Developer debug context: raised exception TypeError(\"'NoneType' object is not subscriptable\")"


def test_a_not_compiling_clause_that_leaves_a_name_unset_is_dropped_with_the_exception_named() -> None:
    rewrite = check(SWITCH, 7, "Observed exception", "drop-compiling-clause",
                    SWITCH.replace(" and not is_torchdynamo_compiling()", ""), reason=SWITCH_OBSERVED, removed=1)
    assert rewrite.cause.startswith("TypeError(\"'NoneType' object is not subscriptable\") is raised")
    assert "attention_mask" in rewrite.cause and "attention_mask" in rewrite.title


def test_drop_compiling_clause_declines_when_the_line_reads_nothing_the_if_sets() -> None:
    assert_declines(SWITCH.replace("causal_mask = attention_mask[:, None, None, :]", "causal_mask = inputs_embeds[:, None]"),
                    7, "Observed exception", "drop-compiling-clause", SWITCH_OBSERVED)
    assert_declines(SWITCH.replace(" and not is_torchdynamo_compiling()", " and not ready()"), 7, "Observed exception",
                    "drop-compiling-clause", SWITCH_OBSERVED)


# IBert's batch_frexp (transformers/models/ibert/quant_modules.py), cut down: tensor -> NumPy -> tensor
IBERT = '''
    import decimal

    import numpy as np
    import torch


    def batch_frexp(inputs, max_bit=31):
        shape_of_input = inputs.size()
        inputs = inputs.view(-1)
        output_m, output_e = np.frexp(inputs.cpu().numpy())
        tmp_m = []
        for m in output_m:
            tmp_m.append(int(decimal.Decimal(m * (2**max_bit)).quantize(decimal.Decimal(1))))
        output_m = np.array(tmp_m)
        return torch.from_numpy(output_m).view(shape_of_input), torch.from_numpy(output_e).view(shape_of_input)
    '''


@pytest.mark.parametrize("line", [10, 13])
def test_a_short_function_through_numpy_and_back_is_a_helper_too(line: int) -> None:
    check(IBERT, line, "attempted to trace numpy function unsupported by PyTorch", "disable-numpy-helper",
          IBERT.replace("    def batch_frexp", "    @torch.compiler.disable\n    def batch_frexp"), removed=0)


# ---- 9. generators and iterators ------------------------------------------------------------------

@pytest.mark.parametrize(("before", "after"), [
    ("return sum(t * w for t in xs)", "return sum([t * w for t in xs])"),
    ("ok = all((m > 0).all() for m in masks)", "ok = all([(m > 0).all() for m in masks])"),
    ("first = next(iter(d.values()))", "first = list(d.values())[0]"),
])
def test_generators_and_iterators_become_lists(before: str, after: str) -> None:
    check(f'''
        def forward(xs, w, masks, d):
            {before}  # keep
            return w
        ''', 2, "Attempt to trace generator", "generator-to-list", f'''
        def forward(xs, w, masks, d):
            {after}  # keep
            return w
        ''', removed=1)


@pytest.mark.parametrize("line", ["return sum([t for t in xs])", "return next(it)", "return next(iter(xs), None)",
                                  "return sum(t for t in xs)"])
def test_generator_to_list_declines(line: str) -> None:
    gb_type = BRANCH if line == "return sum(t for t in xs)" else "Attempt to trace generator"
    assert_declines(f"def forward(xs, it):\n    {line}\n", 2, gb_type, "generator-to-list", BRANCH_REASON)


def test_an_augmented_arm_keeps_its_operand_grouped() -> None:
    check('''
        def forward(x, a, b):
            if x.sum() > 0:
                x -= a + b
            return x
        ''', 2, BRANCH, "tensor-where", '''
        import torch
        def forward(x, a, b):
            x = torch.where(x.sum() > 0, x - (a + b), x)
            return x
        ''')
