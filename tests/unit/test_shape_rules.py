"""Rewrite rules that match the code's shape, whatever torch's label (issue 40, item 2).

Each case gives the file before, the line torch named, and the file after, exactly; the break text
is varied (torch's own label, another label, none at all) to show the code alone decides. The
generated code must compile; negative cases show where a rule must not fire.
"""

from __future__ import annotations

import textwrap

import pytest

from dynscope.rewrites import BreakSite, Rewrite
from dynscope.rewrites.catalogue import RULES, rewrites_for

ITEM = "Unsupported Tensor.item() call with capture_scalar_outputs=False"
GUARD = "Could not guard on data-dependent expression"
DUPLICATE = "autograd.Function.apply: duplicate tensor input"
# a label that names none of these shapes: the code must decide
OTHER = "Unsupported method call"
LABELS = [ITEM, GUARD, OTHER, ""]


def _src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def candidate(before: str, line: int, gb_type: str, rule: str) -> Rewrite | None:
    found = {r.rule: r for r in rewrites_for(_src(before), BreakSite(line=line, gb_type=gb_type, reason=""))}
    return found.get(rule)


def check(before: str, line: int, gb_type: str, rule: str, after: str) -> Rewrite:
    rewrite = candidate(before, line, gb_type, rule)
    assert rewrite is not None, f"{rule} did not fire at line {line} for {gb_type!r}"
    assert rewrite.source == _src(after)
    compile(rewrite.source, "<rewritten>", "exec")
    assert rewrite.line == line and rewrite.title and rewrite.cause
    return rewrite


def test_the_shape_rules_are_registered_after_the_library_port() -> None:
    names = [name for name, _rule in RULES]
    assert names[0] == "library-port"
    assert {"item-where", "clone-repeated-input", "index-select-comprehension", "tensor-offset", "nonzero-to-where"} <= set(names)


# ---- assert / if-raise on a number read out of a tensor ----------------------------------------

LENGTHS = '''
    import torch

    def embed(tokens, lengths, table):
        slen = tokens.shape[1]
        assert lengths.max().item() <= slen, "lengths exceed the padded sequence"
        return table[tokens]
    '''


@pytest.mark.parametrize("label", LABELS)
def test_an_assert_on_item_becomes_an_assert_on_the_tensor_whatever_the_label(label: str) -> None:
    rewrite = check(LENGTHS, 5, label, "assert-to-check", '''
        import torch

        def embed(tokens, lengths, table):
            slen = tokens.shape[1]
            torch._assert_async(lengths.max() <= slen, "lengths exceed the padded sequence")
            return table[tokens]
        ''')
    assert rewrite.settings == () and "torch._assert_async" in rewrite.title
    assert "number" in rewrite.cause


def test_an_assert_on_int_of_a_tensor_with_a_computed_message_leaves_the_message_out_and_says_so() -> None:
    rewrite = check('''
        def pool(x, counts):
            assert int(counts.sum()) == x.shape[0], f"counts cover {counts.sum()} rows of {x.shape[0]}"
            return x.mean(0)
        ''', 2, ITEM, "assert-to-check", '''
        import torch
        def pool(x, counts):
            torch._assert_async(counts.sum() == x.shape[0])
            return x.mean(0)
        ''')
    assert rewrite.settings == () and "computed message is left out" in rewrite.title


@pytest.mark.parametrize("label", [ITEM, OTHER])
def test_a_guard_on_item_becomes_an_assert_on_the_negated_tensor(label: str) -> None:
    rewrite = check('''
        import torch

        def attend(scores, mask):
            if mask.sum(-1).min().item() == 0:
                raise ValueError("a query attends to no key")  # softmax over nothing
            return scores.masked_fill(~mask, float("-inf")).softmax(-1)
        ''', 4, label, "guard-to-check", '''
        import torch

        def attend(scores, mask):
            # softmax over nothing
            torch._assert_async(torch.logical_not(mask.sum(-1).min() == 0), "a query attends to no key")
            return scores.masked_fill(~mask, float("-inf")).softmax(-1)
        ''')
    assert rewrite.settings == () and "RuntimeError" in rewrite.title and "ValueError" in rewrite.title


