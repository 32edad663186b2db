"""What to try for which problem: the one table behind the summary's "try:" hints and ``dynscope fix``.

Each entry (``TABLE``) declares the problem kinds it serves, when it applies (a predicate on the
typed facts of the problem and on what this torch offers), the summary's one-line hint, and the
remedy ``fix`` tries: a typed action (dynscope.events: SetConfig, MarkDynamic, ...; applied by
dynscope/fix/apply.py, which dispatches on its type; nothing is ever executed from it) and the
patch the user pastes. Table order is the order remedies are tried and hints are looked for.
Adding a remedy is adding one entry here and its test (tests/unit/test_remedy_table.py).

Problems come from the run's view (``problems_of(run_view(capture))``), so the same code reads a
baseline run, a trial run and a recorded capture, and is tested without torch. Which remedies
this torch supports comes from the child (``Features``: probes/compat.remedy_features), never
from a version number.
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal, Protocol

from dynscope.analysis.breaks import BreakGroup
from dynscope.analysis.source_edits import SourceEdit, SourceFile
from dynscope.events import (
    FIX_FAMILY,
    Action,
    AddLoggingFunction,
    ChangeSource,
    CompileWith,
    DisableFunction,
    FixFamily,
    JsonValue,
    MarkDynamic,
    NumericsNode,
    RemedyKind,
    SetConfig,
    ShowOnly,
    _json_value,
)
from dynscope.model import CompileError, Recompile, RecompileLimitHit
from dynscope.model.break_text import first_line
from dynscope.model.fix import Features
from dynscope.model.numerics import node_site

AppliesAs = Literal["config", "wrap", "code", "source"]

# -- the typed facts remedies and hints are chosen from -------------------------------------------


@dataclass(frozen=True)
class BreakFacts:
    gb_type: str
    reason: str
    hints: tuple[str, ...]
    code: str  # the source line of the break, when torch recorded it


@dataclass(frozen=True)
class LimitFacts:
    limit: int | None
    limit_name: str


@dataclass(frozen=True)
class RecompileFacts:
    guard: str | None  # the first failing guard (the summary's hint reads it with its reason)
    reason: str | None
    expected: str | None
    actual: str | None
    guards: tuple[str, ...] = ()  # every recompile's first failing guard (fix reads them all)
    made_dynamic: bool = False  # Dynamo answered the shape change by making the dimension dynamic


@dataclass(frozen=True)
class ErrorFacts:
    fail_type: str
    reason: str
    user_line: int | None


@dataclass(frozen=True)
class SkippedFacts:
    headline: str  # the break Dynamo could not handle


@dataclass(frozen=True)
class NumericsFacts:
    """The first suspect of a numerics check (``dynscope numerics``): where compiled and eager part ways."""

    node: str  # the post-grad FX node
    op: str  # its target, "aten.relu.default"
    kernel: str  # the generated kernel computing it; "" for an extern call or none
    program_dtype: str  # "bfloat16", "float16", "float32"...
    function: str | None  # the user's function of the suspect's source line (innermost frame)
    file: str | None
    line: int | None
    compiled_frame: bool = False  # the function is the frame torch.compile compiled (disabling it compiles nothing)

    @property
    def random(self) -> bool:
        """A random op: eager and compiled draw different numbers unless Inductor falls back to eager's RNG."""
        op = self.op.lower()
        return any(word in op for word in _RANDOM_OP_WORDS)

    @property
    def low_precision(self) -> bool:
        return self.program_dtype in ("bfloat16", "float16", "torch.bfloat16", "torch.float16", "bf16", "fp16")


Facts = BreakFacts | LimitFacts | RecompileFacts | ErrorFacts | SkippedFacts | NumericsFacts


@dataclass(frozen=True)
class FixProblem:
    kind: RemedyKind
    key: str  # identity across runs: the same problem in a trial has the same key
    file: str | None
    line: int | None
    function: str | None
    detail: str  # one line: what happened
    count: int  # occurrences (breaks, recompiles) or 1
    facts: Facts  # what the remedies are chosen from

    @property
    def family(self) -> FixFamily:
        """The fix document's kind (docs/fix-json.md)."""
        return FIX_FAMILY[self.kind]


