"""The summary's one-line "try:" hints of the remedy table, from a problem's typed facts."""

from __future__ import annotations

import re
from collections.abc import Callable

from dynscope.analysis.fix_problems import BreakFacts, ErrorFacts, Facts, LimitFacts, NumericsFacts, RecompileFacts, SkippedFacts, base_name
from dynscope.analysis.remedy_applies import INDUCTOR_CONFIG, RESUME_FUNCTION, data_dependent_check
from dynscope.model.break_text import first_line

Hint = Callable[[Facts], "str | None"]


# The input's name may itself hold quotes: a keyword input is "kwargs['input_values']" (or "L['kwargs']['x']").
# The summary's hint names only a plain input (its text is part of the recorded views).
_SIZE_HINT = re.compile(r"tensor '(?P<name>[^']+)' (?:size|stride) mismatch at index (?P<dim>\d+)")


_SHAPE = re.compile(r"size mismatch|stride mismatch|sizes? of|\.size\(\)")


def limit_hint(facts: Facts) -> str | None:
    if not isinstance(facts, LimitFacts):
        return None
    return ("see the recompiles of this frame below for the guard that keeps failing; raise "
            f"torch._dynamo.config.{facts.limit_name} only if every recompile is expected")


def torch_hint(facts: Facts) -> str | None:
    """torch's own advice for the break (its first hint), when it gave one."""
    return first_line(facts.hints[0]) if isinstance(facts, BreakFacts) and facts.hints else None


def skipped_hint(facts: Facts) -> str | None:
    if not isinstance(facts, SkippedFacts):
        return None
    return "fix that graph break (see it below); the program's results are not affected, only its speed"


def check_hint(facts: Facts) -> str | None:
    """A guard on a data-dependent value: the torch._check that tells the compiler what it satisfies."""
    if not isinstance(facts, ErrorFacts):
        return None
    check = data_dependent_check(facts.reason)
    if check is None:
        return None
    where = f" before line {facts.user_line}" if facts.user_line else ""
    return (f"the compiler cannot tell which way {check[0]} goes for a value computed from data: add "
            f"torch._check({check[1]}){where} (name the value it stands for), or `dynscope fix` to try remedies")


def shape_hint(facts: Facts) -> str | None:
    """The input's shape changed: name the input and the dimension when torch's text does."""
    if not isinstance(facts, RecompileFacts):
        return None
    text = f"{facts.guard or ''} {facts.reason or ''}"
    if not _SHAPE.search(text):
        return None
    named = _SIZE_HINT.search(text)
    call = f"torch._dynamo.mark_dynamic({named['name']}, {named['dim']})" if named else "torch._dynamo.mark_dynamic(x, dim)"
    if facts.made_dynamic:
        return (f"Dynamo made this dimension dynamic when it recompiled, so further sizes reuse that graph; "
                f"{call} before the first call would save this one recompile")
    if named:
        change = f" ({facts.expected} → {facts.actual})" if facts.expected and facts.actual else ""
        return (f"dimension {named['dim']} of {named['name']} changed{change}: mark the dimension dynamic "
                f"({call} before the first call) or compile with dynamic=True")
    return ("the input's shape changes between calls: mark the dimension dynamic "
            "(torch._dynamo.mark_dynamic(x, dim)) or compile with dynamic=True")


def _number(text: str | None) -> tuple[float, str] | None:
    if text is None:
        return None
    try:
        return float(int(text)), "int"
    except ValueError:
        pass
    try:
        return float(text), "float"
    except ValueError:
        return None


def same_type_hint(facts: Facts) -> str | None:
    """An int and a float of equal value: Dynamo guards on the type as well."""
    if not isinstance(facts, RecompileFacts):
        return None
    expected, actual = _number(facts.expected), _number(facts.actual)
    if expected is None or actual is None or expected[0] != actual[0] or expected[1] == actual[1]:
        return None
    return (f"int/float specialization: the value was the {expected[1]} {facts.expected} when compiled and is the "
            f"{actual[1]} {facts.actual} now; Dynamo guards on the Python type as well as the value, so pass the "
            f"same type on every call (e.g. always {expected[1]}({facts.actual}))")


def python_value_hint(facts: Facts) -> str | None:
    if not isinstance(facts, RecompileFacts):
        return None
    expected, actual = _number(facts.expected), _number(facts.actual)
    if expected is None or actual is None:
        return None
    return (f"Dynamo specialized on the Python {expected[1]} {facts.expected} and got {facts.actual}: each new value "
            "compiles again; keep it constant, or pass it as a tensor (torch.tensor(value))")


def reason_hint(pattern: str, hint: str) -> Hint:
    """A hint from torch's guard-failure text alone."""
    compiled = re.compile(pattern)
    return lambda facts: hint if isinstance(facts, RecompileFacts) and compiled.search(facts.reason or "") else None


def precision_casts_hint(facts: Facts) -> str | None:
    if not isinstance(facts, NumericsFacts) or not facts.low_precision:
        return None
    return (f"{INDUCTOR_CONFIG}.emulate_precision_casts = True: Inductor then rounds intermediates to {facts.program_dtype} "
            "where eager does, so a fused kernel's extra precision no longer differs from eager")


def fallback_random_hint(facts: Facts) -> str | None:
    if not isinstance(facts, NumericsFacts) or not facts.random:
        return None
    return (f"{INDUCTOR_CONFIG}.fallback_random = True: {facts.op} then draws the same random numbers as eager "
            "(compiled random ops use their own generator)")


def numerics_disable_hint(facts: Facts) -> str | None:
    if not isinstance(facts, NumericsFacts) or not facts.function or RESUME_FUNCTION.match(facts.function):
        return None
    if facts.compiled_frame:
        return (f"keep {facts.op} in eager: move line {facts.line} of {facts.function} ({base_name(facts.file)}) into a "
                "helper with @torch.compiler.disable above its `def` (disabling "
                f"{facts.function} itself would compile nothing of it)")
    return (f"keep {facts.function} ({base_name(facts.file)}) in eager: put @torch.compiler.disable above "
            f"`def {facts.function}` (it runs uncompiled, so its numbers are eager's)")
