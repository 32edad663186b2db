"""Which remedies to try for which problem: the curated table behind ``dynscope fix``.

Pure functions of a summary document (``dynscope.summary/1``, see analysis/summary.py), so the
same code reads a fresh baseline run, a trial run and a recorded capture, and is tested without
torch. A remedy is data: what the trial child applies (``action``, a small JSON object that
dynscope/fix/apply.py interprets; nothing is ever executed from it) and what the user pastes
(``patch``). Which remedies this torch supports comes from the child
(``features``: probes/compat.remedy_features), never from a version number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

KINDS = ("break", "recompile", "error")


@dataclass(frozen=True)
class FixProblem:
    kind: str  # "break" | "recompile" | "error"
    key: str  # identity across runs: the same problem in a trial has the same key
    file: str | None
    line: int | None
    function: str | None
    detail: str  # one line: what happened
    count: int  # occurrences (breaks, recompiles) or 1
    facts: dict[str, Any] = field(default_factory=dict, compare=False)  # what the remedies are chosen from

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "file": self.file, "line": self.line, "function": self.function,
                "detail": self.detail, "count": self.count}


@dataclass(frozen=True)
class Remedy:
    key: str  # unique: one trial per distinct remedy, however many problems it targets
    title: str  # the change in one line, as the table shows it
    applies_as: str  # "config" | "wrap" | "code"
    action: dict[str, Any]  # what the trial child applies (dynscope/fix/apply.py); {} for code-only remedies
    patch: str  # what to paste: config lines, a unified diff, or the code to add
    tried: bool = True  # False: a code change dynscope cannot apply without editing files (shown, not verified)
    fallback: bool = False  # tried only when no other remedy fixed its problems (saves a run when one did)

    def as_json(self) -> dict[str, Any]:
        return {"key": self.key, "title": self.title, "applies_as": self.applies_as, "action": self.action,
                "patch": self.patch}


# -- problems ------------------------------------------------------------------------------


def problems_from_summary(doc: dict[str, Any]) -> list[FixProblem]:
    """Every graph break (by cause and line), recompiled frame, recompile-limit hit and compile
    error of one run, worst kind first as ``dynscope summary`` lists them."""
    problems: list[FixProblem] = []
    for e in doc.get("errors", []):
        file, line = e.get("user_file") or e.get("file"), e.get("user_line") or e.get("line")
        problems.append(FixProblem(
            "error", f"error|{e.get('fail_type')}|{e.get('function')}|{e.get('file')}|{e.get('line')}",
            file, line, e.get("function"), f"{e.get('fail_type')} while compiling {e.get('function')}", 1,
            {"fail_type": e.get("fail_type") or "", "reason": e.get("reason") or ""}))
    for h in doc.get("recompile_limit_hits", []):
        problems.append(FixProblem(
            "recompile", f"limit|{h.get('function')}|{h.get('file')}|{h.get('line')}", h.get("file"), h.get("line"),
            h.get("function"), f"{h.get('function')} hit the recompile limit ({h.get('limit_name')} = {h.get('limit')})",
            1, {"limit": h.get("limit"), "limit_name": h.get("limit_name") or "recompile_limit"}))
    for g in doc.get("graph_breaks", []):
        problems.append(FixProblem(
            "break", f"break|{g.get('gb_type') or g.get('headline')}|{g.get('file')}|{g.get('line')}",
            g.get("file"), g.get("line"), g.get("function"), _break_detail(g), int(g.get("count") or 1),
            {"gb_type": g.get("gb_type") or "", "gb_id": g.get("gb_id") or "", "headline": g.get("headline") or "",
             "reason": g.get("reason") or "", "hints": list(g.get("hints") or []), "code": g.get("code") or ""}))
    # One problem per recompiled frame and cause: a batch size that changes and an int that
    # changes are two problems with different remedies, even in the same function.
    causes: dict[tuple, list[dict[str, Any]]] = {}
    for r in doc.get("recompiles", []):
        first = (r.get("failures") or [{}])[0]
        cause, _ = recompile_cause(first.get("guard") or r.get("reason") or "")
        causes.setdefault((r.get("function"), r.get("file"), r.get("line"), cause), []).append(r)
    for (function, file, line, cause), rs in causes.items():
        failures = [f for r in rs for f in r.get("failures", [])[:1]]
        first = failures[0] if failures else {}
        _, words = recompile_cause(first.get("guard") or rs[0].get("reason") or "")
        change = f": {first.get('expected')} → {first.get('actual')}" if first.get("expected") is not None else ""
        problems.append(FixProblem(
            "recompile", f"recompile|{function}|{file}|{line}|{cause}", file, line, function,
            f"{_friendly(function)} recompiled {_times(len(rs))}: {words}{change}", len(rs),
            {"guards": [f.get("guard") or f.get("reason") or "" for f in failures],
             "expected": first.get("expected"), "actual": first.get("actual")}))
    return problems


def recompile_cause(guard: str) -> tuple[str, str]:
    """(identity, words) of what changed: "size x 0" / "the size of x's dimension 0 changed"."""
    size = _SIZE.search(guard)
    if size:
        return f"size {size['name']} {size['dim']}", f"the size of {size['name']}'s dimension {size['dim']} changed"
    value = _VALUE_GUARD.search(guard)
    if value:
        return f"value {value['name']}", f"the value of {value['name']} changed (Dynamo specialized on it)"
    line = _first_line(guard)
    return f"guard {line}", f"guard failed: {line}"


def problem_counts(doc: dict[str, Any]) -> dict[str, int]:
    """Problem key -> occurrences, for comparing a trial with the baseline."""
    return {p.key: p.count for p in problems_from_summary(doc)}


def _break_detail(g: dict[str, Any]) -> str:
    return str(g.get("headline") or g.get("gb_type") or "graph break")


def _friendly(function: str | None) -> str:
    match = re.match(r"torch_dynamo_resume_in_(\w+)_at_(\d+)", function or "")
    return f"{match[1]} (after the break at line {match[2]})" if match else (function or "?")


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


# -- remedies ------------------------------------------------------------------------------

_DYNAMO = "torch._dynamo.config"
_SIZE = re.compile(r"tensor '(?P<name>[^']+)' (?:size|stride) mismatch at index (?P<dim>\d+)")
# "n == 2", "L['n'] == 2", "self.n == 2" (an int Dynamo specialized on) and "t == 2.0" (a float)
_INT_GUARD = re.compile(r"(?P<name>(?:L\['[^']+'\]|[A-Za-z_]\w*)(?:\.\w+)*) == (?P<value>-?\d+)(?![\d.])")
_VALUE_GUARD = re.compile(r"(?P<name>(?:L\['[^']+'\]|[A-Za-z_]\w*)(?:\.\w+)*) == ")
_FLOAT_GUARD = re.compile(r"(?:L\['[^']+'\]|[A-Za-z_]\w*)(?:\.\w+)* == -?\d+\.\d*")
_DATA_DEPENDENT = re.compile(r"Could not guard on data-dependent expression (?P<expr>.+?)(?: \(unhinted|\n|$)")
_LOGGING_CALL = re.compile(r"\b(?P<fn>print|logging\.(?:debug|info|warning|error|critical|log)|warnings\.warn)\s*\(")
_RESUME = re.compile(r"^torch_dynamo_resume_in_")


def config_remedy(name: str, value: Any, *, module: str = _DYNAMO) -> Remedy:
    line = f"{module}.{name} = {value!r}"
    return Remedy(f"config:{module}.{name}={value!r}", line, "config",
                  {"op": "config", "target": f"{module}.{name}", "value": value}, f"import torch\n{line}\n")


def remedies_for(problem: FixProblem, features: dict[str, Any]) -> list[Remedy]:
    """The remedies worth a trial for one problem, narrowest first, among those this torch has.

    ``features`` (recorded by the trial child) maps a config name to its current value, and the
    functions remedies call (``mark_dynamic``, ``maybe_mark_dynamic``, ``compiler_disable``,
    ``reorderable_logging_functions``) to True when present; ``compiled_callables`` lists the
    [function, file] given to torch.compile and ``program_root`` the program's directory."""
    if problem.kind == "break":
        found = _break_remedies(problem, features)
    elif problem.kind == "recompile":
        found = _recompile_remedies(problem, features)
    else:
        found = _error_remedies(problem, features)
    return list({r.key: r for r in found}.values())