@dataclass(frozen=True)
class Remedy:
    key: str  # unique: one trial per distinct remedy, however many problems it targets
    title: str  # the change in one line, as the table shows it
    applies_as: AppliesAs
    action: Action  # what the trial child applies (dynscope/fix/apply.py); ShowOnly: nothing
    patch: str  # what to paste: config lines, a unified diff, or the code to add
    fallback: bool = False  # tried only when no other remedy fixed its problems (saves a run when one did)
    edits: tuple[SourceEdit, ...] = ()  # a source rewrite: the files it changes (merged in the combined run)
    rule: str | None = None  # a source rewrite: the catalogue rule that made it (dynscope/rewrites)
    cause: str | None = None  # a source rewrite: the break's real cause in words
    also: tuple[SetConfig, ...] = ()  # settings a source rewrite needs with it (applied in the same run)
    leaves_graph: bool = False  # a source rewrite that runs the breaking code in eager (Rewrite.leaves_graph)

    @property
    def tried(self) -> bool:
        """False: a code change dynscope cannot apply without editing files (shown, not verified)."""
        return not isinstance(self.action, ShowOnly)


Predicate = Callable[[FixProblem, Features], bool]
Make = Callable[[FixProblem, Features], Remedy]
Hint = Callable[[Facts], "str | None"]
# Reads a file a source rewrite may change: None when it may not be read (outside the program's
# tree and the installed libraries, too large, not text). dynscope/fix/source_reader.py makes one.
SourceReader = Callable[[str], "SourceFile | None"]
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


# -- problems ------------------------------------------------------------------------------


class ProblemSource(Protocol):
    """What problems are read from: dynscope.analysis.run_view.RunView."""

    @property
    def errors(self) -> list[CompileError]: ...
    @property
    def recompile_limit_hits(self) -> list[RecompileLimitHit]: ...
    @property
    def break_groups(self) -> list[BreakGroup]: ...
    @property
    def recompiles(self) -> list[Recompile]: ...


# A trial that ran changed source records lines of the changed text: this maps (file, line) back
# to the line of the file on disk, so a problem keeps its key (dynscope/fix/trials.py).
Relocate = Callable[["str | None", "int | None"], "int | None"]


def _same_line(_file: str | None, line: int | None) -> int | None:
    return line


def problems_of(run: ProblemSource, relocate: Relocate = _same_line) -> list[FixProblem]:
    """Every compile error, recompile-limit hit, graph break (by cause and line) and recompiled
    frame (by cause) of one run, worst kind first as ``dynscope summary`` lists them."""
    problems: list[FixProblem] = []
    at = relocate
    for e in run.errors:
        problems.append(FixProblem(
            "error", f"error|{e.fail_type}|{e.function}|{e.file}|{at(e.file, e.line)}", e.user_file or e.file,
            at(e.user_file, e.user_line) if e.user_line else at(e.file, e.line), e.function,
            f"{e.fail_type} while compiling {e.function}", 1,
            ErrorFacts(e.fail_type or "", e.reason or "", at(e.user_file, e.user_line))))
    for h in run.recompile_limit_hits:
        problems.append(FixProblem(
            "recompile_limit", f"limit|{h.function}|{h.file}|{at(h.file, h.line)}", h.file, at(h.file, h.line),
            h.function, f"{h.function} hit the recompile limit ({h.limit_name} = {h.limit})", 1,
            LimitFacts(h.limit, h.limit_name or "recompile_limit")))
    for g in run.break_groups:
        where = g.location
        line = at(where.file, where.line)
        problems.append(FixProblem(
            "graph_break", f"break|{fresh_symbols(g.gb_type or g.headline)}|{where.file}|{line}", where.file, line,
            where.function, g.headline or g.gb_type or "graph break", g.count or 1,
            BreakFacts(g.gb_type or "", g.reason or "", tuple(g.hints), where.code or "")))
    # One problem per recompiled frame and cause: a batch size that changes and an int that
    # changes are two problems with different remedies, even in the same function.
    causes: dict[tuple[str, str | None, int | None, str], list[Recompile]] = {}
    for r in run.recompiles:
        first_guard = r.failures[0].guard if r.failures else None
        cause, _ = recompile_cause(first_guard or r.reason or "")
        causes.setdefault((r.function, r.file, at(r.file, r.line), fresh_symbols(cause)), []).append(r)
    for (function, file, line, cause), rs in causes.items():
        failures = [r.failures[0] for r in rs if r.failures]
        first = failures[0] if failures else None
        _, words = recompile_cause((first.guard if first else None) or rs[0].reason or "")
        expected, actual = (first.expected, first.actual) if first else (None, None)
        change = f": {expected} → {actual}" if expected is not None else ""
        problems.append(FixProblem(
            "recompile", f"recompile|{function}|{file}|{line}|{cause}", file, line, function,
            f"{_friendly(function)} recompiled {_times(len(rs))}: {words}{change}", len(rs),
            RecompileFacts(first.guard if first else None, first.reason if first else None, expected, actual,
                           tuple(f.guard or f.reason or "" for f in failures))))
    return _merged(problems)


