"""Inside a trial run: apply remedies before the user's code runs, record each compiled region's outputs.

The parent (dynscope/fix/trials.py) names this module as a child extension in the run's
ChildSpec, with the remedies (dynscope/fix/trial_payload.py) as its payload: each action comes
from the remedy table (analysis/remedies.py). The recording child calls :func:`start_in_child`
once recording has started. Each action is a typed action of the contract (dynscope.events:
SetConfig, MarkDynamic, ...), dispatched on its type. Nothing here edits a file: configs are set, ``torch.compile`` is wrapped (to pass
extra arguments, mark input dimensions dynamic, and record outputs), and a function to disable
is replaced in its module or class by ``torch.compiler.disable(fn)``. Each action type is
applied in one place: ``Trial._apply``.
"""

from __future__ import annotations

import builtins
import functools
import hashlib
import importlib
import inspect
import json
import math
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from dynscope import events as contract
from dynscope.events import (
    Action,
    AddLoggingFunction,
    ChangeSource,
    CompileWith,
    DisableFunction,
    JsonValue,
    MarkDynamic,
    OutputLeaf,
    SetConfig,
    ShowOnly,
)
from dynscope.exhaustive import assert_never
from dynscope.fix.trial_payload import TrialRemedies
from dynscope.runner import shadow
from dynscope.runner.extensions import ChildHooks

VALUES_CAP = 4096  # values recorded per output tensor; larger ones keep an even sample and a hash
LEAVES_CAP = 64  # outputs recorded per call
CALLS_CAP = 100  # calls recorded per compiled region

# When an action can take effect: once recording starts, at each torch.compile of the program
# (a user module imported since), and before each call of what torch.compile returned.
Moment = Literal["install", "compile", "call"]


@dataclass(frozen=True)
class Call:
    """A call of a compiled callable: the function compiled (a module: its forward) and its arguments."""

    target: Callable[..., Any] | None
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


def start_in_child(recorder, payload: str) -> ChildHooks:
    """The trial child's extension (named in its ChildSpec by dynscope/fix/trials.py): apply the
    run's remedies once recording has started."""
    Trial(recorder, list(TrialRemedies.from_payload(payload).actions)).install()
    return ChildHooks()