@pytest.mark.parametrize("condition", [
    "lengths.max().item() <= slen and slen > 0",  # Python logic around the number
    "0 < lengths.max().item() <= slen",  # a chained comparison asks for a bool twice
    "not lengths.max().item()",
])
def test_assert_on_item_declines_python_logic(condition: str) -> None:
    source = f"def f(lengths, slen):\n    assert {condition}, 'bad'\n    return lengths\n"
    assert candidate(source, 2, ITEM, "assert-to-check") is None


def test_a_guard_on_item_with_a_computed_message_leaves_it_out() -> None:
    source = "def f(x):\n    if x.max().item() > 10:\n        raise ValueError(f'{x.max()} too big')\n    return x\n"
    rewrite = candidate(source, 2, ITEM, "guard-to-check")
    assert rewrite is not None and "computed message is left out" in rewrite.title
    assert "    torch._assert_async(torch.logical_not(x.max() > 10))\n" in rewrite.source


def test_an_assert_reading_no_number_still_answers_by_label_only() -> None:
    source = "def f(x):\n    assert x.all()\n    return x\n"
    assert candidate(source, 2, ITEM, "assert-to-check") is None  # as before: a .item() label on a tensor assert


# ---- item-where: choosing on a number read out of a tensor -------------------------------------

@pytest.mark.parametrize("label", LABELS)
def test_an_early_return_on_item_becomes_one_torch_where_return(label: str) -> None:
    rewrite = check('''
        import torch

        def gate(hidden, residual, score):
            if score.sigmoid().mean().item() > 0.5:
                return hidden + residual
            return residual
        ''', 4, label, "item-where", '''
        import torch

        def gate(hidden, residual, score):
            return torch.where(score.sigmoid().mean() > 0.5, hidden + residual, residual)
        ''')
    assert "one shape" in rewrite.cause and "one shape" in rewrite.title and rewrite.settings == ()


def test_an_if_else_assignment_on_int_of_a_tensor_becomes_torch_where_and_torch_is_imported() -> None:
    check('''
        def normalise(x, steps):
            if int(steps.sum()) > 100:
                y = x / x.norm(dim=-1, keepdim=True)
            else:
                y = x * 0.5
            return y
        ''', 2, ITEM, "item-where", '''
        import torch
        def normalise(x, steps):
            y = torch.where(steps.sum() > 100, x / x.norm(dim=-1, keepdim=True), x * 0.5)
            return y
        ''')


def test_a_conditional_expression_on_item_becomes_torch_where() -> None:
    check('''
        import torch

        def scale(x, flag):
            return x * 2 if flag.float().mean().item() > 0.5 else x
        ''', 4, ITEM, "item-where", '''
        import torch

        def scale(x, flag):
            return torch.where(flag.float().mean() > 0.5, x * 2, x)
        ''')


@pytest.mark.parametrize("body", [
    "if x.sum().item() > 0:\n        return 1.0\n    return -1.0",  # both arms numbers: the original returns no tensor
    "if x.sum().item() > 0 and x.shape[0] > 2:\n        return x\n    return -x",  # Python logic
    "if x.sum().item() > 0:\n        return x[:, :2]\n    return x",  # a slice: another shape
    "if x.sum() > 0:\n        return x\n    return -x",  # no number read: tensor-where's, by its label
    "if x.sum().item() > 0:\n        y = x\n        z = x\n    return x",  # not one expression per arm
])
def test_item_where_declines(body: str) -> None:
    assert candidate(f"def f(x):\n    {body}\n", 2, ITEM, "item-where") is None


# ---- clone-repeated-input -----------------------------------------------------------------------

@pytest.mark.parametrize("label", [DUPLICATE, OTHER, ""])
def test_one_tensor_given_twice_to_a_function_apply_is_cloned_where_it_repeats(label: str) -> None:
    rewrite = check('''
        class GatedProduct(torch.autograd.Function):
            pass

        def mix(x, mask, self_gate):
            out = GatedProduct.apply(mask, mask, x, self_gate.weight, self_gate.weight, 0.1)
            return out
        ''', 5, label, "clone-repeated-input", '''
        class GatedProduct(torch.autograd.Function):
            pass

        def mix(x, mask, self_gate):
            out = GatedProduct.apply(mask, mask.clone(), x, self_gate.weight, self_gate.weight.clone(), 0.1)
            return out
        ''')
    assert "mask" in rewrite.title and "self_gate.weight" in rewrite.title


