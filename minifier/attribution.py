"""Which layer of torch.compile raised an exception, read from its traceback.

Replaying a graph through torch's backends (minifier/bisect.py) is the main way to find the
failing stage. It needs a backend that a fresh process can run: when the failure comes from
a backend or decomposition defined in the user's program, or from state only that program
sets up, replay cannot see it. The traceback of the original exception still says where it
happened: the innermost frame of a stage-defining torch module names the layer, a few
well-known frames name the op being lowered or decomposed, and the innermost frame of the
user's own code says which of their functions was involved.
"""

from __future__ import annotations

import os
import sys
import traceback
from dataclasses import asdict, dataclass
from typing import Any

# (path fragment, layer, part), most specific first. Paths use "/".
_RULES = (
    ("torch/_inductor/codegen/", "inductor", "code generation"),
    ("torch/_inductor/codecache.py", "inductor", "compiling the generated code"),
    ("torch/_inductor/cpp_builder.py", "inductor", "compiling the generated code"),
    ("torch/_inductor/async_compile.py", "inductor", "compiling the generated code"),
    ("torch/_inductor/runtime/", "inductor", "running the generated code"),
    ("torch/_inductor/scheduler.py", "inductor", "scheduling and fusion"),
    ("torch/_inductor/lowering.py", "inductor", "lowering"),
    ("torch/_inductor/graph.py", "inductor", "lowering"),
    ("torch/_inductor/ir.py", "inductor", "lowering"),
    ("torch/_inductor/fx_passes/", "inductor", "FX graph passes"),
    ("torch/_inductor/decomposition.py", "aot_autograd", "decompositions"),
    ("torch/_inductor/", "inductor", None),
    ("torch/_functorch/partitioners.py", "aot_autograd", "partitioner"),
    ("torch/_decomp/", "aot_autograd", "decompositions"),
    ("torch/_functorch/", "aot_autograd", None),
    ("torch/fx/experimental/proxy_tensor.py", "aot_autograd", "tracing"),
    ("torch/_dynamo/backends/", "backend", None),
    ("torch/_dynamo/", "dynamo", None),
)
# Frames that only pass the exception along (fake tensors, op dispatch, generic helpers):
# they run in every layer, so they say nothing about which one failed.
_NEUTRAL = ("torch/_subclasses/", "torch/_prims_common/", "torch/_ops.py", "torch/utils/", "torch/_tensor.py",
            "torch/_refs/", "torch/_prims/", "torch/overrides.py", "torch/_compile.py", "torch/_library/",
            "torch/_meta_registrations.py", "torch/_higher_order_ops/", "torch/_logging/", "torch/_guards.py",
            "torch/fx/graph_module.py", "torch/fx/interpreter.py", "torch/nn/", "torch/_dynamo/eval_frame.py",
            "torch/fx/experimental/symbolic_shapes.py", "torch/autograd/")
# Frames whose locals name the op being worked on: (path fragment, function, local).
_OP_LOCALS = (
    ("torch/fx/experimental/proxy_tensor.py", "maybe_handle_decomp", "op"),
    ("torch/_inductor/graph.py", "run_node", "n"),
    ("torch/_inductor/graph.py", "call_function", "target"),
)
_DECOMPOSITION_CALLERS = ("maybe_handle_decomp", "decompose")


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str
    op: str | None = None  # the op a well-known frame was working on


@dataclass(frozen=True)
class Attribution:
    layer: str  # dynamo | aot_autograd | inductor | backend | user
    part: str | None  # "lowering", "decompositions", ...
    op: str | None
    user_frame: str | None  # "file:line in function" of the user's innermost frame involved

    def describe(self) -> str:
        text = LAYER_TEXT.get(self.layer, self.layer)
        if self.part:
            text += f" ({self.part})"
        if self.op:
            text += f", op {self.op}"
        if self.user_frame:
            text += f"; in your code: {self.user_frame}"
        return text

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Attribution | None:
        if not data:
            return None
        return cls(layer=str(data.get("layer") or ""), part=data.get("part"), op=data.get("op"), user_frame=data.get("user_frame"))


