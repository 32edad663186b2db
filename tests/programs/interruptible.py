"""Compiles, says it is ready, then waits to be interrupted and says how often it was."""

import time

import torch

torch.compile(lambda x: x + 1, backend="eager")(torch.ones(2))
try:
    print("ready", flush=True)  # inside the try: a SIGINT right after it is still caught here
    time.sleep(120)
except KeyboardInterrupt:
    print("KeyboardInterrupt 1", flush=True)
    try:
        time.sleep(3)  # a second delivery of the same SIGINT would land here
    except KeyboardInterrupt:
        print("KeyboardInterrupt 2", flush=True)
    raise
