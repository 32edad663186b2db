"""What to try for which problem: the one table behind the summary's "try:" hints and ``dynscope fix``.

Each entry (``TABLE``) declares the problem kinds it serves, when it applies (a predicate on the
typed facts of the problem and on what this torch offers), the summary's one-line hint, and the
remedy ``fix`` tries: a typed action (dynscope.events: SetConfig, MarkDynamic, ...; applied by
dynscope/fix/apply.py, which dispatches on its type; nothing is ever executed from it) and the
patch the user pastes. Table order is the order remedies are tried and hints are looked for.
Adding a remedy is adding one entry here and its test (tests/unit/test_remedy_table.py).

Problems are the run view's typed problems (``fix_problems(run_view(capture))``, fix_view.py), so the same code reads a
baseline run, a trial run and a recorded capture, and is tested without torch. Which remedies
this torch supports comes from the child (``Features``: probes/compat.remedy_features), never
from a version number.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dynscope.analysis.fix_problems import (
    BreakFacts,
    ErrorFacts,
    Facts,
    FixProblem,
    LimitFacts,
    NumericsFacts,
    RecompileFacts,
    SkippedFacts,
    numerics_problem,
)
from dynscope.analysis.remedy_applies import (
    Predicate,
    check_applies,
    check_expression,
    config_wants,
    disable_applies,
    dynamic_applies,
    dynamic_output_shapes_applies,
    fallback_random_applies,
    float_applies,
    limit_applies,
    logging_applies,
    mark_dynamic_applies,
    module_int_applies,
    numerics_disable_applies,
    numpy_random_applies,
    precision_casts_applies,
    rewrite_applies,
    scalar_outputs_applies,
)
from dynscope.analysis.remedy_hints import (
    Hint,
    check_hint,
    fallback_random_hint,
    limit_hint,
    numerics_disable_hint,
    precision_casts_hint,
    python_value_hint,
    reason_hint,
    same_type_hint,
    shape_hint,
    skipped_hint,
    torch_hint,
)
from dynscope.analysis.remedy_patches import (
    AppliesAs,
    Make,
    Remedy,
    SourceReader,
    check_remedy,
    config_setting,
    disable_remedy,
    dynamic_remedy,
    inductor_config,
    limit_remedy,
    logging_remedy,
    mark_dynamic_remedy,
    numerics_disable_remedy,
    parse_try,
    patch_remedy,
    remedies_conflict,
    rewrite_remedies,
)
from dynscope.events import (
    FixFamily,
    RemedyKind,
)
from dynscope.model.fix import Features

Rewrites = Callable[[FixProblem, Features, SourceReader], "list[Remedy]"]


def _never(_p: FixProblem, _features: Features) -> bool:
    return False


def _no_hint(_facts: Facts) -> str | None:
    return None


@dataclass(frozen=True)
class Entry:
    name: str  # unique, for tests and for reading the table
    serves: tuple[RemedyKind, ...]
    applies: Predicate = _never  # whether fix tries the remedy for this problem on this torch
    remedy: Make | None = None  # the remedy (action and patch); None: a hint only
    hint: Hint = _no_hint  # the summary's one-line "try:" from the problem's facts; None: says nothing
    rewrites: Rewrites | None = None  # remedies made from the problem's source file (read through a reader)

    def remedies_for(self, problem: FixProblem, features: Features, read: SourceReader | None = None) -> list[Remedy]:
        if problem.kind not in self.serves or not self.applies(problem, features):
            return []
        if self.rewrites is not None:
            return self.rewrites(problem, features, read) if read is not None else []
        return [self.remedy(problem, features)] if self.remedy is not None else []

    def remedy_for(self, problem: FixProblem, features: Features) -> Remedy | None:
        """The one remedy of an entry that needs no source (None: none, or it is a source rewrite)."""
        found = self.remedies_for(problem, features)
        return found[0] if found else None


TABLE: tuple[Entry, ...] = (
    Entry("torch_check", ("error",), check_applies, check_remedy, check_hint),
    Entry("capture_scalar_outputs", ("graph_break", "error"), scalar_outputs_applies,
          config_setting("capture_scalar_outputs", True)),
    Entry("capture_dynamic_output_shape_ops", ("graph_break",), dynamic_output_shapes_applies,
          config_setting("capture_dynamic_output_shape_ops", True)),
    Entry("reorderable_logging_function", ("graph_break",), logging_applies, logging_remedy),
    # Compiled code draws np.random from torch's stream: this setting makes the compiled run match eager.
    Entry("use_numpy_random_stream", ("graph_break",), numpy_random_applies,
          config_setting("use_numpy_random_stream", True)),
    Entry("source_rewrite", ("graph_break",), rewrite_applies, rewrites=rewrite_remedies),
    Entry("compiler_disable", ("graph_break",), disable_applies, disable_remedy),
    Entry("raise_recompile_limit", ("recompile_limit",), limit_applies, limit_remedy, limit_hint),
    Entry("mark_dynamic", ("recompile",), mark_dynamic_applies("mark_dynamic"), mark_dynamic_remedy(False),
          shape_hint),
    Entry("maybe_mark_dynamic", ("recompile",), mark_dynamic_applies("maybe_mark_dynamic"),
          mark_dynamic_remedy(True)),
    Entry("allow_unspec_int_on_nn_module", ("recompile",), module_int_applies,
          config_setting("allow_unspec_int_on_nn_module", True)),
    Entry("specialize_float", ("recompile",), float_applies, config_setting("specialize_float", False)),
    Entry("dynamic_true", ("recompile",), dynamic_applies, dynamic_remedy),
    Entry("suppress_errors", ("error",), lambda _p, features: config_wants(features, "suppress_errors", True),
          config_setting("suppress_errors", True)),
    # A numerics suspect (dynscope numerics); their trials need an engine that judges the error, not equal outputs.
    Entry("emulate_precision_casts", ("numerics",), precision_casts_applies,
          inductor_config("emulate_precision_casts", True), precision_casts_hint),
    Entry("fallback_random", ("numerics",), fallback_random_applies, inductor_config("fallback_random", True),
          fallback_random_hint),
    Entry("numerics_compiler_disable", ("numerics",), numerics_disable_applies, numerics_disable_remedy,
          numerics_disable_hint),
    # Hints only: what to try that no setting dynscope can try does.
    Entry("torch_advice", ("graph_break",), hint=torch_hint),
    Entry("fix_the_break", ("skipped_frame",), hint=skipped_hint),
    Entry("int_float_specialization", ("recompile",), hint=same_type_hint),
    Entry("python_value", ("recompile",), hint=python_value_hint),
    Entry("same_dtype_device", ("recompile",), hint=reason_hint(
        r"dtype mismatch|device mismatch|requires_grad mismatch",
        "the input's dtype, device or requires_grad changed: each combination needs its own graph")),
    Entry("same_type", ("recompile",), hint=reason_hint(
        r"___check_type_id|type\(|TYPE_MATCH", "a value changed type (e.g. int vs float): pass the same type on every call")),
    Entry("constant_value", ("recompile",), hint=reason_hint(
        r"==", "Dynamo specialized on a Python value that changed: keep it constant, or pass it as a tensor")),
)


def hint_for(kind: RemedyKind, facts: Facts) -> str | None:
    """The summary's one-line "try:" for a problem: the first entry serving its kind that has one."""
    for entry in TABLE:
        if kind in entry.serves:
            hint = entry.hint(facts)
            if hint is not None:
                return hint
    return None


