"""The remedy table (dynscope.analysis.remedies.TABLE), entry by entry, without torch.

Every entry has a case here: a problem it applies to (and the remedy it gives: its action, which
must survive the JSON trip to the trial child), one it does not apply to, and the summary hint it
gives. Adding an entry without a case fails ``test_every_entry_has_a_case``. The summary's "try:"
hints of every recorded capture are checked to be the table's (``test_summary_hints_come_from_the_table``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from dynscope.analysis.problems import (
    CompileErrorProblem,
    GraphBreakProblem,
    RecompileLimitProblem,
    RecompileProblem,
    SkippedFrameProblem,
)
from dynscope.analysis.remedies import (
    TABLE,
    BreakFacts,
    ErrorFacts,
    Facts,
    FixProblem,
    LimitFacts,
    NumericsFacts,
    RecompileFacts,
    SkippedFacts,
    hint_for,
    remedies_for,
)
from dynscope.analysis.run_view import run_view
from dynscope.events import (
    FIX_FAMILY,
    PROBLEM_KINDS,
    REMEDY_KINDS,
    AddLoggingFunction,
    CompileWith,
    DisableFunction,
    FixProblemRef,
    FixResult,
    MarkDynamic,
    ProblemKind,
    SetConfig,
    ShowOnly,
    action_from_json,
)
from dynscope.model import Capture
from dynscope.model.fix import Features

CAPTURES = Path(__file__).resolve().parent.parent / "data" / "captures"

EVERYTHING = Features(
    configs={"capture_scalar_outputs": False, "capture_dynamic_output_shape_ops": False,
             "allow_unspec_int_on_nn_module": False, "specialize_float": True, "suppress_errors": False,
             "recompile_limit": 8, "torch._inductor.config.emulate_precision_casts": False,
             "torch._inductor.config.fallback_random": False, "use_numpy_random_stream": False},
    functions=frozenset({"reorderable_logging_functions", "mark_dynamic", "maybe_mark_dynamic", "compiler_disable"}),
    compiled_callables=(("forward", "/p/model.py"),), program_root="/p")


def _problem(kind: ProblemKind, facts: Facts, *, function: str = "helper", line: int = 9) -> FixProblem:
    return FixProblem(kind, f"{kind}|x", "/p/model.py", line, function, "what happened", 1, facts)


def _brk(reason: str = "", *, gb_type: str = "", code: str = "", hints: tuple[str, ...] = ()) -> BreakFacts:
    return BreakFacts(gb_type, reason, hints, code)


def _guard(guard: str, expected: str | None = None, actual: str | None = None, *, made_dynamic: bool = False
           ) -> RecompileFacts:
    return RecompileFacts(guard, guard, expected, actual, (guard,), made_dynamic)


ITEM = _brk("Tensor.item() call with capture_scalar_outputs=False", gb_type="Unsupported Tensor.item() call")
DATA_DEPENDENT = ErrorFacts("GuardOnDataDependentSymNode",
                            "Could not guard on data-dependent expression Eq(u0, 1) (unhinted: Eq(u0, 1))", 33)
SIZE = _guard("tensor 'x' size mismatch at index 0. expected 4, actual 8", "4", "8")

F32_SUSPECT = NumericsFacts("add", "aten.add.Tensor", "cpp_fused_add_0", "float32", "helper", "/p/model.py", 9)
BF16_SUSPECT = replace(F32_SUSPECT, program_dtype="bfloat16")
DROPOUT_SUSPECT = replace(F32_SUSPECT, op="aten.native_dropout.default")


@dataclass(frozen=True)
class Case:
    applies: FixProblem | None  # a problem the entry gives a remedy for (with EVERYTHING); None: hint only
    action: object | None  # the remedy's action there
    title: str | None
    not_applies: FixProblem  # one it does not
    hint: tuple[ProblemKind, Facts, str | None] | None = None  # (kind, facts) -> the summary's hint


CASES: dict[str, Case] = {
    "torch_check": Case(
        _problem("error", DATA_DEPENDENT), ShowOnly("torch._check(u0 == 1)"),
        "torch._check(...) on Eq(u0, 1) before model.py:9",
        _problem("error", ErrorFacts("InternalTorchDynamoError", "boom", None)),
        ("error", DATA_DEPENDENT, "the compiler cannot tell which way Eq(u0, 1) goes for a value computed from data: "
         "add torch._check(u0 == 1) before line 33 (name the value it stands for), or `dynscope fix` to try remedies")),
    "capture_scalar_outputs": Case(
        _problem("graph_break", ITEM), SetConfig("torch._dynamo.config", "capture_scalar_outputs", True),
        "torch._dynamo.config.capture_scalar_outputs = True", _problem("graph_break", _brk("Data-dependent branching"))),
    "capture_dynamic_output_shape_ops": Case(
        _problem("graph_break", _brk("Dynamic shape operator (nonzero)")),
        SetConfig("torch._dynamo.config", "capture_dynamic_output_shape_ops", True),
        "torch._dynamo.config.capture_dynamic_output_shape_ops = True", _problem("graph_break", ITEM)),
    "use_numpy_random_stream": Case(
        _problem("graph_break", _brk("aten._local_scalar_dense", code="width = np.random.randint(1, 4)")),
        SetConfig("torch._dynamo.config", "use_numpy_random_stream", True),
        "torch._dynamo.config.use_numpy_random_stream = True", _problem("graph_break", ITEM)),
    "reorderable_logging_function": Case(
        _problem("graph_break", _brk("Failed to trace builtin operator print", code="print(f'loss {x}')"),
                 function="forward"),
        AddLoggingFunction("print"), "torch._dynamo.config.reorderable_logging_functions.add(print)",
        _problem("graph_break", _brk("Failed to trace builtin operator print", code="y = x + 1"))),
    # Source rewrites need the file (a reader): tests/unit/test_fix_rewrite_logic.py; without one, nothing.
    "source_rewrite": Case(
        None, None, None, _problem("graph_break", _brk("Failed to trace builtin operator print", code="print(x)"))),
    "compiler_disable": Case(
        _problem("graph_break", _brk("Data-dependent branching", code="if x.sum() > 0:")),
        DisableFunction("/p/model.py", "helper", 9), "torch.compiler.disable on helper (model.py)",
        # the callable given to torch.compile: disabling it would only switch compilation off
        _problem("graph_break", _brk("Data-dependent branching", code="if x.sum() > 0:"), function="forward")),
    "raise_recompile_limit": Case(
        _problem("recompile_limit", LimitFacts(8, "recompile_limit")),
        SetConfig("torch._dynamo.config", "recompile_limit", 32), "torch._dynamo.config.recompile_limit = 32",
        _problem("recompile_limit", LimitFacts(8, "cache_size_limit")),  # a name this torch does not have
        ("recompile_limit", LimitFacts(8, "recompile_limit"), "see the recompiles of this frame below for the guard "
         "that keeps failing; raise torch._dynamo.config.recompile_limit only if every recompile is expected")),
    "mark_dynamic": Case(
        _problem("recompile", SIZE, function="forward"), MarkDynamic("forward", "/p/model.py", "x", 0, False),
        "torch._dynamo.mark_dynamic(x, 0) before calling forward",
        # a resume function after a break: the program never calls it, so there is no input to mark
        _problem("recompile", SIZE, function="torch_dynamo_resume_in_forward_at_21"),
        ("recompile", SIZE, "dimension 0 of x changed (4 → 8): mark the dimension dynamic "
         "(torch._dynamo.mark_dynamic(x, 0) before the first call) or compile with dynamic=True")),
    "maybe_mark_dynamic": Case(
        _problem("recompile", SIZE, function="forward"), MarkDynamic("forward", "/p/model.py", "x", 0, True),
        "torch._dynamo.maybe_mark_dynamic(x, 0) before calling forward",
        _problem("recompile", _guard("n == 2", "2", "3"), function="forward")),
    "allow_unspec_int_on_nn_module": Case(
        _problem("recompile", _guard("self.n == 2", "2", "3")),
        SetConfig("torch._dynamo.config", "allow_unspec_int_on_nn_module", True),
        "torch._dynamo.config.allow_unspec_int_on_nn_module = True",
        _problem("recompile", _guard("n == 2", "2", "3"))),  # an int of the call, not of the module
    "specialize_float": Case(
        _problem("recompile", _guard("t == 2.0", "2.0", "3.0")),
        SetConfig("torch._dynamo.config", "specialize_float", False), "torch._dynamo.config.specialize_float = False",
        _problem("recompile", _guard("n == 2", "2", "3"))),
    "dynamic_true": Case(
        _problem("recompile", _guard("n == 2", "2", "3")), CompileWith((("dynamic", True),)),
        "torch.compile(..., dynamic=True)",
        _problem("recompile", _guard("tensor 'x' dtype mismatch. expected Float, actual Half"))),
    "suppress_errors": Case(
        _problem("error", ErrorFacts("BackendCompilerFailed", "boom", None)),
        SetConfig("torch._dynamo.config", "suppress_errors", True), "torch._dynamo.config.suppress_errors = True",
        _problem("graph_break", ITEM)),  # an entry serves only its kinds
    # A numerics suspect (dynscope numerics): problems made by numerics_problem (tests/unit/test_numerics_views.py)
    "emulate_precision_casts": Case(
        _problem("numerics", BF16_SUSPECT), SetConfig("torch._inductor.config", "emulate_precision_casts", True),
        "torch._inductor.config.emulate_precision_casts = True", _problem("numerics", F32_SUSPECT),
        ("numerics", BF16_SUSPECT, "torch._inductor.config.emulate_precision_casts = True: Inductor then rounds "
         "intermediates to bfloat16 where eager does, so a fused kernel's extra precision no longer differs from eager")),
    "fallback_random": Case(
        _problem("numerics", DROPOUT_SUSPECT), SetConfig("torch._inductor.config", "fallback_random", True),
        "torch._inductor.config.fallback_random = True", _problem("numerics", F32_SUSPECT),
        ("numerics", DROPOUT_SUSPECT, "torch._inductor.config.fallback_random = True: aten.native_dropout.default "
         "then draws the same random numbers as eager (compiled random ops use their own generator)")),
    "numerics_compiler_disable": Case(
        _problem("numerics", F32_SUSPECT), DisableFunction("/p/model.py", "helper", 9),
        "torch.compiler.disable on helper (model.py)",
        _problem("numerics", replace(F32_SUSPECT, function="forward", compiled_frame=True)),
        ("numerics", F32_SUSPECT, "keep helper (model.py) in eager: put @torch.compiler.disable above `def helper` "
         "(it runs uncompiled, so its numbers are eager's)")),
    "torch_advice": Case(
        None, None, None, _problem("graph_break", ITEM),
        ("graph_break", _brk(hints=("\n  Use torch._check to tell the compiler.\n  more", "second")),
         "Use torch._check to tell the compiler.")),
    "fix_the_break": Case(
        None, None, None, _problem("skipped_frame", SkippedFacts("Data-dependent branching")),
        ("skipped_frame", SkippedFacts("Data-dependent branching"),
         "fix that graph break (see it below); the program's results are not affected, only its speed")),
    "int_float_specialization": Case(
        None, None, None, _problem("recompile", _guard("t == 2.0", "2.0", "2")),
        ("recompile", _guard("t == 2.0", "2.0", "2"), "int/float specialization: the value was the float 2.0 when "
         "compiled and is the int 2 now; Dynamo guards on the Python type as well as the value, so pass the same "
         "type on every call (e.g. always float(2))")),
    "python_value": Case(
        None, None, None, _problem("recompile", _guard("n == 2", "2", "3")),
        ("recompile", _guard("n == 2", "2", "3"), "Dynamo specialized on the Python int 2 and got 3: each new value "
         "compiles again; keep it constant, or pass it as a tensor (torch.tensor(value))")),
    "same_dtype_device": Case(
        None, None, None, _problem("recompile", _guard("tensor 'x' dtype mismatch")),
        ("recompile", _guard("tensor 'x' dtype mismatch. expected Float, actual Half"),
         "the input's dtype, device or requires_grad changed: each combination needs its own graph")),
    "same_type": Case(
        None, None, None, _problem("recompile", _guard("___check_type_id(L['n'], 94)")),
        ("recompile", _guard("___check_type_id(L['n'], 94)"),
         "a value changed type (e.g. int vs float): pass the same type on every call")),
    "constant_value": Case(
        None, None, None, _problem("recompile", _guard("L['mode'] == 'train'")),
        ("recompile", _guard("L['mode'] == 'train'"),
         "Dynamo specialized on a Python value that changed: keep it constant, or pass it as a tensor")),
}


def test_every_entry_has_a_case():
    names = [e.name for e in TABLE]
    assert len(names) == len(set(names))
    assert set(names) == set(CASES)


def test_every_problem_kind_has_its_entries():
    """One vocabulary: every kind the summary names has an entry, and the fix document's kind for it."""
    for kind in PROBLEM_KINDS:
        assert [e for e in TABLE if kind in e.serves], kind
        assert FIX_FAMILY[kind] in ("break", "recompile", "error")
    # beside the summary's kinds, the table serves a numerics suspect (dynscope numerics), its own family
    assert all(kind in REMEDY_KINDS for e in TABLE for kind in e.serves) and FIX_FAMILY["numerics"] == "numerics"
    assert set(REMEDY_KINDS) - set(PROBLEM_KINDS) == {"numerics"}


