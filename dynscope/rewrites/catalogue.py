"""The catalogue: every rewrite rule, in the order fix tries them."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import libcst as cst

from dynscope.rewrites import (
    BreakSite,
    Offers,
    Rewrite,
    checks,
    compiling_clauses,
    expert_loops,
    hatches,
    index_tensors,
    iterators,
    library_ports,
    logging_calls,
    numpy_calls,
    numpy_ops,
    scalar_sizes,
    tensor_branches,
    tensor_idioms,
)
from dynscope.rewrites.causes import cause_of

Rule = Callable[[cst.Module, str, BreakSite], "Rewrite | None"]
# How one rule is called: (its name, the call) -> its candidate. The bounded worker
# (dynscope/rewrites/worker.py) times each rule and turns a failure into a note.
RuleRunner = Callable[[str, Callable[[], "Rewrite | None"]], "Rewrite | None"]

RULES: tuple[tuple[str, Rule], ...] = (
    # first: a port is proven on the exact code it matches, and fix tries only the first few candidates
    ("library-port", library_ports.library_port),
    # by the code's shape, whatever torch's label: a number read out of a tensor to choose, to index or to shift
    # with; one tensor given twice
    ("item-where", tensor_branches.item_where),
    ("clone-repeated-input", tensor_idioms.clone_repeated_input),
    ("index-select-comprehension", index_tensors.index_select_comprehension),
    ("tensor-offset", index_tensors.tensor_offset),
    ("nonzero-to-where", index_tensors.nonzero_to_where),
    ("dense-expert-loop", expert_loops.dense_expert_loop),
    ("guard-logging", logging_calls.guard_logging),
    ("traced-print", logging_calls.traced_print),
    ("tensor-where", tensor_branches.tensor_where),
    ("tensor-cond", tensor_branches.tensor_cond),
    ("keep-tensor", scalar_sizes.keep_tensor),
    ("check-size", scalar_sizes.check_size),
    ("assert-to-check", checks.assert_to_check),
    ("guard-to-check", checks.guard_to_check),
    ("numpy-int-math", numpy_calls.numpy_int_math),
    ("numpy-to-torch", numpy_calls.numpy_to_torch),
    ("disable-numpy-helper", numpy_calls.disable_numpy_helper),
    ("floor-div-ints", tensor_idioms.floor_div_ints),
    ("drop-requires-grad", tensor_idioms.drop_requires_grad),
    ("deepcopy-to-clone", tensor_idioms.deepcopy_to_clone),
    ("generator-to-list", iterators.generators_to_lists),
    ("drop-compiling-clause", compiling_clauses.drop_compiling_clause),
)

# torch's escape hatches (dynscope/rewrites/hatches.py, numpy_ops.py): the general fallback after every specific
# rule, each with the decorator it needs (Offers.hatches: only where the installed torch has it); the smallest
# opaque piece first (a NumPy helper's call alone before the whole caller)
HatchRule = Callable[[cst.Module, str, BreakSite, Offers], "Rewrite | None"]
HATCHES: tuple[tuple[str, str, HatchRule], ...] = (
    ("numpy-helper-op", "custom_op", numpy_ops.numpy_helper_op),
    ("nonstrict-trace", "nonstrict_trace", hatches.nonstrict_trace),
    ("leaf-function", "leaf_function", hatches.leaf_function),
    ("leaf-method", "leaf_function", hatches.leaf_method),
)

# rules whose match already is the hidden cause (they say it more exactly than cause_of can)
_NAME_THEIR_CAUSE = frozenset({"numpy-int-math", "floor-div-ints", "library-port"})
# rules whose cause says why, where cause_of says what failed: both are shown
_ADD_TO_THEIR_CAUSE = frozenset({"drop-compiling-clause"})


def _call(_name: str, call: Callable[[], Rewrite | None]) -> Rewrite | None:
    return call()


def _given(hatch: HatchRule, offers: Offers) -> Rule:
    return lambda module, source, site: hatch(module, source, site, offers)


def rewrites_for(source: str, site: BreakSite, offers: Offers | None = None, run_rule: RuleRunner = _call,
                 module: cst.Module | None = None) -> list[Rewrite]:
    """Every rule's candidate for the break at ``site`` in ``source`` (a file's text; ``module``: its
    tree, when parsed already), in catalogue order, then the escape hatches ``offers`` allows
    (``Rewrite.opaque``; only those for a caller's line, ``BreakSite.caller``); [] when the file does not parse or
    no rule matches.
    Unbounded: a stranger's file goes through dynscope/rewrites/bounded.py, which runs this in a worker."""
    if module is None:
        try:
            module = cst.parse_module(source)
        except cst.ParserSyntaxError:
            return []
    lines = source.splitlines()
    named = cause_of(site.gb_type, site.reason, lines[site.line - 1] if 0 < site.line <= len(lines) else "")
    found: list[Rewrite] = []
    offered = offers or Offers()
    rules: list[tuple[str, Rule]] = [] if site.caller else list(RULES)
    rules += [(name, _given(hatch, offered)) for name, needs, hatch in HATCHES if needs in offered.hatches]
    for name, rule in rules:
        rewrite = run_rule(name, functools.partial(rule, module, source, site))
        if rewrite is not None and rewrite.source != source:
            if named is not None and rewrite.rule in _ADD_TO_THEIR_CAUSE:
                rewrite = dataclasses.replace(rewrite, cause=f"{named}; {rewrite.cause}")
            elif named is not None and rewrite.rule not in _NAME_THEIR_CAUSE:
                rewrite = dataclasses.replace(rewrite, cause=named)
            found.append(rewrite)
    return found
