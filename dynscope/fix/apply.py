"""Inside a trial run: apply remedies before the user's code runs, record each compiled region's outputs.

The parent (dynscope/fix/trials.py) names this module as a child extension in the run's
ChildSpec, with the remedies (dynscope/fix/trial_payload.py) as its payload: each action comes
from the remedy table (analysis/remedies.py). The recording child calls :func:`start_in_child`
once recording has started. Nothing here edits a file: configs are set, ``torch.compile`` is wrapped (to pass
extra arguments, mark input dimensions dynamic, and record outputs), and a function to disable
is replaced in its module or class by ``torch.compiler.disable(fn)``.
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
import sys
from collections.abc import Callable
from typing import Any

from dynscope import events as contract
from dynscope.fix.trial_payload import TrialRemedies
from dynscope.runner.extensions import ChildHooks

VALUES_CAP = 4096  # values recorded per output tensor; larger ones keep an even sample and a hash
LEAVES_CAP = 64  # outputs recorded per call
CALLS_CAP = 100  # calls recorded per compiled region


def start_in_child(recorder, payload: str) -> ChildHooks:
    """The trial child's extension (named in its ChildSpec by dynscope/fix/trials.py): apply the
    run's remedies once recording has started."""
    Trial(recorder, list(TrialRemedies.from_payload(payload).actions)).install()
    return ChildHooks()


class Trial:
    def __init__(self, recorder, actions: list[dict[str, Any]]) -> None:
        self.recorder = recorder
        self.actions = actions
        self.pending = set(range(len(actions)))  # actions not yet applied
        self.compile_kwargs: dict[str, Any] = {}
        self.regions = 0

    def install(self) -> None:
        import torch

        from dynscope.probes import compat

        contract.write(self.recorder, contract.FixFeatures(), json.dumps(compat.remedy_features(), default=str))
        for i, action in enumerate(self.actions):
            op = action.get("op")
            if op == "compile_kwargs":
                self.compile_kwargs.update(action.get("kwargs") or {})
                self._applied(i, "torch.compile arguments")
            elif op == "logging_function":
                self._add_logging_function(i, action)
        self._apply_configs()
        original = torch.compile
        trial = self

        @functools.wraps(original)
        def compile(model=None, **kwargs):
            if model is None:  # @torch.compile(...) used as a decorator factory
                return lambda m: compile(m, **kwargs)
            trial._apply_configs()
            trial._apply_disables()
            compiled = original(model, **{**kwargs, **trial.compile_kwargs})
            return trial.watch(model, compiled)

        torch.compile = compile

    # -- remedies ------------------------------------------------------------------------

    def _applied(self, i: int, how: str) -> None:
        self.pending.discard(i)
        contract.write(self.recorder, contract.FixApplied(index=i, op=self.actions[i].get("op"), ok=True, how=how))

    def not_applied_notes(self) -> list[str]:
        return [f"{self.actions[i].get('op')} not applied" for i in sorted(self.pending)]

    def _apply_configs(self) -> None:
        for i in sorted(self.pending):
            action = self.actions[i]
            if action.get("op") != "config":
                continue
            module_name, _, attr = str(action["target"]).rpartition(".")
            owner = _resolve(module_name)
            if owner is None or not hasattr(owner, attr):
                continue  # a user module not importable yet: tried again at the next torch.compile
            setattr(owner, attr, action.get("value"))
            self._applied(i, f"{action['target']} = {action.get('value')!r}")

    def _add_logging_function(self, i: int, action: dict[str, Any]) -> None:
        from dynscope.probes import compat

        functions = compat.reorderable_logging_functions()
        name = str(action.get("function"))
        fn = getattr(builtins, name, None) if "." not in name else _resolve(name)
        if functions is not None and callable(fn):
            functions.add(fn)
            self._applied(i, f"reorderable_logging_functions.add({name})")

    def _apply_disables(self) -> None:
        for i in sorted(self.pending):
            action = self.actions[i]
            if action.get("op") == "disable" and _disable_function(action):
                self._applied(i, f"torch.compiler.disable({action['function']})")

    def _mark_dynamic(self, target: Callable[..., Any] | None, args: tuple, kwargs: dict) -> None:
        from dynscope.probes import compat

        code = getattr(target, "__code__", None)
        if code is None:
            return
        for i, action in enumerate(self.actions):
            if action.get("op") != "mark_dynamic" or action.get("function") != code.co_name:
                continue
            if action.get("file") and os.path.realpath(action["file"]) != os.path.realpath(code.co_filename):
                continue
            try:
                bound = inspect.signature(target).bind_partial(*args, **kwargs)
            except (TypeError, ValueError):
                continue
            value = bound.arguments.get(action.get("arg"))
            mark = compat.mark_dynamic_function(bool(action.get("maybe")))
            dim = int(action.get("dim", 0))
            if mark is not None and hasattr(value, "dim") and value.dim() > dim:
                mark(value, dim)
                if i in self.pending:
                    self._applied(i, f"mark_dynamic({action.get('arg')}, {dim})")

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
            contract.write(self.recorder, contract.FixRegion(function=code.co_name, file=code.co_filename))
        calls = [0]

        def before(args: tuple, kwargs: dict) -> None:
            if compat.is_compiling():
                return
            self._apply_disables()
            self._mark_dynamic(target, args, kwargs)

        def after(output: Any) -> None:
            if compat.is_compiling() or calls[0] >= CALLS_CAP:
                return
            calls[0] += 1
            try:
                leaves = describe_outputs(output)
            except Exception as e:  # never let recording break the program
                leaves = [{"kind": "unrecorded", "value": type(e).__name__}]
            contract.write(self.recorder, contract.FixOutput(region=name, call=calls[0]), json.dumps(leaves))

        if isinstance(compiled, torch.nn.Module):
            compiled.register_forward_pre_hook(lambda _m, args, kwargs: before(args, kwargs), with_kwargs=True)
            compiled.register_forward_hook(lambda _m, _args, output: after(output))
            return compiled
        if not callable(compiled):
            return compiled

        @functools.wraps(compiled)
        def call(*args, **kwargs):
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


