"""When a remedy of the table applies: predicates on a problem's typed facts and on what this torch
offers (``Features``, recorded by the child: probes/compat.remedy_features, never a version number).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from dynscope.analysis.fix_problems import SIZE_GUARD, BreakFacts, ErrorFacts, FixProblem, LimitFacts, NumericsFacts, RecompileFacts
from dynscope.events import (
    JsonValue,
)
from dynscope.model.fix import Features

Predicate = Callable[[FixProblem, Features], bool]


DYNAMO_CONFIG = "torch._dynamo.config"


INDUCTOR_CONFIG = "torch._inductor.config"


# "n == 2", "L['n'] == 2", "self.n == 2" (an int Dynamo specialized on) and "t == 2.0" (a float)
_INT_GUARD = re.compile(r"(?P<name>(?:L\['[^']+'\]|[A-Za-z_]\w*)(?:\.\w+)*) == (?P<value>-?\d+)(?![\d.])")


_FLOAT_GUARD = re.compile(r"(?:L\['[^']+'\]|[A-Za-z_]\w*)(?:\.\w+)* == -?\d+\.\d*")


DATA_DEPENDENT = re.compile(r"Could not guard on data-dependent expression (?P<expr>.+?)(?: \(unhinted|\n|$)")


_LOGGING_CALL = re.compile(r"\b(?P<fn>print|logging\.(?:debug|info|warning|error|critical|log)|warnings\.warn)\s*\(")


RESUME_FUNCTION = re.compile(r"^torch_dynamo_resume_in_")


def config_wants(features: Features, name: str, value: JsonValue) -> bool:
    """The config exists in this torch and is not already at the remedy's value."""
    return name in features.configs and features.configs[name] != value


def _break_text(f: BreakFacts) -> str:
    return " ".join([f.gb_type, f.reason, *f.hints])


def _guards(p: FixProblem) -> str:
    return " ".join(p.facts.guards) if isinstance(p.facts, RecompileFacts) else ""


def _norm(path: str | None) -> str:
    return (path or "").replace("\\", "/")


def scalar_outputs_applies(p: FixProblem, features: Features) -> bool:
    if not config_wants(features, "capture_scalar_outputs", True):
        return False
    match p.facts:
        case BreakFacts():
            text = _break_text(p.facts)
            return "capture_scalar_outputs" in text or "Tensor.item()" in text
        case ErrorFacts():
            return _is_data_dependent(p.facts)
        case _:
            return False


def dynamic_output_shapes_applies(p: FixProblem, features: Features) -> bool:
    if not isinstance(p.facts, BreakFacts) or not config_wants(features, "capture_dynamic_output_shape_ops", True):
        return False
    text = _break_text(p.facts)
    return "capture_dynamic_output_shape_ops" in text or "Dynamic shape operator" in text


def logging_call(p: FixProblem) -> str | None:
    """The logging function the break's line calls (print, logging.info, warnings.warn), when the break is about it."""
    if not isinstance(p.facts, BreakFacts):
        return None
    called = _LOGGING_CALL.search(p.facts.code)
    text = _break_text(p.facts)
    if called and ("builtin" in text or "print" in text or "logging" in text or "warn" in text):
        return called["fn"]
    return None


def logging_applies(p: FixProblem, features: Features) -> bool:
    return logging_call(p) is not None and features.has("reorderable_logging_functions")


def rewrite_applies(p: FixProblem, _features: Features) -> bool:
    """A break torch placed at a line of a file (an explicit torch._dynamo.graph_break() is meant)."""
    return isinstance(p.facts, BreakFacts) and bool(p.file) and bool(p.line) and "graph_break()" not in p.facts.code


NUMPY_RANDOM = re.compile(r"\b(?:np|numpy)\.random\b")


def numpy_random_applies(p: FixProblem, features: Features) -> bool:
    """A break at a line that draws from NumPy's random generator: inside compiled code Dynamo draws
    those from torch's stream, so the compiled run computes other numbers than eager;
    ``use_numpy_random_stream`` keeps NumPy's own stream (the compiled run then matches eager)."""
    if not isinstance(p.facts, BreakFacts) or not config_wants(features, "use_numpy_random_stream", True):
        return False
    return NUMPY_RANDOM.search(p.facts.code) is not None or "numpy.random" in _break_text(p.facts)


def disable_applies(p: FixProblem, features: Features) -> bool:
    """Disabling the function that breaks helps only when it is a helper the compiled code calls:
    disabling the callable given to torch.compile would just turn compilation off. Only the
    program's own functions: a break torch places inside a library (logging, say) is not the
    library's to change."""
    if not isinstance(p.facts, BreakFacts) or not p.function or not p.file or RESUME_FUNCTION.match(p.function):
        return False
    given = {(fn, _norm(file)) for fn, file in features.compiled_callables}
    root = _norm(features.program_root).rstrip("/") + "/"
    return ((p.function, _norm(p.file)) not in given and _norm(p.file).startswith(root) and root != "/"
            and features.has("compiler_disable") and "graph_break()" not in p.facts.code)


