"""Torch's escape hatches as rewrites (dynscope/rewrites/hatches.py), without torch: the exact text
after, where they are offered (only what the installed torch has, never on a compiled callable, after
every specific rule), and how fix tries them (a fallback that waits for the other trials on its break).
tests/integration/test_hatches_run.py compiles the texts for real."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from dynscope.analysis.fix_problems import ProblemKey
from dynscope.analysis.fix_verdict import RunFacts, metrics_of
from dynscope.analysis.fix_view import fix_problems, problem_counts
from dynscope.analysis.remedies import BreakFacts, FixProblem, Remedy, remedies_for, select
from dynscope.analysis.run_view import run_view
from dynscope.events import ChangeSource
from dynscope.fix.judging import Judge
from dynscope.fix.plan import Plan, fixed_by_first, plan_trials
from dynscope.fix.source_reader import reader_for
from dynscope.model import Capture
from dynscope.model.fix import Features, program_seconds, trial_outputs
from dynscope.rewrites import BreakSite, Offers
from dynscope.rewrites.catalogue import HATCHES, RULES, rewrites_for

BOTH = Offers(frozenset({"nonstrict_trace", "leaf_function"}), frozenset({"forward"}))

LOCKED = '''"""A model."""
import threading

import torch

_LOCK = threading.Lock()


# the weights are shared with a loader thread
def scaled(x, w):
    with _LOCK:
        return x * w


def forward(x, w):
    return scaled(x + 1, w) - 1
'''

NONSTRICT_AFTER = '''"""A model."""
import threading

import torch
import torch._dynamo

_LOCK = threading.Lock()


# the weights are shared with a loader thread
@torch._dynamo.nonstrict_trace
def scaled(x, w):
    with _LOCK:
        return x * w


def forward(x, w):
    return scaled(x + 1, w) - 1
'''

LEAF_AFTER = '''"""A model."""
import threading

import torch
import torch._dynamo.decorators

_LOCK = threading.Lock()


# the weights are shared with a loader thread
@torch._dynamo.decorators.leaf_function
def scaled(x, w):
    with _LOCK:
        return x * w


@scaled.register_fake
def _scaled_fake(x, w):
    return torch.empty_like(x)


def forward(x, w):
    return scaled(x + 1, w) - 1
'''

SITE = BreakSite(12, "Unsupported context manager", "Dynamo does not know how to enter a `_thread.lock` context manager.")


def _hatches(source: str, site: BreakSite, offers: Offers = BOTH) -> dict[str, str]:
    return {r.rule: r.source for r in rewrites_for(source, site, offers) if r.opaque}


def test_the_exact_text_of_each_hatch():
    assert _hatches(LOCKED, SITE) == {"nonstrict-trace": NONSTRICT_AFTER, "leaf-function": LEAF_AFTER}
    leaf = next(r for r in rewrites_for(LOCKED, SITE, BOTH) if r.rule == "leaf-function")
    # a wrong fake fails its trial instead of being believed
    assert leaf.settings == ("leaf_function_validate_outputs",) and not leaf.leaves_graph
    assert leaf.title == ("run scaled() as one opaque call in the graph: @torch._dynamo.decorators.leaf_function "
                          "on its def (line 10), its output shaped like x")


def test_only_the_hatches_the_installed_torch_has():
    assert rewrites_for(LOCKED, SITE) == []  # nothing recorded: nothing offered
    assert set(_hatches(LOCKED, SITE, Offers(frozenset({"leaf_function"})))) == {"leaf-function"}
    assert set(_hatches(LOCKED, SITE, Offers(frozenset({"nonstrict_trace"})))) == {"nonstrict-trace"}


def test_never_on_a_function_given_to_torch_compile():
    assert _hatches(LOCKED, SITE, Offers(BOTH.hatches, frozenset({"scaled"}))) == {}
    assert _hatches(LOCKED, BreakSite(17, "", "")) == {}  # the break in forward itself
    # a compiled function defined inside the one around it: the outer one never runs compiled
    inner = LOCKED.replace("def forward(x, w):\n    return scaled(x + 1, w) - 1\n",
                           "def build(x, w):\n    def forward(v):\n        with _LOCK:\n            return v * w\n"
                           "    return forward(x)\n")
    assert "def build(x, w):\n    def forward(v):" in inner
    assert _hatches(inner, BreakSite(18, "", "")) == {}
    assert set(_hatches(inner, BreakSite(18, "", ""), Offers(BOTH.hatches))) == {"nonstrict-trace", "leaf-function"}


def test_the_outermost_function_around_the_break_that_takes_and_returns_tensors():
    nested = LOCKED.replace("    with _LOCK:\n        return x * w\n",
                            "    def inner(v):\n        with _LOCK:\n            return v * w\n    return inner(x)\n")
    assert "@torch._dynamo.nonstrict_trace\ndef scaled(x, w):\n    def inner(v):" in _hatches(nested, BreakSite(13, "", ""))[
        "nonstrict-trace"]
    for shape in ("    with _LOCK:\n        x.mul_(w)\n",  # returns nothing
                  "    with _LOCK:\n        yield x * w\n",  # a generator
                  "    global _LOCK\n    with _LOCK:\n        return x * w\n"):  # shares state with the compiled code
        assert _hatches(LOCKED.replace("    with _LOCK:\n        return x * w\n", shape), BreakSite(12, "", "")) == {}, shape
    plain = LOCKED.replace("def scaled(x, w):", "def scaled(x: int, w: float) -> float:")
    assert _hatches(plain, SITE) == {}  # numbers in, a number out
    decorated = LOCKED.replace("def scaled(x, w):", "@functools.cache\ndef scaled(x, w):")
    assert _hatches(decorated, BreakSite(13, "", "")) == {}


def test_a_method_gets_nonstrict_trace_or_its_body_moved_to_a_leaf_function():
    method = '''import threading

import torch


class Scale(torch.nn.Module):
    def scaled(self, x, *, bias=None):
        with self.lock:
            return x * self.w

    def forward(self, x):
        return self.scaled(x)
'''
    found = _hatches(method, BreakSite(8, "", ""))
    assert set(found) == {"nonstrict-trace", "leaf-method"}  # leaf_function's decorator takes no method
    assert "import torch\nimport torch._dynamo\n" in found["nonstrict-trace"]
    assert "class Scale(torch.nn.Module):\n    @torch._dynamo.nonstrict_trace\n    def scaled(self, x, *, bias=None):" \
        in found["nonstrict-trace"]
    assert found["leaf-method"] == '''import threading

import torch
import torch._dynamo.decorators


class Scale(torch.nn.Module):
    def scaled(self, x, *, bias=None):
        return _Scale_scaled_leaf(self, x, bias=bias)

    def forward(self, x):
        return self.scaled(x)


@torch._dynamo.decorators.leaf_function
def _Scale_scaled_leaf(self, x, *, bias=None):
    with self.lock:
        return x * self.w


@_Scale_scaled_leaf.register_fake
def _Scale_scaled_leaf_fake(self, x, *, bias=None):
    return torch.empty_like(x)
'''


def test_a_method_that_needs_its_class_keeps_its_place():
    for body in ("return super().forward(x) * 2", "return self.__scale(x)", "return x * __class__.w"):
        source = f"import torch\n\n\nclass Scale(torch.nn.Module):\n    def forward(self, x):\n        {body}\n"
        assert "leaf-method" not in _hatches(source, BreakSite(6, "", ""))


def test_the_fake_is_shaped_like_the_argument_used_as_a_tensor():
    source = '''import torch


def masks(slen, lengths, causal):
    if lengths.max().item() > slen:
        raise ValueError(slen)
    return torch.arange(slen)[None] < lengths[:, None]
'''
    assert "return torch.empty_like(lengths)" in _hatches(source, BreakSite(5, "", ""))["leaf-function"]


def test_an_existing_import_is_reused():
    already = LOCKED.replace("import torch\n", "import torch\nimport torch._dynamo\n")
    assert _hatches(already, BreakSite(13, "", ""))["nonstrict-trace"].count("import torch._dynamo\n") == 1


def test_the_hatches_come_after_every_specific_rule():
    assert [name for name, _, _ in HATCHES] == ["numpy-helper-op", "nonstrict-trace", "leaf-function", "leaf-method"]
    assert not {name for name, _ in RULES} & {name for name, _, _ in HATCHES}
    helper = '''import torch


def scaled(x):
    scale = x.abs().max().item()
    return x / scale + 1


def forward(x):
    return scaled(x)
'''
    found = rewrites_for(helper, BreakSite(5, "Unsupported Tensor.item() call", ""), BOTH)
    rules = [r.rule for r in found]
    assert "keep-tensor" in rules and rules[-2:] == ["nonstrict-trace", "leaf-function"]
    assert [r.opaque for r in found] == [False] * (len(found) - 2) + [True, True]


# ---- in fix: a fallback trial ---------------------------------------------------------------------

FEATURES = Features(functions=frozenset({"compiler_disable", "nonstrict_trace", "leaf_function"}), program_root="/p")


def _problem(path: str, line: int, gb_type: str, reason: str, code: str, function: str) -> FixProblem:
    facts = BreakFacts(gb_type, reason, (), code)
    return FixProblem("graph_break", ProblemKey("break", gb_type, path, line), path, line, function, gb_type, 1, facts)


def test_fix_tries_a_hatch_as_a_private_fallback(tmp_path: Path):
    (tmp_path / "model.py").write_text(LOCKED)
    path = str(tmp_path / "model.py")
    problem = _problem(path, 12, "Unsupported context manager", "Dynamo does not know how to enter a lock", "with _LOCK:",
                       "scaled")
    features = Features(FEATURES.configs, FEATURES.functions, (("forward", path),), str(tmp_path))
    found = [r for r in remedies_for(problem, features, reader_for(str(tmp_path), libraries=[])) if r.rule]
    assert [r.rule for r in found] == ["nonstrict-trace", "leaf-function"]
    nonstrict, leaf = found
    assert nonstrict.fallback and leaf.fallback
    # torch's private names: a public change that passes goes first
    assert "torch._dynamo.nonstrict_trace" in nonstrict.private
    assert "torch._dynamo.decorators.leaf_function" in leaf.private
    assert leaf.also and leaf.also[0].name == "leaf_function_validate_outputs"
    # alone on its break (beside torch.compiler.disable, which only moves the code to eager): runs at once
    plan = plan_trials(select([problem], features, read=reader_for(str(tmp_path), libraries=[])), {})
    assert {t.remedy.rule: t.waits for t in plan.trials if t.remedy.rule} == {"nonstrict-trace": False,
                                                                             "leaf-function": False}
    # with a compiled `scaled`: the hatch would make the whole call opaque, so none
    compiled = Features(FEATURES.configs, FEATURES.functions, (("scaled", path),), str(tmp_path))
    assert not [r for r in remedies_for(problem, compiled, reader_for(str(tmp_path), libraries=[])) if r.opaque
                or (r.rule or "").endswith(("trace", "function"))]


def test_a_hatch_waits_for_a_specific_rule_on_the_same_break(tmp_path: Path):
    helper = '''import torch


def scaled(x):
    scale = x.abs().max().item()
    return x / scale + 1


def forward(x):
    return scaled(x)
'''
    (tmp_path / "model.py").write_text(helper)
    path = str(tmp_path / "model.py")
    problem = _problem(path, 5, "Unsupported Tensor.item() call", "Dynamo does not support Tensor.item()",
                       "scale = x.abs().max().item()", "scaled")
    features = Features(FEATURES.configs, FEATURES.functions, (("forward", path),), str(tmp_path))
    plan = plan_trials(select([problem], features, read=reader_for(str(tmp_path), libraries=[])), {})
    waits = {t.remedy.rule: t.waits for t in plan.trials if t.remedy.rule}
    assert waits["keep-tensor"] is False
    assert waits["nonstrict-trace"] is True and waits["leaf-function"] is True
    hatch_rows = [t for t in plan.trials if t.remedy.rule == "nonstrict-trace"]
    assert plan.fallbacks_to_run({problem.key}) == tuple(t for t in plan.trials if not t.waits)  # fixed: not run
    assert hatch_rows[0] in plan.fallbacks_to_run(set())  # still broken: run


def test_a_break_only_moved_to_eager_leaves_the_hatch_its_run():
    """disable-numpy-helper backs the hatch on its break; if it only moved the break to eager (the
    graphs did not fall), the break is not fixed and the hatch, which would keep it in the graph, runs."""
    data = Path(__file__).resolve().parent.parent / "data" / "fix"
    with Capture.open(str(data / "fix_model.baseline.dynscope")) as capture:
        view = run_view(capture)
        problems = fix_problems(view)
        base = RunFacts(True, capture.run.exit_code, capture.run.signal, "total: 1\n",
                        metrics_of(view, program_seconds(capture)), problem_counts(problems), tuple(trial_outputs(capture)))
    problem = next(p for p in problems if p.kind == "graph_break")
    gone = replace(base, problems={k: n for k, n in base.problems.items() if k != problem.key})  # graphs as many
    judge = Judge(base, 1e-5, 1e-5, check_stdout=True, compare_time=False)

    def plan(leaves: bool) -> Plan:
        specific = Remedy("rewrite:disable-numpy-helper:m.py:3", "disable", "source", ChangeSource(()), "",
                          rule="disable-numpy-helper", leaves_graph=leaves)
        hatch = Remedy("rewrite:nonstrict-trace:m.py:3", "hatch", "source", ChangeSource(()), "", fallback=True,
                       rule="nonstrict-trace")
        return plan_trials([(specific, [problem]), (hatch, [problem])], {})

    moved = plan(True)
    assert [t.waits for t in moved.trials] == [False, True]  # the hatch waits for the specific rule
    assert fixed_by_first(moved, judge, {"rewrite:disable-numpy-helper:m.py:3": gone}) == set()
    assert moved.trials[1] in moved.fallbacks_to_run(set())
    traceable = plan(False)  # the same run, from a rewrite that made the code traceable
    fixed = fixed_by_first(traceable, judge, {"rewrite:disable-numpy-helper:m.py:3": gone})
    assert fixed == {problem.key} and traceable.trials[1] not in traceable.fallbacks_to_run(fixed)


def test_a_host_side_numpy_helper_is_left_to_disable_numpy_helper():
    source = '''import numpy as np
import torch


def block_rand_mask(n, k):
    rand_attn = np.zeros((n, k), dtype=np.int64)
    for i in range(n):
        rand_attn[i, :] = np.random.permutation(n)[:k]
    return rand_attn


def forward(x):
    return x + torch.tensor(block_rand_mask(4, 2)).sum()
'''
    rules = [r.rule for r in rewrites_for(source, BreakSite(8, "", ""), BOTH)]
    assert "disable-numpy-helper" in rules and not {"nonstrict-trace", "leaf-function"} & set(rules)


def test_every_break_in_one_function_is_one_hatch_trial(tmp_path: Path):
    two = LOCKED.replace("        return x * w\n", "        y = x * w\n    with _LOCK:\n        return y + 1\n")
    (tmp_path / "model.py").write_text(two)
    path = str(tmp_path / "model.py")
    problems = [_problem(path, line, "Unsupported context manager", "a lock", "with _LOCK:", "scaled") for line in (12, 14)]
    features = Features(FEATURES.configs, FEATURES.functions, (("forward", path),), str(tmp_path))
    chosen = select(problems, features, read=reader_for(str(tmp_path), libraries=[]))
    hatches = [(r.key, [p.line for p in ps]) for r, ps in chosen if r.rule in ("nonstrict-trace", "leaf-function")]
    assert hatches == [("rewrite:nonstrict-trace:model.py:10", [12, 14]), ("rewrite:leaf-function:model.py:10", [12, 14])]


NUMPY_CALLER = '''import numpy as np
import torch


def spans(shape, prob):
    mask = np.zeros(shape, dtype=bool)
    mask[:, : int(prob * shape[1])] = True
    return mask


class Masking(torch.nn.Module):
    def forward(self, hidden):
        mask = spans(hidden.shape[:2], 0.5)
        return hidden.masked_fill(torch.tensor(mask)[..., None], 0.0)
'''


def test_a_caller_line_gets_only_the_escape_hatches_on_the_function_around_it():
    caller = BreakSite(13, "Attempted to call function marked as skipped", "", None, caller=True)
    found = _hatches(NUMPY_CALLER, caller, Offers(frozenset({"nonstrict_trace", "leaf_function"}), frozenset()))
    assert set(found) == {"nonstrict-trace", "leaf-method"}
    assert "def _Masking_forward_leaf(self, hidden):\n    mask = spans(hidden.shape[:2], 0.5)" in found["leaf-method"]
    # the same line as the break's own: the specific rules answer too, and the helper takes no hatch
    own = {r.rule for r in rewrites_for(NUMPY_CALLER, BreakSite(6, "", ""), BOTH)}
    assert not own & {"nonstrict-trace", "leaf-function", "leaf-method"}


def test_a_leaf_copies_the_arguments_its_body_writes_into_first():
    source = '''import torch


class Masking(torch.nn.Module):
    def apply(self, hidden, mask, scale):
        """Masks in place."""
        hidden[mask.nonzero()[:, 0]] = 0.0
        scale.add_(1)
        return hidden * scale
'''
    leaf = _hatches(source, BreakSite(7, "", ""))["leaf-method"]
    assert '''def _Masking_apply_leaf(self, hidden, mask, scale):
    """Masks in place."""
    if isinstance(hidden, torch.Tensor):
        hidden = hidden.clone()
    if isinstance(scale, torch.Tensor):
        scale = scale.clone()
    hidden[mask.nonzero()[:, 0]] = 0.0
''' in leaf