@pytest.mark.parametrize("name", list(CASES))
def test_entry(name: str):
    entry = next(e for e in TABLE if e.name == name)
    case = CASES[name]
    if case.applies is not None:
        remedy = entry.remedy_for(case.applies, EVERYTHING)
        assert remedy is not None and remedy.action == case.action and remedy.title == case.title
        assert remedy in remedies_for(case.applies, EVERYTHING)  # the table gives it for that problem
        # the action travels to the trial child as JSON and comes back the same
        assert action_from_json(remedy.action.to_json()) == remedy.action
        assert remedy.tried == (not isinstance(remedy.action, ShowOnly))
    else:
        assert entry.remedy is None  # a hint only
    assert entry.remedy_for(case.not_applies, EVERYTHING) is None
    if case.hint is not None:
        kind, facts, text = case.hint
        assert entry.hint(facts) == text
        assert hint_for(kind, facts) == text  # no earlier entry answers first


def test_an_entry_applies_only_where_this_torch_has_what_it_needs():
    case = CASES["mark_dynamic"]
    entry = next(e for e in TABLE if e.name == "mark_dynamic")
    assert entry.remedy_for(case.applies, replace(EVERYTHING, functions=frozenset())) is None
    already = replace(EVERYTHING, configs={**EVERYTHING.configs, "capture_scalar_outputs": True})
    assert next(e for e in TABLE if e.name == "capture_scalar_outputs").remedy_for(
        CASES["capture_scalar_outputs"].applies, already) is None