@pytest.mark.parametrize("line", [
    "out = GatedProduct.apply(mask, x, 0.1)",  # nothing repeats
    "out = GatedProduct.apply(mask.float(), mask.float())",  # calls: fresh tensors already
    "out = GatedProduct.apply(None, None, mask)",
    "out = combine(mask, mask)",  # not an apply
])
def test_clone_repeated_input_declines(line: str) -> None:
    assert candidate(f"def mix(x, mask):\n    {line}\n    return out\n", 2, DUPLICATE, "clone-repeated-input") is None


# ---- index-select-comprehension -----------------------------------------------------------------

DATA_DEPENDENT = "Data dependent operator"


@pytest.mark.parametrize("label", [DATA_DEPENDENT, ITEM, ""])
def test_a_comprehension_over_an_index_tensors_elements_becomes_index_select_and_unbind(label: str) -> None:
    check('''
        import torch

        def pick_heads(attn, head_idx):
            heads = [attn[:, head_idx[i]] for i in range(len(head_idx))]
            return torch.stack(heads, 1)
        ''', 4, label, "index-select-comprehension", '''
        import torch

        def pick_heads(attn, head_idx):
            heads = list(attn.index_select(1, head_idx).unbind(1))
            return torch.stack(heads, 1)
        ''')


@pytest.mark.parametrize(("comprehension", "after"), [
    ("[x[:, :, int(idx[i])] for i in range(k)]", "list(x.index_select(2, idx[:k]).unbind(2))"),
    ("[x[idx[i].item()] for i in range(idx.shape[0])]", "list(x.index_select(0, idx).unbind(0))"),
    ("[x[:, idx[i]] for i in range(idx.size(0))]", "list(x.index_select(1, idx).unbind(1))"),
    ("[(x + 1)[i, :] for i in idx.tolist()]", "list((x + 1).index_select(0, idx).unbind(0))"),
    ("[x[:, int(i)] for i in idx]", "list(x.index_select(1, idx).unbind(1))"),
])
def test_the_forms_of_an_index_tensors_elements(comprehension: str, after: str) -> None:
    check(f"def f(x, idx, k):\n    cols = {comprehension}\n    return cols\n", 2, DATA_DEPENDENT, "index-select-comprehension",
          f"def f(x, idx, k):\n    cols = {after}\n    return cols\n")


@pytest.mark.parametrize("comprehension", [
    "[x[:, i] for i in idx]",  # idx may be a list of ints: nothing says it is a tensor
    "[x[:, idx[i]] for i in range(k) if i > 0]",  # a condition
    "[x[i][:, idx[i]] for i in range(k)]",  # the indexed tensor reads the loop variable
    "[x[..., idx[i]] for i in range(k)]",  # an ellipsis: the dimension is not known
    "[x[:2, idx[i]] for i in range(k)]",  # a partial slice
    "[x[:, idx[i + 1]] for i in range(k)]",  # not the loop's element
    "[x[idx[i], idx[j]] for i in range(k) for j in range(k)]",
])
def test_index_select_comprehension_declines(comprehension: str) -> None:
    source = f"def f(x, idx, k):\n    cols = {comprehension}\n    return cols\n"
    assert candidate(source, 2, DATA_DEPENDENT, "index-select-comprehension") is None


# ---- tensor-offset ------------------------------------------------------------------------------

@pytest.mark.parametrize("label", [ITEM, ""])
def test_a_roll_by_a_number_read_out_of_a_tensor_becomes_index_select_on_a_tensor_shift(label: str) -> None:
    check('''
        def shift_tokens(hidden, offset):
            return torch.roll(hidden, shifts=-int(offset), dims=1)
        ''', 2, label, "tensor-offset", '''
        import torch
        def shift_tokens(hidden, offset):
            return hidden.index_select(1, (torch.arange(hidden.shape[1], device=hidden.device) - (-offset)) % hidden.shape[1])
        ''')


def test_a_method_roll_with_item_and_a_negative_dim() -> None:
    after = "x.index_select(-1, (torch.arange(x.shape[-1], device=x.device) - t.sum()) % x.shape[-1])"
    check("import torch\n\ndef f(x, t):\n    return x.roll(t.sum().item(), -1)\n", 4, ITEM, "tensor-offset",
          f"import torch\n\ndef f(x, t):\n    return {after}\n")