def hints_for(kind: RemedyKind, facts: Facts) -> list[str]:
    """Every entry's hint for a problem, in table order (a numerics suspect lists each setting to try)."""
    return [hint for entry in TABLE if kind in entry.serves for hint in [entry.hint(facts)] if hint is not None]


def remedies_for(problem: FixProblem, features: Features, read: SourceReader | None = None) -> list[Remedy]:
    """The remedies worth a trial for one problem, in table order, among those this torch has;
    source rewrites only with ``read`` (the files they may read)."""
    found = [r for entry in TABLE for r in entry.remedies_for(problem, features, read)]
    return list({r.key: r for r in found}.values())


def select(problems: list[FixProblem], features: Features, only: FixFamily | None = None,
           read: SourceReader | None = None,
           choose: Callable[[FixProblem, Features], list[Remedy]] | None = None) -> list[tuple[Remedy, list[FixProblem]]]:
    """Each distinct remedy once, with every problem it is tried for, in problem order.
    ``choose``: ``remedies_for`` remembered (dynscope fix's early trials ask it again and again)."""
    chosen: dict[str, tuple[Remedy, list[FixProblem]]] = {}
    for p in problems:
        if only and p.family != only:
            continue
        for r in (choose(p, features) if choose is not None else remedies_for(p, features, read)):
            chosen.setdefault(r.key, (r, []))[1].append(p)
    return list(chosen.values())


# The table's modules, read through this one by the rest of dynscope: the problems and their typed
# facts (fix_problems.py), when an entry applies (remedy_applies.py), its hint (remedy_hints.py),
# the remedy it makes (remedy_patches.py).
__all__ = [
    "TABLE", "AppliesAs", "BreakFacts", "Entry", "ErrorFacts", "Facts", "FixProblem", "LimitFacts", "NumericsFacts",
    "RecompileFacts", "Remedy", "SkippedFacts", "SourceReader", "check_expression", "hint_for", "hints_for",
    "numerics_problem", "parse_try", "patch_remedy", "remedies_conflict", "remedies_for", "select",
]