def _disable_function(action: dict[str, Any]) -> bool:
    """Replace the function that holds the break (module-level function or method of a class of
    that file) by torch.compiler.disable(fn). True once replaced."""
    from dynscope.probes import compat

    disable = compat.compiler_disable()
    wanted = os.path.realpath(str(action.get("file")))
    name, line = action.get("function"), action.get("line")
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


def describe_outputs(output: Any) -> list[dict[str, Any]]:
    """The outputs of one compiled call as JSON: per tensor its dtype, shape, a hash and its values
    (all of them up to VALUES_CAP, else an even sample); numbers and strings as they are."""
    import torch
    from torch.utils._pytree import tree_leaves

    leaves = []
    for leaf in tree_leaves(output)[:LEAVES_CAP]:
        if isinstance(leaf, torch.Tensor):
            leaves.append(_describe_tensor(leaf))
        elif isinstance(leaf, (bool, int, float)):
            leaves.append({"kind": "number", "value": None if isinstance(leaf, float) and math.isnan(leaf) else leaf})
        elif isinstance(leaf, str) or leaf is None:
            leaves.append({"kind": type(leaf).__name__, "value": leaf if leaf is None else leaf[:200]})
        else:
            leaves.append({"kind": type(leaf).__name__, "value": None})
    return leaves


def _describe_tensor(t: Any) -> dict[str, Any]:
    import torch

    record: dict[str, Any] = {"kind": "tensor", "dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape)}
    try:
        flat = t.detach().cpu().reshape(-1)
        if flat.is_complex():
            flat = torch.view_as_real(flat).reshape(-1)
        record["hash"] = _hash(flat)
        n = flat.numel()
        sample = flat if n <= VALUES_CAP else flat[:: max(1, n // VALUES_CAP)][:VALUES_CAP]
        values = sample.double().tolist() if (sample.is_floating_point() or sample.dtype == torch.bool) else sample.tolist()
        record["values"] = [None if isinstance(v, float) and math.isnan(v) else v for v in values]
        record["complete"] = n <= VALUES_CAP
    except Exception as e:  # a tensor subclass or a device that cannot be read back: shape and dtype only
        record["values"] = []
        record["unreadable"] = type(e).__name__
    return record


def _hash(flat: Any) -> str | None:
    try:
        data = flat.contiguous().numpy().tobytes()
    except Exception:  # no numpy, or a dtype numpy lacks (bfloat16)
        try:
            data = flat.contiguous().view(-1).float().numpy().tobytes()
        except Exception:
            return None
    return hashlib.blake2b(data, digest_size=16).hexdigest()