@pytest.mark.parametrize(("call", "after"), [
    ("x.narrow(1, int(start), 4)", "x.narrow(1, start, 4)"),
    ("torch.narrow(x, 0, start.item() + 1, 2)", "torch.narrow(x, 0, start + 1, 2)"),
])
def test_narrow_from_a_number_read_out_of_a_tensor_keeps_the_start_a_tensor(call: str, after: str) -> None:
    check(f"import torch\n\ndef f(x, start):\n    return {call}\n", 4, ITEM, "tensor-offset",
          f"import torch\n\ndef f(x, start):\n    return {after}\n")


@pytest.mark.parametrize("call", [
    "torch.roll(x, shifts=int(t))",  # no dims: the flattened roll
    "torch.roll(x, shifts=(int(t), 1), dims=(0, 1))",  # several shifts
    "torch.roll(x, shifts=int(t), dims=d)",  # dims not a literal
    "torch.roll(x, shifts=2, dims=0)",  # no number read
    "x.narrow(1, int(t), int(t))",  # the length must be a Python int
    "x.narrow(1, 0, 4)",
])
def test_tensor_offset_declines(call: str) -> None:
    assert candidate(f"import torch\n\ndef f(x, t, d):\n    return {call}\n", 4, ITEM, "tensor-offset") is None


# ---- assert-to-check: a number read out of a tensor that flows into checks ----------------------

def test_a_number_read_only_to_be_checked_stays_a_tensor_and_its_checks_become_tensor_checks() -> None:
    rewrite = check('''
        import torch

        def embed(tokens, lengths):
            longest = lengths.max().item()
            assert longest <= tokens.shape[1], "lengths exceed the padded sequence"
            if longest == 0:
                raise ValueError("empty batch")  # nothing to embed
            return tokens * 2
        ''', 4, ITEM, "assert-to-check", '''
        import torch

        def embed(tokens, lengths):
            longest = lengths.max()
            torch._assert_async(longest <= tokens.shape[1], "lengths exceed the padded sequence")
            # nothing to embed
            torch._assert_async(torch.logical_not(longest == 0), "empty batch")
            return tokens * 2
        ''')
    assert "longest" in rewrite.title and rewrite.settings == ()


@pytest.mark.parametrize("after", [
    "return tokens[:, :longest]",  # also a size: check-size's
    "return tokens * longest",  # also arithmetic
    "if longest > 3:\n        tokens = tokens + 1\n    return tokens",  # a branch that is not a check
    "assert longest <= 9 and longest > 0\n    return tokens",  # Python logic in the check
])
def test_a_read_number_used_beyond_checks_is_not_kept_a_tensor_by_assert_to_check(after: str) -> None:
    source = f"def embed(tokens, lengths):\n    longest = lengths.max().item()\n    assert longest <= 9, 'long'\n    {after}\n"
    rewrite = candidate(source, 2, ITEM, "assert-to-check")
    assert rewrite is None


# ---- item-where: a number read out of a tensor that flows into one branch ----------------------

def test_a_number_read_only_to_branch_on_stays_a_tensor_and_the_branch_becomes_torch_where() -> None:
    rewrite = check('''
        import torch

        def gate(hidden, residual, score):
            confidence = score.sigmoid().mean().item()
            scaled = hidden * 2
            if confidence > 0.5:
                return scaled + residual
            return residual
        ''', 4, ITEM, "item-where", '''
        import torch

        def gate(hidden, residual, score):
            confidence = score.sigmoid().mean()
            scaled = hidden * 2
            return torch.where(confidence > 0.5, scaled + residual, residual)
        ''')
    assert "confidence" in rewrite.title and "one shape" in rewrite.cause


def test_a_flag_read_out_of_a_tensor_picks_an_assignment() -> None:
    check('''
        def mix(x, y, counts):
            full = counts.min().item() > 0
            if full:
                out = x + y
            else:
                out = x
            return out
        ''', 2, ITEM, "item-where", '''
        import torch
        def mix(x, y, counts):
            full = counts.min() > 0
            out = torch.where(full, x + y, x)
            return out
        ''')