_FRESH_SYMBOL = re.compile(r"\b[us]\d+\b")


def fresh_symbols(text: str) -> str:
    """A problem's cause with torch's fresh symbol names (u0, u1, s0...) made one: the same guard
    on the same line, met again, gets a new symbol and is still one problem."""
    return _FRESH_SYMBOL.sub("u?", text)


def _merged(problems: list[FixProblem]) -> list[FixProblem]:
    """Problems of one key made one (their occurrences summed), in first-seen order."""
    by_key: dict[str, FixProblem] = {}
    for p in problems:
        seen = by_key.get(p.key)
        by_key[p.key] = p if seen is None else replace(seen, count=seen.count + p.count)
    return list(by_key.values())


def site_of(key: str) -> tuple[str, str] | None:
    """(file, line) of a graph-break problem's key (``break|cause|file|line``); None for other kinds."""
    if not key.startswith("break|"):
        return None
    _, file, line = key.rsplit("|", 2)
    return file, line


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


def problem_counts(problems: Sequence[FixProblem]) -> dict[str, int]:
    """Problem key -> occurrences, for comparing a trial with the baseline."""
    return {p.key: p.count for p in problems}


def _friendly(function: str | None) -> str:
    match = re.match(r"torch_dynamo_resume_in_(\w+)_at_(\d+)", function or "")
    return f"{match[1]} (after the break at line {match[2]})" if match else (function or "?")


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


# -- what the entries read ------------------------------------------------------------------------

_DYNAMO = "torch._dynamo.config"
_INDUCTOR = "torch._inductor.config"
# Ops whose result is random (dynscope/minifier/fragment.py skips comparing them for the same reason).
_RANDOM_OP_WORDS = ("dropout", "rand", "bernoulli", "normal", "multinomial", "uniform", "exponential", "poisson",
                    "cauchy", "geometric", "log_normal")
# The input's name may itself hold quotes: a keyword input is "kwargs['input_values']" (or "L['kwargs']['x']").
# The summary's hint names only a plain input (its text is part of the recorded views).
_SIZE_HINT = re.compile(r"tensor '(?P<name>[^']+)' (?:size|stride) mismatch at index (?P<dim>\d+)")
_SIZE = re.compile(r"tensor '(?P<name>[A-Za-z_][\w.]*(?:\['[^']*'\])*)' (?:size|stride) mismatch at index (?P<dim>\d+)")
_SHAPE = re.compile(r"size mismatch|stride mismatch|sizes? of|\.size\(\)")
# "n == 2", "L['n'] == 2", "self.n == 2" (an int Dynamo specialized on) and "t == 2.0" (a float)
_INT_GUARD = re.compile(r"(?P<name>(?:L\['[^']+'\]|[A-Za-z_]\w*)(?:\.\w+)*) == (?P<value>-?\d+)(?![\d.])")
_VALUE_GUARD = re.compile(r"(?P<name>(?:L\['[^']+'\]|[A-Za-z_]\w*)(?:\.\w+)*) == ")
_FLOAT_GUARD = re.compile(r"(?:L\['[^']+'\]|[A-Za-z_]\w*)(?:\.\w+)* == -?\d+\.\d*")
_DATA_DEPENDENT = re.compile(r"Could not guard on data-dependent expression (?P<expr>.+?)(?: \(unhinted|\n|$)")
_LOGGING_CALL = re.compile(r"\b(?P<fn>print|logging\.(?:debug|info|warning|error|critical|log)|warnings\.warn)\s*\(")
_RESUME = re.compile(r"^torch_dynamo_resume_in_")


def _wants(features: Features, name: str, value: JsonValue) -> bool:
    """The config exists in this torch and is not already at the remedy's value."""
    return name in features.configs and features.configs[name] != value


def _break_text(f: BreakFacts) -> str:
    return " ".join([f.gb_type, f.reason, *f.hints])


def _guards(p: FixProblem) -> str:
    return " ".join(p.facts.guards) if isinstance(p.facts, RecompileFacts) else ""


def _norm(path: str | None) -> str:
    return (path or "").replace("\\", "/")


def _base(path: str | None) -> str:
    return (path or "?").replace("\\", "/").rsplit("/", 1)[-1]


def config_remedy(name: str, value: JsonValue, *, module: str = _DYNAMO) -> Remedy:
    line = f"{module}.{name} = {value!r}"
    return Remedy(f"config:{module}.{name}={value!r}", line, "config", SetConfig(module, name, value),
                  f"import torch\n{line}\n")


