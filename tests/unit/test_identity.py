"""A graph break's identity across edits (dynscope.analysis.identity), on hand-made breaks."""

from __future__ import annotations

import pytest

from dynscope.analysis.breaks import BreakGroup
from dynscope.analysis.compare import relative
from dynscope.analysis.identity import frame_identities, match_breaks, normalised, origin_function, origin_qualname
from dynscope.model import StackFrame


def group(line: int, code: str, *, kind: str = "GB0059", function: str = "forward", qualname: str | None = "Block.forward",
          above: tuple[str, ...] = (), below: tuple[str, ...] = (), resumed_into: str | None = None,
          statement: str | None = None) -> BreakGroup:
    frame = StackFrame("/p/model.py", line, function, code, qualname, statement, above, below)
    occurrence = _Occurrence(resumed_into)
    return BreakGroup(headline=kind, gb_type=kind, gb_id=kind, doc_link=None, reason=kind, explanation=None, hints=(),
                      location=frame, occurrences=(occurrence,))  # type: ignore[arg-type]


class _Occurrence:  # what BreakGroup reads of a GraphBreak here
    def __init__(self, resumed_into: str | None) -> None:
        self.resumed_into = resumed_into
        self.compile_id = "0/0"


def matched(before: list[BreakGroup], after: list[BreakGroup]):
    return match_breaks(before, after, relative, "/p", "/p")


@pytest.mark.parametrize("code, same_as", [
    ('print("a")  # a comment', 'print("a")'),
    ("print( 'a' )", 'print("a")'),
    ("f(a, b,)", "f(a,b)"),
    ('print("# not a comment")', "print('# not a comment')"),
    ("foo(a,  # unfinished", "foo(a,"),
    ("x = (\n    a.b(c, d)  # why\n    + e\n)", "x = a.b(c, d) + e"),  # a statement ruff split, parenthesised
])
def test_code_is_compared_as_a_formatting_blind_diff_sees_it(code, same_as):
    assert normalised(code) == normalised(same_as)


def test_resume_functions_are_named_by_the_function_they_continue():
    assert origin_function("torch_dynamo_resume_in_forward_at_21") == "forward"
    assert origin_function("torch_dynamo_resume_in_torch_dynamo_resume_in_f_at_3_at_9") == "f"
    assert origin_function("forward_at_21") == "forward_at_21"
    assert origin_qualname("Block.torch_dynamo_resume_in_forward_at_21") == "Block.forward"


def test_lines_added_above_move_every_break_and_add_none():
    before = [group(20, 'print("x")', above=("y = f(x)",)), group(21, "if y.mean() > 0:", kind="GB0170"),
              group(23, "s = y.item()", kind="GB0124")]
    after = [group(n + 2, g.location.code or "", kind=g.gb_id or "", above=g.location.above) for n, g in
             zip((20, 21, 23), before)]
    result = matched(before, after)
    assert not result.added and not result.removed
    assert [(a.location.line, b.location.line) for a, b in result.moved] == [(20, 22), (21, 23), (23, 25)]


def test_a_new_break_of_a_known_kind_is_new_even_beside_its_twin():
    before = [group(20, 'print("x")')]
    after = [group(20, 'print("debug")'), group(21, 'print("x")')]
    result = matched(before, after)
    assert [g.location.code for g in result.added] == ['print("debug")']
    assert [(a.location.line, b.location.line) for a, b in result.moved] == [(20, 21)]


def test_the_same_line_twice_pairs_in_order():
    before = [group(10, "log(x)"), group(30, "log(x)")]
    after = [group(12, "log(x)"), group(40, "log(x)")]
    assert [(a.location.line, b.location.line) for a, b in matched(before, after).pairs] == [(10, 12), (30, 40)]


def test_a_reformatted_line_matches_by_its_neighbours_or_its_likeness():
    before = [group(5, "out = self.layer(x, mask, scale)", above=("h = x",), below=("return out",))]
    split = [group(7, "out = self.layer(", above=("h = x",), below=("x,", "mask,"))]  # ruff split the call
    assert matched(before, split).pairs
    rewritten = [group(7, "y = something_else()", above=("h = x",), below=("return out",))]
    assert matched(before, rewritten).pairs  # the same place between the same lines
    same_place = [group(5, "<source:1ec113c2>")]  # a shared bundle withholds the text
    assert matched(before, same_place).pairs


def test_functions_and_kinds_must_agree():
    before = [group(5, "if h.sum() > 0:", qualname="Encoder.forward", kind="GB0170")]
    other_class = [group(5, "if h.sum() > 0:", qualname="Decoder.forward", kind="GB0170")]
    result = matched(before, other_class)
    assert len(result.added) == 1 and len(result.removed) == 1
    other_kind = [group(5, "if h.sum() > 0:", qualname="Encoder.forward", kind="GB0124")]
    assert not matched(before, other_kind).pairs
    # An old capture has no qualified name: the code object's name decides.
    old = [group(9, "if h.sum() > 0:", qualname=None, kind="GB0170")]
    assert matched(old, before).pairs


def test_resumed_frames_are_known_by_the_break_they_resume_after():
    before = [group(20, 'print("x")', resumed_into="torch_dynamo_resume_in_forward_at_20"),
              group(21, "if y.mean() > 0:", kind="GB0170", resumed_into="torch_dynamo_resume_in_forward_at_21")]
    after = [group(22, 'print("x")', resumed_into="torch_dynamo_resume_in_forward_at_22"),
             group(23, "if y.mean() > 0:", kind="GB0170", resumed_into="torch_dynamo_resume_in_forward_at_23")]
    frame_a, frame_b = frame_identities(matched(before, after))
    assert frame_a("torch_dynamo_resume_in_forward_at_20") == frame_b("torch_dynamo_resume_in_forward_at_22")
    assert frame_a("torch_dynamo_resume_in_forward_at_21") == frame_b("torch_dynamo_resume_in_forward_at_23")
    assert frame_a("torch_dynamo_resume_in_forward_at_20") != frame_b("torch_dynamo_resume_in_forward_at_23")
    assert frame_a("forward") == frame_b("forward") != frame_b("main")


def test_a_statement_split_over_lines_is_the_statement():
    """torch names one physical line of a statement (``).nonzero()`` after ``ruff format`` split it);
    the capture's whole statement is what is compared."""
    before = [group(173, "hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()",
                    statement="hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()", kind="GB0036")]
    after = [group(245, ").nonzero()", statement="hit = torch.greater(\nmask.sum(dim=(-1, -2)), 0\n).nonzero()",
                   kind="GB0036")]
    result = matched(before, after)
    assert not result.added and [(a.location.line, b.location.line) for a, b in result.moved] == [(173, 245)]


def test_the_same_file_in_two_checkouts_has_not_moved():
    before = [group(20, 'print("x")')]
    after = [BreakGroup(**{**before[0].__dict__, "location": StackFrame("/q/model.py", 20, "forward", 'print("x")')})]
    result = match_breaks(before, after, relative, "/p", "/q")
    assert result.pairs and not result.moved and not result.added
