"""Compiles one graph fully, then hangs inside the backend while compiling a second one.

    python stuck_in_compile.py MARKER_FILE
The marker file appears once the second compile is under way, so a test can kill the
program at that moment.
"""

import sys
import time

import torch

marker = sys.argv[1]


def backend(gm, example_inputs):
    if len(list(gm.graph.nodes)) > 3:  # the second, bigger graph
        with open(marker, "w") as f:
            f.write("compiling")
        time.sleep(120)
    return gm.forward


torch.compile(lambda x: x + 1, backend=backend)(torch.ones(3))
print("first compile done", flush=True)
torch.compile(lambda x: (x * 2).sin().cos() + 1, backend=backend)(torch.ones(3))