def _config(name: str, value: JsonValue) -> Make:
    return lambda _p, _features: config_remedy(name, value)


# -- the entries' predicates, remedies and hints ----------------------------------------------------


def _scalar_outputs_applies(p: FixProblem, features: Features) -> bool:
    if not _wants(features, "capture_scalar_outputs", True):
        return False
    match p.facts:
        case BreakFacts():
            text = _break_text(p.facts)
            return "capture_scalar_outputs" in text or "Tensor.item()" in text
        case ErrorFacts():
            return _is_data_dependent(p.facts)
        case _:
            return False


def _dynamic_output_shapes_applies(p: FixProblem, features: Features) -> bool:
    if not isinstance(p.facts, BreakFacts) or not _wants(features, "capture_dynamic_output_shape_ops", True):
        return False
    text = _break_text(p.facts)
    return "capture_dynamic_output_shape_ops" in text or "Dynamic shape operator" in text


def _logging_call(p: FixProblem) -> str | None:
    """The logging function the break's line calls (print, logging.info, warnings.warn), when the break is about it."""
    if not isinstance(p.facts, BreakFacts):
        return None
    called = _LOGGING_CALL.search(p.facts.code)
    text = _break_text(p.facts)
    if called and ("builtin" in text or "print" in text or "logging" in text or "warn" in text):
        return called["fn"]
    return None


def _logging_applies(p: FixProblem, features: Features) -> bool:
    return _logging_call(p) is not None and features.has("reorderable_logging_functions")


def _logging_remedy(p: FixProblem, _features: Features) -> Remedy:
    fn = _logging_call(p) or "print"
    module = fn.split(".")[0] if "." in fn else None
    line = f"{_DYNAMO}.reorderable_logging_functions.add({fn})"
    return Remedy(f"logging:{fn}", line, "config", AddLoggingFunction(fn),
                  f"import torch\n{'import ' + module + chr(10) if module else ''}{line}\n")


MAX_REWRITES_PER_BREAK = 3  # candidates tried for one break: each is a run


def _rewrite_applies(p: FixProblem, _features: Features) -> bool:
    """A break torch placed at a line of a file (an explicit torch._dynamo.graph_break() is meant)."""
    return isinstance(p.facts, BreakFacts) and bool(p.file) and bool(p.line) and "graph_break()" not in p.facts.code


def _rewrite_remedies(p: FixProblem, _features: Features, read: SourceReader) -> list[Remedy]:
    """The catalogue's rewrites of the file the break is in (dynscope/rewrites), each a remedy
    run through the trial's shadow. Tried in the first batch beside the settings on the same break
    (both a setting and a code change are proven; the combined change prefers the rewrite on a
    tie), and before ``torch.compiler.disable`` is believed: that one
    only moves the code to eager. A library's file is rewritten where it is (the user ran fix
    to have its breaks fixed); the title names the package and its version."""
    from dynscope.rewrites import BreakSite
    from dynscope.rewrites.bounded import bounded_rewrites

    assert isinstance(p.facts, BreakFacts) and p.file and p.line  # _rewrite_applies said so
    source = read(p.file)
    if source is None:
        return []
    site = BreakSite(p.line, p.facts.gb_type, p.facts.reason, p.function)
    remedies = []
    for rewrite in bounded_rewrites(source.text, site, source.shown, source.budget)[:MAX_REWRITES_PER_BREAK]:
        edit = SourceEdit(source, rewrite.source)
        where = f" in {source.library}" if source.library else ""
        settings = tuple(SetConfig(_DYNAMO, name, True) for name in rewrite.settings)
        with_settings = f" with {', '.join(f'{s.name} = True' for s in settings)}" if settings else ""
        head = "".join(f"{s.module}.{s.name} = True\n" for s in settings)
        remedies.append(Remedy(
            f"rewrite:{rewrite.rule}:{source.shown}:{rewrite.line}",
            f"{rewrite.title}{with_settings}{where} ({_base(source.shown)})", "source",
            ChangeSource(((source.path, rewrite.source),)), (f"import torch\n{head}\n" if head else "") + edit.diff(),
            edits=(edit,), rule=rewrite.rule, cause=rewrite.cause, also=settings,
            leaves_graph=rewrite.leaves_graph))
    return remedies