LAYER_TEXT = {
    "dynamo": "Dynamo (graph capture)",
    "aot_autograd": "AOTAutograd",
    "inductor": "Inductor",
    "backend": "the backend",
    "user": "your backend code",
}


def frames_of(exc: BaseException) -> list[Frame]:
    """The frames an exception went through, outermost first, following torch's wrapping
    (BackendCompilerFailed / InductorError keep the original as ``inner_exception``)."""
    frames: list[Frame] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        for frame, line in traceback.walk_tb(current.__traceback__):
            if id(frame) in seen:
                continue
            seen.add(id(frame))
            path = frame.f_code.co_filename.replace(os.sep, "/")
            frames.append(Frame(frame.f_code.co_filename, line, frame.f_code.co_name, _op_in(frame, path)))
        # Follow what torch wrapped, not __context__ (an unrelated exception being handled).
        inner = getattr(current, "inner_exception", None) or current.__cause__
        current = inner if isinstance(inner, BaseException) else None
    return frames


def _op_in(frame: Any, path: str) -> str | None:
    for fragment, function, local in _OP_LOCALS:
        if fragment in path and frame.f_code.co_name == function:
            value = frame.f_locals.get(local)
            target = getattr(value, "target", value)
            return None if target is None or isinstance(target, str) and local == "n" else str(target)
    return None


def attribute(frames: list[Frame]) -> Attribution | None:
    """The layer that failed: the innermost frame of a stage-defining torch module."""
    layer = part = None
    decisive = -1
    for index in range(len(frames) - 1, -1, -1):
        path = frames[index].file.replace(os.sep, "/")
        if _is_torch(path) and not any(n in path for n in _NEUTRAL):
            rule = next((r for r in _RULES if r[0] in path), None)
            if rule is not None:
                _, layer, part = rule
                decisive = index
                break
    ops = [f.op for f in frames if f.op]
    user = _innermost_user_frame(frames)
    if layer is None:
        return Attribution("user", None, ops[-1] if ops else None, _where(user)) if user is not None else None
    if layer == "aot_autograd" and any(f.function in _DECOMPOSITION_CALLERS and "proxy_tensor" in f.file for f in frames):
        part = "decompositions"
    elif layer == "backend" and user is not None and frames.index(user) > decisive:
        layer = "user"
    # A user frame only matters when it runs inside torch.compile's machinery.
    inner_user = user if user is not None and frames.index(user) > _first_compile_frame(frames) else None
    return Attribution(layer, part, ops[-1] if ops else None, _where(inner_user))


def _first_compile_frame(frames: list[Frame]) -> int:
    for index, frame in enumerate(frames):
        if "torch/_dynamo/" in frame.file.replace(os.sep, "/"):
            return index
    return len(frames)


def _innermost_user_frame(frames: list[Frame]) -> Frame | None:
    for frame in reversed(frames):
        if _is_user(frame.file):
            return frame
    return None


def _is_torch(path: str) -> bool:
    return "/torch/" in path and ("site-packages" in path or "dist-packages" in path or _TORCH_DIR in path)


def _is_user(path: str) -> bool:
    norm = path.replace(os.sep, "/")
    if norm.startswith("<") or "/torch/" in norm and _is_torch(norm) or "torchinductor" in norm:
        return False  # torch itself, or code Inductor generated
    if any(norm.startswith(p) for p in _STDLIB_DIRS) or "site-packages" in norm or "dist-packages" in norm:
        return False
    return not norm.startswith(_DYNSCOPE_DIRS)


def _where(frame: Frame | None) -> str | None:
    return f"{frame.file}:{frame.line} in {frame.function}" if frame is not None else None


def _torch_dir() -> str:
    module = sys.modules.get("torch")
    path = getattr(module, "__file__", None)
    return os.path.dirname(path).replace(os.sep, "/") if path else "/torch/"


_TORCH_DIR = _torch_dir()
_DYNSCOPE_DIRS = tuple(os.path.dirname(os.path.abspath(p)).replace(os.sep, "/") + "/"
                       for p in (__file__, sys.modules["dynscope"].__file__) if p is not None)
_STDLIB_DIRS = tuple({os.path.dirname(os.__file__).replace(os.sep, "/")})