def limit_applies(p: FixProblem, features: Features) -> bool:
    return isinstance(p.facts, LimitFacts) and p.facts.limit_name in features.configs


def size_change(p: FixProblem) -> re.Match[str] | None:
    """The input dimension whose size changed, for a recompile of a frame the program compiled
    (a resume function after a break is not called by the program: nothing to mark there)."""
    if not isinstance(p.facts, RecompileFacts) or RESUME_FUNCTION.match(p.function or ""):
        return None
    return SIZE_GUARD.search(_guards(p))


def _entry_point(p: FixProblem, features: Features) -> bool:
    """The recompiled frame is a callable the program gave torch.compile: the only calls whose inputs
    a trial can mark (an inner function Dynamo compiled as a frame of its own is never called from
    outside). Unknown (no compiled callable recorded): worth a trial."""
    if not features.compiled_callables:
        return True
    return (p.function, _norm(p.file)) in {(fn, _norm(file)) for fn, file in features.compiled_callables}


def mark_dynamic_applies(function: str) -> Predicate:
    return lambda p, features: size_change(p) is not None and features.has(function) and _entry_point(p, features)


def input_path(name: str) -> str:
    """A guard's input name as the compiled function's argument: ``L['kwargs']['x']`` →
    ``kwargs['x']``, ``L['x']`` → ``x``."""
    found = re.match(r"L\['(?P<arg>[^']+)'\](?P<rest>.*)$", name)
    return f"{found['arg']}{found['rest']}" if found else name


def shown_input(path: str) -> str:
    """The input as the user names it: a keyword input ``kwargs['input_values']`` is ``input_values``."""
    keys = re.findall(r"\['([^']*)'\]", path)
    return keys[-1] if keys else path


def module_int_applies(p: FixProblem, features: Features) -> bool:
    int_guard = _INT_GUARD.search(_guards(p))
    on_module = int_guard is not None and re.match(r"(L\['self'\]|self)\.", int_guard["name"]) is not None
    return on_module and config_wants(features, "allow_unspec_int_on_nn_module", True)


def float_applies(p: FixProblem, features: Features) -> bool:
    return _FLOAT_GUARD.search(_guards(p)) is not None and config_wants(features, "specialize_float", False)


def dynamic_applies(p: FixProblem, _features: Features) -> bool:
    guards = _guards(p)  # a resume function too: dynamic=True reaches every frame the compile makes
    return bool(SIZE_GUARD.search(guards) or _INT_GUARD.search(guards) or _FLOAT_GUARD.search(guards))


def _is_data_dependent(f: ErrorFacts) -> bool:
    return DATA_DEPENDENT.search(f.reason) is not None or "DataDependent" in f.fail_type


def check_applies(p: FixProblem, _features: Features) -> bool:
    return isinstance(p.facts, ErrorFacts) and _is_data_dependent(p.facts)


def numerics_facts(p: FixProblem) -> NumericsFacts | None:
    return p.facts if isinstance(p.facts, NumericsFacts) else None


def _inductor_wants(features: Features, name: str, value: JsonValue) -> bool:
    return config_wants(features, f"{INDUCTOR_CONFIG}.{name}", value)


def precision_casts_applies(p: FixProblem, features: Features) -> bool:
    facts = numerics_facts(p)
    return facts is not None and facts.low_precision and _inductor_wants(features, "emulate_precision_casts", True)


def fallback_random_applies(p: FixProblem, features: Features) -> bool:
    facts = numerics_facts(p)
    return facts is not None and facts.random and _inductor_wants(features, "fallback_random", True)


def numerics_disable_applies(p: FixProblem, features: Features) -> bool:
    """Keeping the suspect's function in eager: only a helper the compiled code calls (disabling the
    callable given to torch.compile would switch compilation off), and only the program's own."""
    facts = numerics_facts(p)
    if facts is None or not facts.function or not facts.file or RESUME_FUNCTION.match(facts.function) or facts.compiled_frame:
        return False
    given = {(fn, _norm(file)) for fn, file in features.compiled_callables}
    root = _norm(features.program_root).rstrip("/") + "/"
    return ((facts.function, _norm(facts.file)) not in given and _norm(facts.file).startswith(root) and root != "/"
            and features.has("compiler_disable"))


def data_dependent_check(reason: str) -> tuple[str, str] | None:
    """(torch's expression, the torch._check argument) from a data-dependent guard error's text."""
    match = DATA_DEPENDENT.search(reason)
    if not match:
        return None
    return match["expr"].strip(), check_expression(match["expr"])


def check_expression(sympy_text: str) -> str:
    """torch's data-dependent expression (``Eq(u0, 1)``, ``u0 < 0``) as Python for torch._check.
    The unbacked symbol (u0) stands for the value the user computed; the user names it."""
    match = re.fullmatch(r"(Eq|Ne)\((.+), (.+)\)", sympy_text.strip())
    if match:
        op = "==" if match[1] == "Eq" else "!="
        return f"{match[2]} {op} {match[3]}"
    return sympy_text.strip()