def _disable_applies(p: FixProblem, features: Features) -> bool:
    """Disabling the function that breaks helps only when it is a helper the compiled code calls:
    disabling the callable given to torch.compile would just turn compilation off. Only the
    program's own functions: a break torch places inside a library (logging, say) is not the
    library's to change."""
    if not isinstance(p.facts, BreakFacts) or not p.function or not p.file or _RESUME.match(p.function):
        return False
    given = {(fn, _norm(file)) for fn, file in features.compiled_callables}
    root = _norm(features.program_root).rstrip("/") + "/"
    return ((p.function, _norm(p.file)) not in given and _norm(p.file).startswith(root) and root != "/"
            and features.has("compiler_disable") and "graph_break()" not in p.facts.code)


def _disable_remedy(p: FixProblem, _features: Features) -> Remedy:
    file, function = p.file or "?", p.function or "?"
    return Remedy(f"disable:{file}:{function}", f"torch.compiler.disable on {function} ({_base(file)})", "wrap",
                  DisableFunction(file, function, p.line),
                  f"# in {file}: put @torch.compiler.disable above `def {function}`\n")


def _limit_applies(p: FixProblem, features: Features) -> bool:
    return isinstance(p.facts, LimitFacts) and p.facts.limit_name in features.configs


def _limit_hint(facts: Facts) -> str | None:
    if not isinstance(facts, LimitFacts):
        return None
    return ("see the recompiles of this frame below for the guard that keeps failing; raise "
            f"torch._dynamo.config.{facts.limit_name} only if every recompile is expected")


def _torch_hint(facts: Facts) -> str | None:
    """torch's own advice for the break (its first hint), when it gave one."""
    return first_line(facts.hints[0]) if isinstance(facts, BreakFacts) and facts.hints else None


def _skipped_hint(facts: Facts) -> str | None:
    if not isinstance(facts, SkippedFacts):
        return None
    return "fix that graph break (see it below); the program's results are not affected, only its speed"


def _limit_remedy(p: FixProblem, _features: Features) -> Remedy:
    facts = p.facts
    assert isinstance(facts, LimitFacts)  # _limit_applies said so
    return config_remedy(facts.limit_name, (facts.limit or 8) * 4)


def _size_change(p: FixProblem) -> re.Match[str] | None:
    """The input dimension whose size changed, for a recompile of a frame the program compiled
    (a resume function after a break is not called by the program: nothing to mark there)."""
    if not isinstance(p.facts, RecompileFacts) or _RESUME.match(p.function or ""):
        return None
    return _SIZE.search(_guards(p))


def _entry_point(p: FixProblem, features: Features) -> bool:
    """The recompiled frame is a callable the program gave torch.compile: the only calls whose inputs
    a trial can mark (an inner function Dynamo compiled as a frame of its own is never called from
    outside). Unknown (no compiled callable recorded): worth a trial."""
    if not features.compiled_callables:
        return True
    return (p.function, _norm(p.file)) in {(fn, _norm(file)) for fn, file in features.compiled_callables}


def _mark_dynamic_applies(function: str) -> Predicate:
    return lambda p, features: _size_change(p) is not None and features.has(function) and _entry_point(p, features)


def input_path(name: str) -> str:
    """A guard's input name as the compiled function's argument: ``L['kwargs']['x']`` →
    ``kwargs['x']``, ``L['x']`` → ``x``."""
    found = re.match(r"L\['(?P<arg>[^']+)'\](?P<rest>.*)$", name)
    return f"{found['arg']}{found['rest']}" if found else name


def _shown_input(path: str) -> str:
    """The input as the user names it: a keyword input ``kwargs['input_values']`` is ``input_values``."""
    keys = re.findall(r"\['([^']*)'\]", path)
    return keys[-1] if keys else path


def _mark_dynamic_remedy(maybe: bool) -> Make:
    fn = "maybe_mark_dynamic" if maybe else "mark_dynamic"

    def make(p: FixProblem, features: Features) -> Remedy:
        size = _size_change(p)
        assert size is not None  # _mark_dynamic_applies said so
        path, dim = input_path(size["name"]), int(size["dim"])
        name = _shown_input(path)
        return Remedy(
            f"{fn}:{p.file}:{p.function}:{path}:{dim}", f"torch._dynamo.{fn}({name}, {dim}) before calling {p.function}",
            "wrap", MarkDynamic(p.function or "?", p.file, path, dim, maybe),
            f"torch._dynamo.{fn}({name}, {dim})  # on the input `{name}` of {p.function} ({_base(p.file)}:{p.line}), "
            "before the compiled call",
            fallback=maybe and features.has("mark_dynamic"))
    return make


def _module_int_applies(p: FixProblem, features: Features) -> bool:
    int_guard = _INT_GUARD.search(_guards(p))
    on_module = int_guard is not None and re.match(r"(L\['self'\]|self)\.", int_guard["name"]) is not None
    return on_module and _wants(features, "allow_unspec_int_on_nn_module", True)


