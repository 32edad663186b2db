"""What a remedy is (``Remedy``: a typed action the trial child applies, and the patch the user
pastes), and how each entry of the table makes its own. Nothing is ever executed from an action:
dynscope/fix/apply.py dispatches on its type.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from dynscope.analysis.fix_problems import BreakFacts, ErrorFacts, FixProblem, LimitFacts, base_name
from dynscope.analysis.remedy_applies import (
    DATA_DEPENDENT,
    DYNAMO_CONFIG,
    INDUCTOR_CONFIG,
    check_expression,
    input_path,
    logging_call,
    numerics_facts,
    shown_input,
    size_change,
)
from dynscope.analysis.source_edits import SourceEdit, SourceFile
from dynscope.events import (
    Action,
    AddLoggingFunction,
    ChangeSource,
    CompileWith,
    DisableFunction,
    JsonValue,
    MarkDynamic,
    SetConfig,
    ShowOnly,
    _json_value,
)
from dynscope.model.fix import HATCH_FEATURES, Features
from dynscope.rewrites import BreakSite, Offers, Rewrite

AppliesAs = Literal["config", "wrap", "code", "source"]


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
    private: tuple[str, ...] = ()  # torch's private names the change writes (a public remedy that passes goes first)

    @property
    def tried(self) -> bool:
        """False: a code change dynscope cannot apply without editing files (shown, not verified)."""
        return not isinstance(self.action, ShowOnly)


Make = Callable[[FixProblem, Features], Remedy]


# Reads a file a source rewrite may change: None when it may not be read (outside the program's
# tree and the installed libraries, too large, not text). dynscope/fix/source_reader.py makes one.
SourceReader = Callable[[str], "SourceFile | None"]


def config_remedy(name: str, value: JsonValue, *, module: str = DYNAMO_CONFIG) -> Remedy:
    line = f"{module}.{name} = {value!r}"
    return Remedy(f"config:{module}.{name}={value!r}", line, "config", SetConfig(module, name, value),
                  f"import torch\n{line}\n")


def config_setting(name: str, value: JsonValue) -> Make:
    return lambda _p, _features: config_remedy(name, value)


def logging_remedy(p: FixProblem, _features: Features) -> Remedy:
    fn = logging_call(p) or "print"
    module = fn.split(".")[0] if "." in fn else None
    line = f"{DYNAMO_CONFIG}.reorderable_logging_functions.add({fn})"
    return Remedy(f"logging:{fn}", line, "config", AddLoggingFunction(fn),
                  f"import torch\n{'import ' + module + chr(10) if module else ''}{line}\n")


MAX_REWRITES_PER_BREAK = 3  # candidates tried for one break: each is a run


def rewrite_remedies(p: FixProblem, features: Features, read: SourceReader) -> list[Remedy]:
    """The catalogue's rewrites of the file the break is in (dynscope/rewrites), each a remedy
    run through the trial's shadow. Tried in the first batch beside the settings on the same break
    (both a setting and a code change are proven; the combined change prefers the rewrite on a
    tie), and before ``torch.compiler.disable`` is believed: that one
    only moves the code to eager. A library's file is rewritten where it is (the user ran fix
    to have its breaks fixed); the title names the package and its version. Torch's escape hatches
    (``Rewrite.opaque``) come after the specific rules' first few, as fallbacks: they wait for the
    other trials on the break and run only if none fixed it."""
    from dynscope.rewrites.bounded import bounded_rewrites

    assert isinstance(p.facts, BreakFacts) and p.file and p.line  # rewrite_applies said so
    source = read(p.file)
    if source is None:
        return []
    site = BreakSite(p.line, p.facts.gb_type, p.facts.reason, p.function)
    found = bounded_rewrites(source.text, site, source.shown, source.budget, _offers(features, source.path))
    remedies = [_rewrite_remedy(source, r) for r in [r for r in found if not r.opaque][:MAX_REWRITES_PER_BREAK]]
    hatches = [_rewrite_remedy(source, r) for r in found if r.opaque]
    return remedies + (hatches or _caller_hatches(p.facts, features, read))


MAX_CALLERS = 2  # frames above a break tried for an escape hatch: each is a worker's parse


def _caller_hatches(facts: BreakFacts, features: Features, read: SourceReader) -> list[Remedy]:
    """Where the break's own function takes no hatch (a NumPy helper: arrays in, arrays out), the nearest caller
    that does: its function becomes the opaque call (wav2vec2's ``_mask_hidden_states`` around the SpecAugment
    helper), tensors in and out, the helper still run as Python at every call."""
    from dynscope.rewrites.bounded import bounded_rewrites

    for file, line in facts.callers[:MAX_CALLERS]:
        source = read(file)
        if source is None:
            continue
        site = BreakSite(line, facts.gb_type, facts.reason, None, caller=True)
        found = bounded_rewrites(source.text, site, source.shown, source.budget, _offers(features, source.path))
        if found:
            return [_rewrite_remedy(source, r) for r in found if r.opaque]
    return []


def _rewrite_remedy(source: SourceFile, rewrite: Rewrite) -> Remedy:
    edit = SourceEdit(source, rewrite.source)
    where = f" in {source.library}" if source.library else ""
    settings = tuple(SetConfig(DYNAMO_CONFIG, name, True) for name in rewrite.settings)
    with_settings = f" with {', '.join(f'{s.name} = True' for s in settings)}" if settings else ""
    head = "".join(f"{s.module}.{s.name} = True\n" for s in settings)
    return Remedy(
        f"rewrite:{rewrite.rule}:{source.shown}:{rewrite.line}",
        f"{rewrite.title}{with_settings}{where} ({base_name(source.shown)})", "source",
        ChangeSource(((source.path, rewrite.source),)), (f"import torch\n{head}\n" if head else "") + edit.diff(),
        edits=(edit,), rule=rewrite.rule, cause=rewrite.cause, also=settings,
        leaves_graph=rewrite.leaves_graph, private=private_names(edit.diff()), fallback=rewrite.opaque)


def _offers(features: Features, path: str) -> Offers:
    """The escape hatches this torch has, and the functions of this file given to torch.compile."""
    here = os.path.normcase(os.path.abspath(path))
    return Offers(frozenset(name for name in HATCH_FEATURES if features.has(name)),
                  frozenset(fn.rpartition(".")[2] for fn, file in features.compiled_callables
                            if file and os.path.normcase(os.path.abspath(file)) == here),
                  frozenset(line for file, line in features.compiled_lines
                            if os.path.normcase(os.path.abspath(file)) == here))


# torch's names with an underscore that its documentation gives users: the settings modules, the
# dynamic-shape marks, torch._check and torch._assert (and their variants).
_PUBLIC_UNDERSCORE = ("torch._dynamo.config.", "torch._inductor.config.", "torch._dynamo.mark_dynamic",
                      "torch._dynamo.maybe_mark_dynamic", "torch._dynamo.mark_static", "torch._check", "torch._assert")
_TORCH_NAME = re.compile(r"\btorch(?:\.[A-Za-z_]\w*)+")


def private_names(diff: str) -> tuple[str, ...]:
    """The private torch names the lines a diff adds use (``torch._higher_order_ops.print``), once each."""
    added = [line[1:] for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    names = (m[0] for line in added for m in _TORCH_NAME.finditer(line))
    return tuple(dict.fromkeys(n for n in names if "._" in n and not (n + ".").startswith(_PUBLIC_UNDERSCORE)))


def disable_remedy(p: FixProblem, _features: Features) -> Remedy:
    file, function = p.file or "?", p.function or "?"
    return Remedy(f"disable:{file}:{function}", f"torch.compiler.disable on {function} ({base_name(file)})", "wrap",
                  DisableFunction(file, function, p.line),
                  f"# in {file}: put @torch.compiler.disable above `def {function}`\n")


def limit_remedy(p: FixProblem, _features: Features) -> Remedy:
    facts = p.facts
    assert isinstance(facts, LimitFacts)  # limit_applies said so
    return config_remedy(facts.limit_name, (facts.limit or 8) * 4)


def mark_dynamic_remedy(maybe: bool) -> Make:
    fn = "maybe_mark_dynamic" if maybe else "mark_dynamic"

    def make(p: FixProblem, features: Features) -> Remedy:
        size = size_change(p)
        assert size is not None  # mark_dynamic_applies said so
        path, dim = input_path(size["name"]), int(size["dim"])
        name = shown_input(path)
        return Remedy(
            f"{fn}:{p.file}:{p.function}:{path}:{dim}", f"torch._dynamo.{fn}({name}, {dim}) before calling {p.function}",
            "wrap", MarkDynamic(p.function or "?", p.file, path, dim, maybe),
            f"torch._dynamo.{fn}({name}, {dim})  # on the input `{name}` of {p.function} ({base_name(p.file)}:{p.line}), "
            "before the compiled call",
            fallback=maybe and features.has("mark_dynamic"))
    return make


def dynamic_remedy(_p: FixProblem, _features: Features) -> Remedy:
    return Remedy("compile:dynamic=True", "torch.compile(..., dynamic=True)", "wrap", CompileWith((("dynamic", True),)),
                  "# pass dynamic=True where the program calls torch.compile:\ntorch.compile(model, dynamic=True)\n")


def check_remedy(p: FixProblem, _features: Features) -> Remedy:
    found = DATA_DEPENDENT.search(p.facts.reason) if isinstance(p.facts, ErrorFacts) else None
    expr = found["expr"].strip() if found else "<the expression in the error>"
    code = f"torch._check({check_expression(expr)})"
    return Remedy(f"check:{p.file}:{p.line}", f"torch._check(...) on {expr} before {base_name(p.file)}:{p.line}", "code",
                  ShowOnly(code), f"{code}  # add before {p.file}:{p.line}; tells the compiler what the "
                  "data-dependent value satisfies")


def inductor_config(name: str, value: JsonValue) -> Make:
    return lambda _p, _features: config_remedy(name, value, module=INDUCTOR_CONFIG)


def numerics_disable_remedy(p: FixProblem, _features: Features) -> Remedy:
    facts = numerics_facts(p)
    assert facts is not None and facts.function and facts.file  # numerics_disable_applies said so
    return Remedy(f"disable:{facts.file}:{facts.function}", f"torch.compiler.disable on {facts.function} "
                  f"({base_name(facts.file)})", "wrap", DisableFunction(facts.file, facts.function, facts.line),
                  f"# in {facts.file}: put @torch.compiler.disable above `def {facts.function}`\n")


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
