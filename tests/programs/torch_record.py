"""Run an example under dynscope.capture() and dump torch's own record of the same run.

    python torch_record.py [--keep-caches] CAPTURE OUT_JSON SCRIPT [ARGS...]

OUT_JSON gets torch's counters, graph_break_reasons and guard_failures, which the
fidelity tests compare with what the capture says. With --keep-caches the compile caches stay
on (as ``dynscope explain`` has them by default): run twice on one cache directory, the second
run is a warm one.
"""

import json
import runpy
import sys

import torch

import dynscope

keep_caches = sys.argv[1] == "--keep-caches"
capture_path, out_path, script, *args = sys.argv[1 + keep_caches:]
sys.argv = [script, *args]
with dynscope.capture(capture_path, keep_caches=keep_caches):
    runpy.run_path(script, run_name="__main__")

from torch._dynamo.utils import counters  # noqa: E402

record = {
    "counters": {category: {str(k): v for k, v in counter.items()} for category, counter in counters.items()},
    "graph_break_reasons": [
        {
            "reason": r.reason,
            "graph_break": r.graph_break,
            "file": r.user_stack[-1].filename if r.user_stack else None,
            "line": r.user_stack[-1].lineno if r.user_stack else None,
        }
        for r in torch._dynamo.graph_break_reasons
    ],
    "guard_failures": [
        {"function": code.co_name, "reasons": list(reasons)} for code, reasons in torch._dynamo.guard_failures.items()
    ],
}
with open(out_path, "w") as f:
    json.dump(record, f)