def _float_applies(p: FixProblem, features: Features) -> bool:
    return _FLOAT_GUARD.search(_guards(p)) is not None and _wants(features, "specialize_float", False)


def _dynamic_applies(p: FixProblem, _features: Features) -> bool:
    guards = _guards(p)  # a resume function too: dynamic=True reaches every frame the compile makes
    return bool(_SIZE.search(guards) or _INT_GUARD.search(guards) or _FLOAT_GUARD.search(guards))


def _dynamic_remedy(_p: FixProblem, _features: Features) -> Remedy:
    return Remedy("compile:dynamic=True", "torch.compile(..., dynamic=True)", "wrap", CompileWith((("dynamic", True),)),
                  "# pass dynamic=True where the program calls torch.compile:\ntorch.compile(model, dynamic=True)\n")


def _is_data_dependent(f: ErrorFacts) -> bool:
    return _DATA_DEPENDENT.search(f.reason) is not None or "DataDependent" in f.fail_type


def _check_applies(p: FixProblem, _features: Features) -> bool:
    return isinstance(p.facts, ErrorFacts) and _is_data_dependent(p.facts)


def _check_remedy(p: FixProblem, _features: Features) -> Remedy:
    found = _DATA_DEPENDENT.search(p.facts.reason) if isinstance(p.facts, ErrorFacts) else None
    expr = found["expr"].strip() if found else "<the expression in the error>"
    code = f"torch._check({check_expression(expr)})"
    return Remedy(f"check:{p.file}:{p.line}", f"torch._check(...) on {expr} before {_base(p.file)}:{p.line}", "code",
                  ShowOnly(code), f"{code}  # add before {p.file}:{p.line}; tells the compiler what the "
                  "data-dependent value satisfies")


def _check_hint(facts: Facts) -> str | None:
    """A guard on a data-dependent value: the torch._check that tells the compiler what it satisfies."""
    if not isinstance(facts, ErrorFacts):
        return None
    check = data_dependent_check(facts.reason)
    if check is None:
        return None
    where = f" before line {facts.user_line}" if facts.user_line else ""
    return (f"the compiler cannot tell which way {check[0]} goes for a value computed from data: add "
            f"torch._check({check[1]}){where} (name the value it stands for), or `dynscope fix` to try remedies")


def _shape_hint(facts: Facts) -> str | None:
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


def _same_type_hint(facts: Facts) -> str | None:
    """An int and a float of equal value: Dynamo guards on the type as well."""
    if not isinstance(facts, RecompileFacts):
        return None
    expected, actual = _number(facts.expected), _number(facts.actual)
    if expected is None or actual is None or expected[0] != actual[0] or expected[1] == actual[1]:
        return None
    return (f"int/float specialization: the value was the {expected[1]} {facts.expected} when compiled and is the "
            f"{actual[1]} {facts.actual} now; Dynamo guards on the Python type as well as the value, so pass the "
            f"same type on every call (e.g. always {expected[1]}({facts.actual}))")


def _python_value_hint(facts: Facts) -> str | None:
    if not isinstance(facts, RecompileFacts):
        return None
    expected, actual = _number(facts.expected), _number(facts.actual)
    if expected is None or actual is None:
        return None
    return (f"Dynamo specialized on the Python {expected[1]} {facts.expected} and got {facts.actual}: each new value "
            "compiles again; keep it constant, or pass it as a tensor (torch.tensor(value))")


def _reason_hint(pattern: str, hint: str) -> Hint:
    """A hint from torch's guard-failure text alone."""
    compiled = re.compile(pattern)
    return lambda facts: hint if isinstance(facts, RecompileFacts) and compiled.search(facts.reason or "") else None


# -- numerics: the first suspect of `dynscope numerics` ------------------------------------------------
# Inductor's settings are recorded in Features.configs under their full dotted name
# ("torch._inductor.config.fallback_random"): Dynamo's are recorded by their bare name.


def _numerics(p: FixProblem) -> NumericsFacts | None:
    return p.facts if isinstance(p.facts, NumericsFacts) else None


def _inductor_wants(features: Features, name: str, value: JsonValue) -> bool:
    return _wants(features, f"{_INDUCTOR}.{name}", value)


def _inductor_config(name: str, value: JsonValue) -> Make:
    return lambda _p, _features: config_remedy(name, value, module=_INDUCTOR)


def _precision_casts_applies(p: FixProblem, features: Features) -> bool:
    facts = _numerics(p)
    return facts is not None and facts.low_precision and _inductor_wants(features, "emulate_precision_casts", True)


