"""What each failed compile was: an error the program saw, a frame Dynamo skipped (ran in eager),
or the recompile limit; and the records of each kind."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from dynscope.model.break_text import first_line
from dynscope.model.recompile_text import is_recompile_limit, recompile_limit
from dynscope.model.records import Compile, CompileError, ProgramException, RecompileLimitHit, SkippedFrame

FailureKind = Literal["error", "skipped", "limit"]

# Failures Dynamo answers by running the frame in eager without telling the program
# (convert_frame's "soft" failures); any other failure is an error.
SOFT_FAILURES = ("Unsupported", "UserError")


class FailedCompiles:
    """The failed compiles of a run, each classified once the program's fatal compile is known."""

    def __init__(self, compiles: Iterable[Compile], exception: ProgramException | None) -> None:
        self.compiles = list(compiles)
        self.fatal_compile = _fatal_compile(self.compiles, exception)

    def kind(self, c: Compile) -> FailureKind | None:
        """"error" | "skipped" | "limit" for a failed compile, None for the others."""
        if c.status != "failed":
            return None
        if c.compile_id == self.fatal_compile or c.fail_type not in SOFT_FAILURES:
            return "error"
        return "limit" if is_recompile_limit(c.fail_reason) else "skipped"

    def errors(self) -> list[CompileError]:
        return [
            CompileError(c.compile_id, c.function, c.file, c.line, c.fail_type or "", c.fail_reason or "",
                         c.fail_file, c.fail_line)
            for c in self.compiles if self.kind(c) == "error"
        ]

    def skipped_frames(self) -> list[SkippedFrame]:
        return [
            SkippedFrame(c.compile_id, c.function, c.file, c.line, c.fail_type or "", c.fail_reason or "",
                         first_line(c.fail_reason) or c.fail_type or "", c.fail_file, c.fail_line)
            for c in self.compiles if self.kind(c) == "skipped"
        ]

    def recompile_limit_hits(self) -> list[RecompileLimitHit]:
        hits = []
        for c in self.compiles:
            kind = self.kind(c)
            if kind in ("limit", "error") and is_recompile_limit(c.fail_reason):
                name, limit = recompile_limit(c.fail_reason or "")
                hits.append(RecompileLimitHit(c.compile_id, c.function, c.file, c.line, limit, name, fatal=kind == "error"))
        return hits


def _fatal_compile(compiles: list[Compile], exception: ProgramException | None) -> str | None:
    """The failed compile whose exception ended the program, when one did: the last failed
    compile of the exception's type (torch raises it from inside the compiled call)."""
    if exception is None:
        return None
    failed = [c for c in compiles if c.status == "failed" and c.fail_type == exception.type]
    return failed[-1].compile_id if failed else None