def _wants(features: dict[str, Any], name: str, value: Any) -> bool:
    """The config exists in this torch and is not already at the remedy's value."""
    return name in features and features[name] != value


def _break_remedies(p: FixProblem, features: dict[str, Any]) -> list[Remedy]:
    f = p.facts
    text = " ".join([f.get("gb_type", ""), f.get("reason", ""), *f.get("hints", [])])
    found: list[Remedy] = []
    if ("capture_scalar_outputs" in text or "Tensor.item()" in text) and _wants(features, "capture_scalar_outputs", True):
        found.append(config_remedy("capture_scalar_outputs", True))
    if ("capture_dynamic_output_shape_ops" in text or "Dynamic shape operator" in text) and \
            _wants(features, "capture_dynamic_output_shape_ops", True):
        found.append(config_remedy("capture_dynamic_output_shape_ops", True))
    logging_fn = _LOGGING_CALL.search(f.get("code", ""))
    if logging_fn and ("builtin" in text or "print" in text or "logging" in text or "warn" in text) and \
            features.get("reorderable_logging_functions"):
        fn = logging_fn["fn"]
        module = fn.split(".")[0] if "." in fn else None
        line = f"{_DYNAMO}.reorderable_logging_functions.add({fn})"
        found.append(Remedy(f"logging:{fn}", line, "config", {"op": "logging_function", "function": fn},
                            f"import torch\n{'import ' + module + chr(10) if module else ''}{line}\n"))
    # Disabling the function that breaks helps only when it is a helper the compiled code calls:
    # disabling the callable given to torch.compile would just turn compilation off.
    # Only the program's own functions: a break torch places inside a library (logging, say) is not
    # the library's to change.
    given = {(fn, _norm(file)) for fn, file in features.get("compiled_callables", [])}
    root = _norm(features.get("program_root")).rstrip("/") + "/"
    if p.function and not _RESUME.match(p.function) and (p.function, _norm(p.file)) not in given \
            and p.file and _norm(p.file).startswith(root) and root != "/" \
            and features.get("compiler_disable") and "graph_break()" not in f.get("code", ""):
        found.append(Remedy(
            f"disable:{p.file}:{p.function}", f"torch.compiler.disable on {p.function} ({_base(p.file)})", "wrap",
            {"op": "disable", "file": p.file, "function": p.function, "line": p.line},
            f"# in {p.file}: put @torch.compiler.disable above `def {p.function}`\n"))
    return found