def _precision_casts_hint(facts: Facts) -> str | None:
    if not isinstance(facts, NumericsFacts) or not facts.low_precision:
        return None
    return (f"{_INDUCTOR}.emulate_precision_casts = True: Inductor then rounds intermediates to {facts.program_dtype} "
            "where eager does, so a fused kernel's extra precision no longer differs from eager")


def _fallback_random_applies(p: FixProblem, features: Features) -> bool:
    facts = _numerics(p)
    return facts is not None and facts.random and _inductor_wants(features, "fallback_random", True)


def _fallback_random_hint(facts: Facts) -> str | None:
    if not isinstance(facts, NumericsFacts) or not facts.random:
        return None
    return (f"{_INDUCTOR}.fallback_random = True: {facts.op} then draws the same random numbers as eager "
            "(compiled random ops use their own generator)")


def _numerics_disable_applies(p: FixProblem, features: Features) -> bool:
    """Keeping the suspect's function in eager: only a helper the compiled code calls (disabling the
    callable given to torch.compile would switch compilation off), and only the program's own."""
    facts = _numerics(p)
    if facts is None or not facts.function or not facts.file or _RESUME.match(facts.function) or facts.compiled_frame:
        return False
    given = {(fn, _norm(file)) for fn, file in features.compiled_callables}
    root = _norm(features.program_root).rstrip("/") + "/"
    return ((facts.function, _norm(facts.file)) not in given and _norm(facts.file).startswith(root) and root != "/"
            and features.has("compiler_disable"))


def _numerics_disable_remedy(p: FixProblem, _features: Features) -> Remedy:
    facts = _numerics(p)
    assert facts is not None and facts.function and facts.file  # _numerics_disable_applies said so
    return Remedy(f"disable:{facts.file}:{facts.function}", f"torch.compiler.disable on {facts.function} "
                  f"({_base(facts.file)})", "wrap", DisableFunction(facts.file, facts.function, facts.line),
                  f"# in {facts.file}: put @torch.compiler.disable above `def {facts.function}`\n")


def _numerics_disable_hint(facts: Facts) -> str | None:
    if not isinstance(facts, NumericsFacts) or not facts.function or _RESUME.match(facts.function):
        return None
    if facts.compiled_frame:
        return (f"keep {facts.op} in eager: move line {facts.line} of {facts.function} ({_base(facts.file)}) into a "
                "helper with @torch.compiler.disable above its `def` (disabling "
                f"{facts.function} itself would compile nothing of it)")
    return (f"keep {facts.function} ({_base(facts.file)}) in eager: put @torch.compiler.disable above "
            f"`def {facts.function}` (it runs uncompiled, so its numbers are eager's)")


def numerics_problem(suspect: NumericsNode, program_dtype: str, compiled: tuple[str, str | None] | None = None
                     ) -> FixProblem:
    """The first suspect of a numerics check as a problem the table's numerics entries serve. Not one
    of ``problems_of``: ``fix`` judges by equal outputs, a numerics remedy by the error it removes.
    ``compiled``: (function, file) of the frame whose graph holds the suspect."""
    site = node_site(suspect)
    file, line, function = site.file, site.line, site.function
    in_frame = compiled is not None and function == compiled[0] and _base(file) == _base(compiled[1])
    facts = NumericsFacts(suspect.node, suspect.op, suspect.kernel, program_dtype, function, file, line, in_frame)
    return FixProblem("numerics", f"numerics|{suspect.graph}|{suspect.direction}|{suspect.op}|{file}|{line}", file,
                      line, function, f"{suspect.op} ({suspect.node}) is where compiled and eager part ways", 1, facts)


# -- the table ----------------------------------------------------------------------------------------

