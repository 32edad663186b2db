"""A fake-capture builder for the edge cases no recorded run shows (nothing here imports torch).

It writes through the real writer and the event contract (dynscope/events.py), with the same
event names and shapes a recorded run has, so the model reads it exactly as it reads a real
capture. Recorded captures (tests/data/captures/) cover what torch does; this covers what it
might: a run cut off mid-compile, a failed compile, output code with no kernels, a guard
failure in words dynscope has not seen.

    fake = FakeCapture(tmp_path / "run.dynscope")
    fake.compile("0/0", "forward", line=3)
    fake.recompile("0/1", "0/0: tensor 'x' size mismatch at index 0. expected 4, actual 6")
    path = fake.close()
"""

from __future__ import annotations

import json
from pathlib import Path

from dynscope import events
from dynscope.store.writer import CaptureWriter

PROGRAM = "/m/prog.py"


class FakeCapture:
    def __init__(self, path: Path, *, torch_version: str = "2.13.0", probes: dict[str, bool] | None = None) -> None:
        self.path = path
        self.writer = CaptureWriter(path)
        self.writer.set_meta(dynscope_version="0", torch_version=torch_version, python="3.11",
                             cwd=str(path.parent), command=["dynscope", "explain", "prog.py"], started=1.0,
                             probes=probes if probes is not None else {"graph_breaks": True})
        events.write(self.writer, events.RunStart(argv=("prog.py",)))
        self.writer.append("str", {"str": [PROGRAM, 0]})  # torch interns file names; 0 is the program

    def start(self, cid: str, *, line: int = 3, function: str = "forward", attempt: int = 0) -> FakeCapture:
        """Dynamo starts on a frame (and nothing more: a run cut off here leaves the compile incomplete)."""
        start = events.DynamoStart(stack=(events.TraceFrame(line, function, 0),))
        self.writer.append(start.KIND, start.to_metadata(), compile_id=cid, attempt=attempt)
        return self

    def graph(self, cid: str, code: str = "def forward(self, L_x_):\n    return (L_x_ + 1,)\n") -> FakeCapture:
        self.writer.append("dynamo_output_graph", {"dynamo_output_graph": {"sizes": {}}}, code, compile_id=cid,
                           attempt=0)
        return self

    def metrics(self, cid: str, function: str = "forward", *, line: int = 3, ops: int = 1,
                fail_type: str | None = None, fail_reason: str | None = None,
                restart_reasons: tuple[str, ...] = ()) -> FakeCapture:
        m = events.CompilationMetrics(co_name=function, co_filename=PROGRAM, co_firstlineno=line,
                                      has_guarded_code=fail_type is None, graph_op_count=ops,
                                      fail_type=fail_type, fail_reason=fail_reason,
                                      entire_frame_compile_time_s=0.1, restart_reasons=restart_reasons)
        self.writer.append(m.KIND, m.to_metadata(), compile_id=cid)
        return self

    def compile(self, cid: str, function: str = "forward", *, line: int = 3, **metrics) -> FakeCapture:
        """A whole compile: start, Dynamo's graph, torch's metrics."""
        return self.start(cid, line=line, function=function).graph(cid).metrics(cid, function, line=line, **metrics)

    def graph_break(self, cid: str, gb_type: str, *, line: int | None = 4, code: str | None = None) -> FakeCapture:
        stack = (events.BreakFrame(PROGRAM, line, "forward", code),) if line is not None else ()
        events.write(self.writer, events.GraphBreakSeen(gb_type=gb_type, message=gb_type, reason=gb_type,
                                                        user_stack=stack), compile_id=cid, attempt=0)
        return self

    def recompile(self, cid: str, *reasons: str) -> FakeCapture:
        """torch's recompile_reasons artifact for the new compile ``cid``: one text, or a JSON list."""
        payload = reasons[0] if len(reasons) == 1 else json.dumps(list(reasons))
        self.writer.append("artifact:recompile_reasons",
                           {"artifact": {"name": "recompile_reasons", "encoding": "json"}}, payload,
                           compile_id=cid, attempt=0)
        return self

    def output_code(self, cid: str, code: str) -> FakeCapture:
        self.writer.append("inductor_output_code", {"inductor_output_code": {"filename": "/tmp/x.py"}}, code,
                           compile_id=cid, attempt=0)
        return self

    def close(self, *, exit_code: int | None = 0) -> Path:
        """End the run (exit_code None: the program died without dynscope seeing it end)."""
        if exit_code is not None:
            events.write(self.writer, events.RunEnd(exit_code=exit_code, elapsed_s=1.0))
            self.writer.set_meta(finished=2.0, exit_code=exit_code)
        self.writer.close()
        return self.path
