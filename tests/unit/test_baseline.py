"""The CI side of check --baseline, without torch: allow files, annotations, finding lines."""

from __future__ import annotations

import pytest

from dynscope.analysis.baseline import Allowance, Finding, load_allowances
from dynscope.commands.check import _annotation
from dynscope.errors import DynscopeError

BREAK = Finding("graph_break", "model.py", 212, "new graph break [GB0059]",
                "Failed to trace builtin operator", "GB0059")


def test_a_finding_reads_like_a_compiler_message():
    assert BREAK.compiler_line() == "model.py:212: new graph break [GB0059] Failed to trace builtin operator"


@pytest.mark.parametrize("allowance, covers", [
    (Allowance("GB0059", None, "r"), True),
    (Allowance("GB0170", None, "r"), False),
    (Allowance(None, "model.py:*", "r"), True),
    (Allowance(None, "model.py:21", "r"), False),
    (Allowance("GB0059", "*/other.py:*", "r"), False),
])
def test_allowances_match_by_id_and_place(allowance, covers):
    assert allowance.covers(BREAK) is covers


def test_allow_files_need_a_reason_and_a_target(tmp_path):
    good = tmp_path / "good.toml"
    good.write_text('[[allow]]\ngb_id = "GB0059"\nwhere = "model.py:*"\nreason = "known"\n')
    assert load_allowances(str(good)) == [Allowance("GB0059", "model.py:*", "known")]
    for body, message in (('[[allow]]\ngb_id = "GB1"\n', "needs a reason"),
                          ('[[allow]]\nreason = "x"\n', "needs gb_id and/or where"),
                          ("allow = 3\n", "must be a list"),
                          ("[[allow\n", "is not valid TOML")):
        bad = tmp_path / "bad.toml"
        bad.write_text(body)
        with pytest.raises(DynscopeError, match=message):
            load_allowances(str(bad))
    with pytest.raises(DynscopeError, match="cannot read the allow file"):
        load_allowances(str(tmp_path / "missing.toml"))


def test_github_annotations_escape_their_data_and_properties():
    line = _annotation("error", "new graph break [GB0059]", "50% of it\nbroke", "dir,1/a:b.py", 7)
    assert line == "::error file=dir%2C1/a%3Ab.py,line=7,title=new graph break [GB0059]::50%25 of it%0Abroke"
    assert _annotation("error", "dynscope check", "over", None, None) == "::error title=dynscope check::over"