@pytest.mark.parametrize("after", [
    "if s > 0:\n        return x\n    return s * x",  # read again after the branch
    "y = x * s\n    return y",  # no branch
    "if s > 0:\n        return 1.0\n    return 0.0",  # both arms numbers
])
def test_item_where_does_not_follow_a_number_used_beyond_one_branch(after: str) -> None:
    source = f"def f(x):\n    s = x.sum().item()\n    {after}\n"
    assert candidate(source, 2, ITEM, "item-where") is None


# ---- nonzero-to-where ---------------------------------------------------------------------------

DYNAMIC = "Dynamic shape operator"


@pytest.mark.parametrize("label", [DYNAMIC, ""])
def test_rows_a_mask_selects_written_become_one_dense_torch_where(label: str) -> None:
    rewrite = check('''
        import torch

        def refresh(memory, update, is_new):
            rows = is_new.nonzero(as_tuple=True)[0]
            memory[rows] = torch.tanh(update[rows]) * 0.5 + memory[rows]
            return memory
        ''', 4, label, "nonzero-to-where", '''
        import torch

        def refresh(memory, update, is_new):
            memory.copy_(torch.where(is_new.bool().reshape(-1, *([1] * (memory.dim() - 1))), torch.tanh(update) * 0.5 + memory, memory))
            return memory
        ''')
    assert "every row" in rewrite.title


@pytest.mark.parametrize(("selection", "mask"), [
    ("torch.nonzero(lengths > 3).squeeze(-1)", "(lengths > 3)"),
    ("torch.where(keep)[0]", "keep.bool()"),
    ("keep.nonzero().view(-1)", "keep.bool()"),
    ("keep.nonzero(as_tuple=False).view(-1)", "keep.bool()"),
])
def test_the_forms_of_a_selection(selection: str, mask: str) -> None:
    check(f"import torch\n\ndef f(out, keep, lengths):\n    idx = {selection}\n    out[idx] = 0.0\n    return out\n", 4, DYNAMIC,
          "nonzero-to-where", "import torch\n\ndef f(out, keep, lengths):\n"
          f"    out.copy_(torch.where({mask}.reshape(-1, *([1] * (out.dim() - 1))), 0.0, out))\n    return out\n")


@pytest.mark.parametrize("body", [
    "idx = torch.nonzero(keep)\n    out[idx] = 0.0\n    return out",  # 2-d: one row per index, not a mask's rows
    "idx = keep.nonzero(as_tuple=True)[0]\n    out[idx] = 0.0\n    return out, idx",  # idx read again
    "idx = keep.nonzero(as_tuple=True)[0]\n    y = out * 2\n    out[idx] = y[idx]\n    return out",  # not the next statement
    "idx = keep.nonzero(as_tuple=True)[0]\n    out[idx] = x[idx + 1]\n    return out",  # idx read beyond t[idx]
    "idx = torch.where(keep, 1, 0)[0]\n    out[idx] = 0.0\n    return out",  # the three-argument where
])
def test_nonzero_to_where_declines(body: str) -> None:
    assert candidate(f"import torch\n\ndef f(out, keep, x):\n    {body}\n", 4, DYNAMIC, "nonzero-to-where") is None


def test_an_offset_read_out_of_a_tensor_that_only_rolls_and_narrows_stays_a_tensor() -> None:
    rewrite = check('''
        import torch

        def shift_window(hidden, offset):
            shift = int(offset)
            rolled = torch.roll(hidden, shifts=-shift, dims=1)
            return rolled.narrow(1, shift, 2)
        ''', 4, ITEM, "tensor-offset", '''
        import torch

        def shift_window(hidden, offset):
            shift = offset
            rolled = hidden.index_select(1, (torch.arange(hidden.shape[1], device=hidden.device) - (-shift)) % hidden.shape[1])
            return rolled.narrow(1, shift, 2)
        ''')
    assert rewrite.title.startswith("keep shift a tensor: narrow from it, roll with index_select by it")


@pytest.mark.parametrize("use", [
    "return hidden.roll(shift, 1) * shift",  # also arithmetic
    "return hidden.narrow(1, 0, shift)",  # a length: a size must be an int
    "return hidden.roll(shift)",  # a flattened roll
])
def test_an_offset_used_beyond_shifts_and_starts_is_not_kept_a_tensor(use: str) -> None:
    source = f"def f(hidden, offset):\n    shift = int(offset)\n    {use}\n"
    assert candidate(source, 2, ITEM, "tensor-offset") is None