def _recompile_remedies(p: FixProblem, features: dict[str, Any]) -> list[Remedy]:
    f = p.facts
    if "limit" in f:
        limit = f.get("limit") or 8
        name = f.get("limit_name") or "recompile_limit"
        return [config_remedy(name, int(limit) * 4)] if name in features else []
    guards = " ".join(f.get("guards", []))
    found: list[Remedy] = []
    size = _SIZE.search(guards)
    resume = bool(_RESUME.match(p.function or ""))
    if size and not resume:
        name, dim = size["name"], int(size["dim"])
        for fn, maybe in (("mark_dynamic", False), ("maybe_mark_dynamic", True)):
            if features.get(fn):
                found.append(Remedy(
                    f"{fn}:{p.file}:{p.function}:{name}:{dim}", f"torch._dynamo.{fn}({name}, {dim}) before calling "
                    f"{p.function}", "wrap",
                    {"op": "mark_dynamic", "function": p.function, "file": p.file, "arg": name, "dim": dim,
                     "maybe": maybe},
                    f"torch._dynamo.{fn}({name}, {dim})  # on the input `{name}` of {p.function} "
                    f"({_base(p.file)}:{p.line}), before the compiled call",
                    fallback=maybe and bool(features.get("mark_dynamic"))))
    int_guard = _INT_GUARD.search(guards)
    on_module = bool(int_guard) and re.match(r"(L\['self'\]|self)\.", int_guard["name"]) is not None
    if on_module and _wants(features, "allow_unspec_int_on_nn_module", True):
        found.append(config_remedy("allow_unspec_int_on_nn_module", True))
    if _FLOAT_GUARD.search(guards) and _wants(features, "specialize_float", False):
        found.append(config_remedy("specialize_float", False))
    if size or int_guard or _FLOAT_GUARD.search(guards):
        found.append(Remedy("compile:dynamic=True", "torch.compile(..., dynamic=True)", "wrap",
                            {"op": "compile_kwargs", "kwargs": {"dynamic": True}},
                            "# pass dynamic=True where the program calls torch.compile:\n"
                            "torch.compile(model, dynamic=True)\n"))
    return found


