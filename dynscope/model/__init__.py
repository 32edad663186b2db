"""The typed model of a capture. Reading a capture never imports torch."""

from dynscope.model.capture import Capture, FixResult, MinifyResult
from dynscope.model.fxgraph import FxGraph, FxNode
from dynscope.model.records import (
    Compile,
    CompileError,
    CompileTimes,
    Frame,
    GraphBreak,
    Guard,
    GuardFailure,
    Kernel,
    ProgramException,
    Recompile,
    RecompileLimitHit,
    Run,
    SkippedFrame,
    StackFrame,
    Stage,
)
from dynscope.model.stages import CANONICAL_STAGES

__all__ = [
    "CANONICAL_STAGES", "Capture", "Compile", "CompileError", "CompileTimes", "FixResult", "Frame", "FxGraph", "FxNode",
    "GraphBreak", "Guard", "GuardFailure", "Kernel", "MinifyResult", "ProgramException", "Recompile", "Run", "StackFrame", "Stage",
    "RecompileLimitHit", "SkippedFrame",
]