def test_bad_actions_are_refused():
    for bad in ({"op": "exec", "code": "1"}, {"op": "config", "target": "x"}, {"op": "mark_dynamic", "function": "f"},
                {"op": "disable", "file": 3, "function": "f"}, ["config"], {"op": "config", "target": "a.b", "value": {1}}):
        with pytest.raises(ValueError):
            action_from_json(bad)


def test_fix_results_match_the_summary_kinds():
    fix = FixResult(problem=FixProblemRef(kind="break", file="/p/m.py", line=3))
    assert fix.matches("graph_break", "/p/m.py", 3) and fix.matches("skipped_frame", "/p/m.py", 3)
    assert not fix.matches("recompile", "/p/m.py", 3) and not fix.matches("graph_break", "/p/m.py", 4)


def _facts_of(problem) -> Facts | None:
    """The table's facts for one of the summary's problems (dynscope.analysis.problems)."""

    match problem:
        case CompileErrorProblem(error=e):
            return ErrorFacts(e.fail_type, e.reason, e.user_line)
        case RecompileLimitProblem(hit=hit):
            return LimitFacts(hit.limit, hit.limit_name)
        case SkippedFrameProblem(frames=frames):
            return SkippedFacts(frames[0].headline)
        case GraphBreakProblem(group=g):
            return BreakFacts(g.gb_type or "", g.reason, tuple(g.hints), g.location.code or "")
    return None