def _error_remedies(p: FixProblem, features: dict[str, Any]) -> list[Remedy]:
    f = p.facts
    found: list[Remedy] = []
    data_dependent = _DATA_DEPENDENT.search(f.get("reason", ""))
    if data_dependent or "DataDependent" in f.get("fail_type", ""):
        expr = data_dependent["expr"].strip() if data_dependent else "<the expression in the error>"
        found.append(Remedy(
            f"check:{p.file}:{p.line}", f"torch._check(...) on {expr} before {_base(p.file)}:{p.line}", "code", {},
            f"torch._check({check_expression(expr)})  # add before {p.file}:{p.line}; tells the compiler what the "
            "data-dependent value satisfies", tried=False))
        if _wants(features, "capture_scalar_outputs", True):
            found.append(config_remedy("capture_scalar_outputs", True))
    if _wants(features, "suppress_errors", True):
        found.append(config_remedy("suppress_errors", True))
    return found


def data_dependent_check(reason: str) -> tuple[str, str] | None:
    """(torch's expression, the torch._check argument) from a data-dependent guard error's text."""
    match = _DATA_DEPENDENT.search(reason)
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


def _norm(path: str | None) -> str:
    return (path or "").replace("\\", "/")


def _base(path: str | None) -> str:
    return (path or "?").replace("\\", "/").rsplit("/", 1)[-1]


def select(problems: list[FixProblem], features: dict[str, Any], only: str | None = None
           ) -> list[tuple[Remedy, list[FixProblem]]]:
    """Each distinct remedy once, with every problem it is tried for, in problem order."""
    chosen: dict[str, tuple[Remedy, list[FixProblem]]] = {}
    for p in problems:
        if only and p.kind != only:
            continue
        for r in remedies_for(p, features):
            chosen.setdefault(r.key, (r, []))[1].append(p)
    return list(chosen.values())


def parse_try(text: str) -> Remedy:
    """``--try NAME=VALUE``: a setting the user wants tried too (VALUE a Python literal)."""
    import ast

    name, sep, raw = text.partition("=")
    name = name.strip()
    if not sep or not re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_]\w*)+", name):
        raise ValueError(f"--try wants NAME=VALUE with a dotted NAME, e.g. torch._dynamo.config.specialize_int=True "
                         f"(got {text!r})")
    try:
        value = ast.literal_eval(raw.strip())
    except (ValueError, SyntaxError):
        raise ValueError(f"--try {name}: the value must be a Python literal (got {raw.strip()!r})") from None
    module, _, attr = name.rpartition(".")
    line = f"{name} = {value!r}"
    return Remedy(f"config:{name}={value!r}", line, "config", {"op": "config", "target": name, "value": value},
                  f"import {module.split('.')[0]}\n{line}\n")
