"""Prints, as JSON, what a program can observe about how it was started; python and
`dynscope explain` must give it the same view, field by field."""

import json
import os
import sys
import warnings

import torch

here = os.path.dirname(__file__)
os.chdir("/")  # a program that changes directory still finds the files next to itself
with open(os.path.join(here, "program_view.py")) as f:
    found_itself = f.readline().startswith('"""Prints')


def view(when: str) -> dict:
    return {
        f"{when}.__file__": __file__,
        f"{when}.__name__": __name__,
        f"{when}.__builtins__": type(__builtins__).__name__,
        f"{when}.__spec__": repr(__spec__),
        f"{when}.__loader__": type(__loader__).__name__,
        f"{when}.__package__": repr(__package__),
        f"{when}.code_filename": view.__code__.co_filename,
        f"{when}.argv": sys.argv,
        f"{when}.path0": sys.path[0],
        f"{when}.flags": list(sys.flags),
        f"{when}.environ": dict(os.environ),
        f"{when}.stdout_line_buffering": sys.stdout.line_buffering,
        f"{when}.stdout_buffer": type(sys.stdout.buffer).__name__,
        f"{when}.stdout_encoding": sys.stdout.encoding,
        f"{when}.stdin_isatty": sys.stdin.isatty(),
        f"{when}.main_module_is_globals": sys.modules["__main__"].__dict__ is globals(),
        f"{when}.warnings_filters": [str(f) for f in warnings.filters],
        f"{when}.found_itself": found_itself,
    }


before = view("before")
torch.compile(lambda x: x * 2, backend="eager")(torch.ones(2))
print(json.dumps({**before, **view("after")}, indent=1, sort_keys=True))