class Trial:
    def __init__(self, recorder: Any, actions: list[Action]) -> None:
        self.recorder = recorder
        self.actions = actions
        self.pending = set(range(len(actions)))  # actions not yet applied
        self.compile_kwargs: dict[str, JsonValue] = {}
        self.regions = 0

    def install(self) -> None:
        import torch

        from dynscope.probes import compat

        contract.write(self.recorder, contract.FixFeatures(), json.dumps(compat.remedy_features(), default=str))
        self.apply("install")
        original = torch.compile
        trial = self

        @functools.wraps(original)
        def compile(model: Any = None, **kwargs: Any) -> Any:
            if model is None:  # @torch.compile(...) used as a decorator factory
                return lambda m: compile(m, **kwargs)
            trial.apply("compile")
            compiled = original(model, **{**kwargs, **trial.compile_kwargs})
            return trial.watch(model, compiled)

        torch.compile = compile

    # -- remedies ------------------------------------------------------------------------

    def apply(self, moment: Moment, call: Call | None = None) -> None:
        """Every action that can take effect now; each is recorded (FixApplied) the first time it does."""
        for i, action in enumerate(self.actions):
            if i not in self.pending and not isinstance(action, MarkDynamic):  # marks act on every call's inputs
                continue
            how = self._apply(action, moment, call)
            if how is not None and i in self.pending:
                self.pending.discard(i)
                contract.write(self.recorder, contract.FixApplied(index=i, op=action.OP, ok=True, how=how))

    def _apply(self, action: Action, moment: Moment, call: Call | None) -> str | None:
        """The one place each action type takes effect: how it did, or None (not now, or not possible)."""
        match action:
            case SetConfig():
                # A user module not importable yet: tried again at the next torch.compile.
                return _set_config(action) if moment in ("install", "compile") else None
            case AddLoggingFunction():
                return _add_logging_function(action) if moment == "install" else None
            case CompileWith():
                if moment != "install":
                    return None
                self.compile_kwargs.update(dict(action.kwargs))
                return "torch.compile arguments"
            case DisableFunction():
                return f"torch.compiler.disable({action.function})" \
                    if moment in ("compile", "call") and _disable_function(action) else None
            case MarkDynamic():
                return _mark_dynamic(action, call) if moment == "call" and call is not None else None
            case ShowOnly():
                return None  # the user's to make: never applied
            case ChangeSource():
                if moment != "install":
                    return None
                shadow.install(dict(action.files))  # before the program imports anything of its own
                return f"changed source of {len(action.files)} file(s), from memory"
            case _:
                assert_never(action)

    def not_applied_notes(self) -> list[str]:
        return [f"{self.actions[i].OP} not applied" for i in sorted(self.pending)]

    # -- compiled regions -----------------------------------------------------------------

    def watch(self, model: Any, compiled: Any) -> Any:
        """Record the outputs of every call of what torch.compile returned (and apply the remedies
        that act at call time), without changing what it is: a compiled module stays a module."""
        import torch

        from dynscope.probes import compat

        self.regions += 1
        name = f"{self.regions}:{getattr(type(model) if isinstance(model, torch.nn.Module) else model, '__qualname__', '?')}"
        target = model.forward if isinstance(model, torch.nn.Module) else model
        code = getattr(target, "__code__", None)
        if code is not None:
            contract.write(self.recorder, contract.FixRegion(function=code.co_name, file=code.co_filename,
                                                                   line=code.co_firstlineno))
        calls = 0

        def before(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            if compat.is_compiling():
                return
            self.apply("call", Call(target, args, kwargs))

        def after(output: Any) -> None:
            nonlocal calls
            if compat.is_compiling() or calls >= CALLS_CAP:
                return
            calls += 1
            try:
                leaves = describe_outputs(output)
            except Exception as e:  # never let recording break the program
                leaves = [OutputLeaf("unrecorded", type(e).__name__)]
            contract.write(self.recorder, contract.FixOutput(region=name, call=calls),
                           json.dumps([leaf.to_json() for leaf in leaves]))

        if isinstance(compiled, torch.nn.Module):
            compiled.register_forward_pre_hook(lambda _m, args, kwargs: before(args, kwargs), with_kwargs=True)
            compiled.register_forward_hook(lambda _m, _args, output: after(output))
            return compiled
        if not callable(compiled):
            return compiled

        @functools.wraps(compiled)
        def call(*args: Any, **kwargs: Any) -> Any:
            before(args, kwargs)
            output = compiled(*args, **kwargs)
            after(output)
            return output

        return call


def _resolve(dotted: str) -> Any:
    """The object a dotted name names (``torch._dynamo.config``, ``logging.info``), importing the
    longest module prefix that exists; None when there is none."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:n]))
        except ImportError:
            continue
        try:
            for part in parts[n:]:
                obj = getattr(obj, part)
        except AttributeError:
            return None
        return obj
    return None


def _set_config(action: SetConfig) -> str | None:
    owner = _resolve(action.module)
    if owner is None or not hasattr(owner, action.name):
        return None
    setattr(owner, action.name, action.value)
    return f"{action.target} = {action.value!r}"


def _add_logging_function(action: AddLoggingFunction) -> str | None:
    from dynscope.probes import compat

    functions = compat.reorderable_logging_functions()
    name = action.function
    fn = getattr(builtins, name, None) if "." not in name else _resolve(name)
    if functions is None or not callable(fn):
        return None
    functions.add(fn)
    return f"reorderable_logging_functions.add({name})"


def _mark_dynamic(action: MarkDynamic, call: Call) -> str | None:
    """Mark the input's dimension dynamic for this call, when the call is of the action's function."""
    from dynscope.probes import compat

    code = getattr(call.target, "__code__", None)
    if call.target is None or code is None or action.function != code.co_name:
        return None
    if action.file and os.path.realpath(action.file) != os.path.realpath(code.co_filename):
        return None
    try:
        bound = inspect.signature(call.target).bind_partial(*call.args, **call.kwargs)
    except (TypeError, ValueError):
        return None
    value = _argument(bound.arguments, action.arg)
    mark = compat.mark_dynamic_function(action.maybe)
    if mark is None or not hasattr(value, "dim") or value.dim() <= action.dim:
        return None
    mark(value, action.dim)
    return f"mark_dynamic({action.arg}, {action.dim})"


def _argument(arguments: Any, path: str) -> Any:
    """The call's input a guard named: an argument (``x``), or one inside a keyword argument or a
    dict (``kwargs['input_values']``); None when the call has no such input."""
    found = re.match(r"(?P<arg>\w+)(?P<keys>(?:\['[^']*'\])*)$", path)
    if found is None:
        return None
    value: Any = arguments.get(found["arg"])
    for key in re.findall(r"\['([^']*)'\]", found["keys"]):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _disable_function(action: DisableFunction) -> bool:
    """Replace the function that holds the break (module-level function or method of a class of
    that file) by torch.compiler.disable(fn). True once replaced."""
    from dynscope.probes import compat

    disable = compat.compiler_disable()
    wanted = os.path.realpath(action.file)
    name, line = action.function, action.line
    if disable is None:
        return False

    def matches(fn: Any) -> bool:
        code = getattr(fn, "__code__", None)
        if code is None or code.co_name != name or os.path.realpath(code.co_filename) != wanted:
            return False
        return line is None or any(at == line for *_, at in code.co_lines())

    replaced = False
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not path or os.path.realpath(path) != wanted:
            continue
        for attr, value in list(vars(module).items()):
            if inspect.isfunction(value) and matches(value):
                setattr(module, attr, disable(value))
                replaced = True
            elif inspect.isclass(value) and getattr(value, "__module__", None) == module.__name__:
                for method_name, method in list(vars(value).items()):
                    if inspect.isfunction(method) and matches(method):
                        setattr(value, method_name, disable(method))
                        replaced = True
    return replaced


# -- outputs -------------------------------------------------------------------------------


def describe_outputs(output: Any) -> list[OutputLeaf]:
    """The outputs of one compiled call: per tensor its dtype, shape, a hash and its values (all of
    them up to VALUES_CAP, else an even sample); numbers and strings as they are."""
    import torch
    from torch.utils._pytree import tree_leaves

    leaves: list[OutputLeaf] = []
    for leaf in tree_leaves(output)[:LEAVES_CAP]:
        if isinstance(leaf, torch.Tensor):
            leaves.append(_describe_tensor(leaf))
        elif isinstance(leaf, (bool, int, float)):
            leaves.append(OutputLeaf("number", None if isinstance(leaf, float) and math.isnan(leaf) else leaf))
        elif isinstance(leaf, str) or leaf is None:
            leaves.append(OutputLeaf(type(leaf).__name__, leaf if leaf is None else leaf[:200]))
        else:
            leaves.append(OutputLeaf(type(leaf).__name__, None))
    return leaves


def _describe_tensor(t: Any) -> OutputLeaf:
    import torch

    dtype, shape = str(t.dtype).removeprefix("torch."), tuple(int(n) for n in t.shape)
    try:
        flat = t.detach().cpu().reshape(-1)
        if flat.is_complex():
            flat = torch.view_as_real(flat).reshape(-1)
        digest = _hash(flat)
        n = flat.numel()
        sample = flat if n <= VALUES_CAP else flat[:: max(1, n // VALUES_CAP)][:VALUES_CAP]
        values = sample.double().tolist() if (sample.is_floating_point() or sample.dtype == torch.bool) else sample.tolist()
        return OutputLeaf("tensor", None, dtype, shape, digest,
                          tuple(None if isinstance(v, float) and math.isnan(v) else v for v in values), n <= VALUES_CAP)
    except Exception as e:  # a tensor subclass or a device that cannot be read back: shape and dtype only
        return OutputLeaf("tensor", None, dtype, shape, unreadable=type(e).__name__)


def _hash(flat: Any) -> str | None:
    try:
        data = flat.contiguous().numpy().tobytes()
    except Exception:  # no numpy, or a dtype numpy lacks (bfloat16)
        try:
            data = flat.contiguous().view(-1).float().numpy().tobytes()
        except Exception:
            return None
    return hashlib.blake2b(data, digest_size=16).hexdigest()