TABLE: tuple[Entry, ...] = (
    Entry("torch_check", ("error",), _check_applies, _check_remedy, _check_hint),
    Entry("capture_scalar_outputs", ("graph_break", "error"), _scalar_outputs_applies,
          _config("capture_scalar_outputs", True)),
    Entry("capture_dynamic_output_shape_ops", ("graph_break",), _dynamic_output_shapes_applies,
          _config("capture_dynamic_output_shape_ops", True)),
    Entry("reorderable_logging_function", ("graph_break",), _logging_applies, _logging_remedy),
    Entry("source_rewrite", ("graph_break",), _rewrite_applies, rewrites=_rewrite_remedies),
    Entry("compiler_disable", ("graph_break",), _disable_applies, _disable_remedy),
    Entry("raise_recompile_limit", ("recompile_limit",), _limit_applies, _limit_remedy, _limit_hint),
    Entry("mark_dynamic", ("recompile",), _mark_dynamic_applies("mark_dynamic"), _mark_dynamic_remedy(False),
          _shape_hint),
    Entry("maybe_mark_dynamic", ("recompile",), _mark_dynamic_applies("maybe_mark_dynamic"),
          _mark_dynamic_remedy(True)),
    Entry("allow_unspec_int_on_nn_module", ("recompile",), _module_int_applies,
          _config("allow_unspec_int_on_nn_module", True)),
    Entry("specialize_float", ("recompile",), _float_applies, _config("specialize_float", False)),
    Entry("dynamic_true", ("recompile",), _dynamic_applies, _dynamic_remedy),
    Entry("suppress_errors", ("error",), lambda _p, features: _wants(features, "suppress_errors", True),
          _config("suppress_errors", True)),
    # A numerics suspect (dynscope numerics); their trials need an engine that judges the error, not equal outputs.
    Entry("emulate_precision_casts", ("numerics",), _precision_casts_applies,
          _inductor_config("emulate_precision_casts", True), _precision_casts_hint),
    Entry("fallback_random", ("numerics",), _fallback_random_applies, _inductor_config("fallback_random", True),
          _fallback_random_hint),
    Entry("numerics_compiler_disable", ("numerics",), _numerics_disable_applies, _numerics_disable_remedy,
          _numerics_disable_hint),
    # Hints only: what to try that no setting dynscope can try does.
    Entry("torch_advice", ("graph_break",), hint=_torch_hint),
    Entry("fix_the_break", ("skipped_frame",), hint=_skipped_hint),
    Entry("int_float_specialization", ("recompile",), hint=_same_type_hint),
    Entry("python_value", ("recompile",), hint=_python_value_hint),
    Entry("same_dtype_device", ("recompile",), hint=_reason_hint(
        r"dtype mismatch|device mismatch|requires_grad mismatch",
        "the input's dtype, device or requires_grad changed: each combination needs its own graph")),
    Entry("same_type", ("recompile",), hint=_reason_hint(
        r"___check_type_id|type\(|TYPE_MATCH", "a value changed type (e.g. int vs float): pass the same type on every call")),
    Entry("constant_value", ("recompile",), hint=_reason_hint(
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


def parse_try(text: str) -> Remedy:
    """``--try NAME=VALUE``: a setting the user wants tried too (VALUE a Python literal)."""
    name, sep, raw = text.partition("=")
    name = name.strip()
    if not sep or not re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_]\w*)+", name):
        raise ValueError(f"--try wants NAME=VALUE with a dotted NAME, e.g. torch._dynamo.config.specialize_int=True "
                         f"(got {text!r})")
    try:
        literal = ast.literal_eval(raw.strip())
        value = _json_value(literal, f"--try {name}")  # it travels to the trial child as JSON
    except (ValueError, SyntaxError):
        raise ValueError(f"--try {name}: the value must be a Python literal of numbers, strings, lists and dicts "
                         f"(got {raw.strip()!r})") from None
    module, _, attr = name.rpartition(".")
    line = f"{name} = {literal!r}"
    return Remedy(f"config:{name}={literal!r}", line, "config", SetConfig(module, attr, value),
                  f"import {module.split('.')[0]}\n{line}\n")


def patch_remedy(name: str, text: str, files: Sequence[tuple[str, str]]) -> Remedy:
    """``--patch FILE``: someone's change to the program's source (a colleague's, an agent's),
    run from memory in a trial (``files``: absolute path and changed text) and judged like every
    remedy, on every problem together."""
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    return Remedy(f"patch:{digest}", f"the patch {name}", "source", ChangeSource(tuple(files)), text)


def remedies_conflict(a: Remedy, b: Remedy) -> bool:
    """Two remedies that answer one question two ways, so the combined change keeps one:
    ``dynamic=True`` and any ``mark_dynamic``, or ``mark_dynamic`` and ``maybe_mark_dynamic`` of one input."""
    def dynamic_all(r: Remedy) -> bool:
        return isinstance(r.action, CompileWith) and any(k == "dynamic" for k, _ in r.action.kwargs)

    x, y = a.action, b.action
    if isinstance(x, MarkDynamic) and isinstance(y, MarkDynamic):
        return (x.function, x.file, x.arg, x.dim) == (y.function, y.file, y.arg, y.dim) and a.key != b.key
    return (dynamic_all(a) and isinstance(y, MarkDynamic)) or (dynamic_all(b) and isinstance(x, MarkDynamic))
