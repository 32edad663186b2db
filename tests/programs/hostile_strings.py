"""A program whose strings try to break out of HTML and Markdown; reports must show them as text.

The test runs it from a directory whose name is hostile too (markup, quotes, a non-UTF-8 byte).
"""

import torch

HOSTILE = "</textarea><script>window.__pwned=1</script><img src=x onerror=\"window.__pwned=1\"> 'q' `tick` | pipe"


def step(x):
    y = x.relu() + 1  # </textarea><script>window.__pwned=1</script>
    torch._dynamo.graph_break(msg=HOSTILE)
    return y * 2


print(torch.compile(step, backend="inductor")(torch.ones(8)).sum().item())