def test_summary_hints_come_from_the_table():
    """Every recorded capture: each problem's "try:" hint is the table's for its facts (a compile
    error the table has nothing for says to run minify)."""
    from dynscope.analysis.problems import _made_dynamic

    seen: set[str] = set()
    for path in sorted(CAPTURES.glob("*/*.dynscope")):
        with Capture.open(str(path)) as capture:
            view = run_view(capture)
            for problem in view.problems:
                seen.add(problem.kind)
                if isinstance(problem, RecompileProblem):
                    live = [r for r in problem.recompiles if not _made_dynamic(r, view.dynamic_sources)] or \
                        list(problem.recompiles)
                    f = live[0].failures[0]
                    facts: Facts | None = RecompileFacts(f.guard, f.reason, f.expected, f.actual, (),
                                                         _made_dynamic(live[0], view.dynamic_sources))
                else:
                    facts = _facts_of(problem)
                assert facts is not None
                expected = hint_for(problem.kind, facts)
                if problem.kind == "error" and expected is None:
                    expected = "run `dynscope minify` on the script to find the failing stage and get a small repro"
                assert problem.hint == expected, (path.name, problem.title)
    assert {"graph_break", "recompile"} <= seen


def test_limit_and_skipped_frame_hints_are_the_tables():
    """Kinds no recorded capture has: the summary's problem built from a record, against the table."""
    from dynscope.analysis.problems import _limit_hit, _skipped
    from dynscope.model import RecompileLimitHit, SkippedFrame

    hit = RecompileLimitHit("0/8", "f", "/p/m.py", 3, 8, "recompile_limit", False)
    assert _limit_hit(hit).hint == hint_for("recompile_limit", LimitFacts(8, "recompile_limit"))
    frame = SkippedFrame("1/0", "f", "/p/m.py", 3, "Unsupported", "why", "Data-dependent branching", "/p/m.py", 4)
    assert _skipped((frame,), {}).hint == hint_for("skipped_frame", SkippedFacts("Data-dependent branching"))
