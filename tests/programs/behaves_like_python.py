"""Prints what a program can observe about how it was started, then exits as asked."""

import os
import sys

import torch

line = sys.stdin.readline().strip()
print(f"name={__name__}")
print(f"argv={sys.argv}")
print(f"path0={sys.path[0]}")
print(f"cwd={os.getcwd()}")
print(f"stdin={line}")
print(f"result={torch.compile(lambda x: x * 2, backend='eager')(torch.ones(2)).tolist()}")
sys.stdout.flush()
if "--exit" in sys.argv:
    sys.exit(int(sys.argv[sys.argv.index("--exit") + 1]))
if "--raise" in sys.argv:
    raise ValueError("the program failed on purpose")
if "--os-exit" in sys.argv:
    os._exit(int(sys.argv[sys.argv.index("--os-exit") + 1]))
