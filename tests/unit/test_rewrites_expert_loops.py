"""dense-expert-loop (issue 40, item 2): a loop over the experts ``nonzero()`` found, made dense.

Each case gives the file before, the line torch named, and the file after, exactly; the break's label varies (the
code alone decides), and the change is anchored at the loop, so the breaks torch reports at the ``nonzero()`` and
inside the loop share one trial. The generated code must compile; the declines show where the dense form would
change what the loop computes.
"""

from __future__ import annotations

import textwrap

import pytest

from dynscope.rewrites import BreakSite, Rewrite
from dynscope.rewrites.catalogue import RULES, rewrites_for

DYNAMIC = "Dynamic shape operator"
BRANCH = "Data-dependent branching"


def _src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def _dense(before: str, line: int, label: str = DYNAMIC) -> Rewrite | None:
    found = {r.rule: r for r in rewrites_for(_src(before), BreakSite(line=line, gb_type=label, reason=""))}
    return found.get("dense-expert-loop")


# transformers' eager experts (Mixtral's shape, and its relatives'): one-hot routing, the experts hit by nonzero()
MIXTRAL = '''
    import torch


    class Experts(torch.nn.Module):
        def forward(self, hidden_states, top_k_index, top_k_weights):
            final_hidden_states = torch.zeros_like(hidden_states)
            with torch.no_grad():
                expert_mask = torch.nn.functional.one_hot(top_k_index, num_classes=self.num_experts + 1)
                expert_mask = expert_mask.permute(2, 1, 0)
                expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()

            for expert_idx in expert_hit:
                expert_idx = expert_idx[0]
                if expert_idx == self.num_experts:
                    continue
                top_k_pos, token_idx = torch.where(expert_mask[expert_idx])
                current_state = hidden_states[token_idx]
                current = torch.nn.functional.linear(current_state, self.up_proj[expert_idx]) * top_k_weights[token_idx, top_k_pos, None]
                final_hidden_states.index_add_(0, token_idx, current.to(final_hidden_states.dtype))
            return final_hidden_states
    '''

MIXTRAL_DENSE = '''
    import torch


    class Experts(torch.nn.Module):
        def forward(self, hidden_states, top_k_index, top_k_weights):
            final_hidden_states = torch.zeros_like(hidden_states)
            with torch.no_grad():
                expert_mask = torch.nn.functional.one_hot(top_k_index, num_classes=self.num_experts + 1)
                expert_mask = expert_mask.permute(2, 1, 0)

            for expert_idx in range(torch.greater(expert_mask.sum(dim=(-1, -2)), 0).shape[0]):
                if expert_idx == self.num_experts:
                    continue
                routed = expert_mask[expert_idx]
                top_k_pos, token_idx = torch.unravel_index(torch.arange(routed.numel(), device=routed.device), routed.shape)
                current_state = hidden_states[token_idx]
                current = torch.nn.functional.linear(current_state, self.up_proj[expert_idx]) * top_k_weights[token_idx, top_k_pos, None]
                final_hidden_states.index_add_(0, token_idx, torch.where((routed != 0).reshape(-1, *([1] * (final_hidden_states.dim() - 1))), current.to(final_hidden_states.dtype), 0))
            return final_hidden_states
    '''  # noqa: E501  (the rewritten line, exactly as written)


@pytest.mark.parametrize(("line", "label"), [(10, DYNAMIC), (14, BRANCH), (16, ""), (10, "Unsupported method call")])
def test_the_experts_loop_becomes_dense_wherever_torch_breaks_in_it(line: int, label: str) -> None:
    rewrite = _dense(MIXTRAL, line, label)
    assert rewrite is not None
    assert rewrite.source == _src(MIXTRAL_DENSE)
    compile(rewrite.source, "<rewritten>", "exec")
    assert rewrite.line == 12  # the loop's line: every break in it is one trial
    assert "denser" in rewrite.title and "as many times the loop's work as there are experts" in rewrite.title


def test_a_flattened_index_made_a_number_and_a_skip_of_an_empty_selection() -> None:
    rewrite = _dense('''
        import torch

        def experts(hidden, mask, weights, up):
            out = torch.zeros_like(hidden)
            with torch.no_grad():
                hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero().squeeze(-1)
            for e in hit:
                e = e.item()
                pos, tok = torch.where(mask[e])
                if tok.numel() == 0:
                    continue
                out.index_add_(0, tok, (hidden[tok] @ up[e]) * weights[tok, pos, None])
            return out
        ''', 6)
    assert rewrite is not None
    assert rewrite.source == _src('''
        import torch

        def experts(hidden, mask, weights, up):
            out = torch.zeros_like(hidden)
            with torch.no_grad():
                pass
            for e in range(torch.greater(mask.sum(dim=(-1, -2)), 0).shape[0]):
                routed = mask[e]
                pos, tok = torch.unravel_index(torch.arange(routed.numel(), device=routed.device), routed.shape)
                if tok.numel() == 0:
                    continue
                out.index_add_(0, tok, torch.where((routed != 0).reshape(-1, *([1] * (out.dim() - 1))), (hidden[tok] @ up[e]) * weights[tok, pos, None], 0))
            return out
        ''')  # noqa: E501  (the rewritten line, exactly as written)


def test_rows_read_only_for_their_number_and_one_index_of_a_mask() -> None:
    rewrite = _dense('''
        import torch

        def experts(hidden, route, w):
            out = torch.zeros_like(hidden)
            for expert in (torch.nn.functional.one_hot(route, 4).sum(0) > 0).nonzero():
                rows = torch.where(route == expert[0])[0]
                out.index_add_(0, rows, hidden[rows] @ w[expert[0]])
            return out
        ''', 6)
    assert rewrite is not None
    assert rewrite.source == _src('''
        import torch

        def experts(hidden, route, w):
            out = torch.zeros_like(hidden)
            for expert in range((torch.nn.functional.one_hot(route, 4).sum(0) > 0).shape[0]):
                routed = route == expert
                rows = torch.unravel_index(torch.arange(routed.numel(), device=routed.device), routed.shape)[0]
                out.index_add_(0, rows, torch.where((routed != 0).reshape(-1, *([1] * (out.dim() - 1))), hidden[rows] @ w[expert], 0))
            return out
        ''')


def test_a_row_made_a_number_under_another_name_and_nonzeros_explicit_keyword() -> None:
    rewrite = _dense('''
        import torch

        def experts(hidden, mask, up):
            out = torch.zeros_like(hidden)
            hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero(as_tuple=False)
            for row in hit:
                e = int(row.item())
                pos, tok = torch.where(mask[e].squeeze(0))
                out.index_add_(0, tok, hidden[tok] @ up[e])
            return out
        ''', 5)
    assert rewrite is not None
    assert rewrite.source == _src('''
        import torch

        def experts(hidden, mask, up):
            out = torch.zeros_like(hidden)
            for row in range(torch.greater(mask.sum(dim=(-1, -2)), 0).shape[0]):
                e = row
                routed = mask[e].squeeze(0)
                pos, tok = torch.unravel_index(torch.arange(routed.numel(), device=routed.device), routed.shape)
                out.index_add_(0, tok, torch.where((routed != 0).reshape(-1, *([1] * (out.dim() - 1))), hidden[tok] @ up[e], 0))
            return out
        ''')  # noqa: E501  (the rewritten line, exactly as written)
    flattened = _dense('''
        import torch

        def experts(hidden, mask, up):
            out = torch.zeros_like(hidden)
            hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero(as_tuple=False).view(-1)
            for e in hit:
                pos, tok = torch.where(mask[e])
                out.index_add_(0, tok, hidden[tok] @ up[e])
            return out
        ''', 5)
    assert flattened is not None and "for e in range(torch.greater(mask.sum(dim=(-1, -2)), 0).shape[0]):" in flattened.source


def test_a_mask_already_named_is_used_as_it_is() -> None:
    rewrite = _dense('''
        import torch

        def experts(hidden, route, w, routed):
            out = torch.zeros_like(hidden)
            for e in route.nonzero(as_tuple=True)[0]:
                m = route == e
                rows, = torch.where(m)
                out.index_add_(0, rows, hidden[rows] * w[e])
            return out
        ''', 5)
    assert rewrite is not None
    assert "    m = route == e\n        rows, = torch.unravel_index(torch.arange(m.numel(), device=m.device), m.shape)\n" \
        in rewrite.source
    assert "torch.where((m != 0).reshape(" in rewrite.source and "routed_2" not in rewrite.source


_LOOP = '''
    import torch

    def experts(hidden, mask, weights, up, log):
        out = torch.zeros_like(hidden)
        hit = mask.sum(dim=(-1, -2)).nonzero()
        for e in hit:
            {first}
            pos, tok = torch.where(mask[e])
            {body}
        {after}
        return out
    '''


@pytest.mark.parametrize(("first", "body", "after"), [
    # the row read whole: experts[e] with e a one-element tensor row cannot become a number
    ("pass", "out.index_add_(0, tok, hidden[tok] @ up[e])", "pass"),
    # the index's size matters: a mean over the selected tokens
    ("e = e[0]", "out.index_add_(0, tok, hidden[tok] / tok.shape[0])", "pass"),
    # read inside an index, but not as one: x[tok.shape[0]]
    ("e = e[0]", "out.index_add_(0, tok, hidden[tok] * up[tok.shape[0]])", "pass"),
    # two writes out of the loop
    ("e = e[0]", "out.index_add_(0, tok, hidden[tok])\n            log.index_add_(0, tok, hidden[tok])", "pass"),
    # along another dimension
    ("e = e[0]", "out.index_add_(1, tok, hidden[:, tok])", "pass"),
    # no index_add_: the selection is written some other way
    ("e = e[0]", "out[tok] += hidden[tok] @ up[e]", "pass"),
    # the experts hit are read again after the loop
    ("e = e[0]", "out.index_add_(0, tok, hidden[tok] @ up[e])", "log.append(hit)"),
    # a skip on the selection's size that is not its emptiness: the dense size would change it
    ("e = e[0]", "if tok.shape[0] > 3:\n                continue\n            out.index_add_(0, tok, hidden[tok] @ up[e])",
     "pass"),
    # the token index read after the loop
    ("e = e[0]", "out.index_add_(0, tok, hidden[tok] @ up[e])", "log.append(tok)"),
])
def test_the_dense_form_declines_where_it_would_change_the_sum(first: str, body: str, after: str) -> None:
    source = _LOOP.format(first=first, body=body, after=after)
    compile(_src(source), "<before>", "exec")
    assert _dense(source, 5) is None


def test_a_loop_with_an_else_is_left_alone() -> None:
    assert _dense('''
        import torch

        def experts(hidden, mask, up):
            out = torch.zeros_like(hidden)
            for e in mask.sum(dim=(-1, -2)).nonzero():
                e = e[0]
                pos, tok = torch.where(mask[e])
                out.index_add_(0, tok, hidden[tok] @ up[e])
            else:
                out = out * 2
            return out
        ''', 5) is None


def test_registered_beside_the_other_nonzero_rule() -> None:
    names = [name for name, _rule in RULES]
    assert names.index("dense-expert-loop") == names.index("nonzero-to-where") + 1
