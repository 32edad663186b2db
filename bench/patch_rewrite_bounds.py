"""What fix's rewrite step and --patch reading cost on the attacker's inputs of issue 39 (N5, N6, N9).

Each case runs in a fresh process and prints its seconds and the peak RSS of that process and of its
children (the rewrite worker), so that a checkout before the bounds can be measured the same way:

    python bench/patch_rewrite_bounds.py              # this checkout
    mkdir /tmp/before && git archive a32d42e | tar -x -C /tmp/before
    cd /tmp/before && python /path/to/bench/patch_rewrite_bounds.py --before   # dynscope from the cwd

With ``--before`` the rewrites are made as fix made them then (``rewrites_for`` in fix's own process;
a file over 16 MiB was the only limit) and cases that would hang (a FIFO, /dev/zero) are left out.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

_CASE = r"""
import json, os, resource, sys, time
case, path, before = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
started = time.time()
if case.startswith("rewrite"):
    from dynscope.rewrites import BreakSite
    site = BreakSite(2, "Data-dependent branching", "attempted to jump with TensorVariable()")
    source = open(path, encoding="utf-8").read()
    try:
        if before:
            from dynscope.rewrites.catalogue import rewrites_for
            answer = [r.rule for r in rewrites_for(source, site)]
        else:
            from dynscope.rewrites.bounded import RewriteBudget, bounded_rewrites
            said = []
            answer = [r.rule for r in bounded_rewrites(source, site, "attack.py", RewriteBudget(None, said.append))] + said
    except BaseException as e:
        answer = f"{type(e).__name__} ({len(str(e))} characters)"
else:
    from dynscope.fix import unified_diff
    try:
        text, name = unified_diff.read_patch(os.path.join(path, "the.patch"))
        unified_diff.apply(unified_diff.parse(text, name), path)
        answer = "applied"
    except unified_diff.PatchError as e:
        answer = str(e)[-120:]
usage = resource.getrusage
print(json.dumps({"answer": answer, "seconds": round(time.time() - started, 1),
                  "rss_mib": usage(resource.RUSAGE_SELF).ru_maxrss // 1024,
                  "worker_rss_mib": usage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024}))
"""

SMALL = "def f(x):\n    if x.sum() > 0:\n        return x + 1\n    return x - 1\n"


def dense(size: int) -> str:
    parts, i = [SMALL], 0
    while sum(map(len, parts)) < size:
        parts.append("".join(f"def g{j}(x):\n    y = x + {j}\n    return y * 2\n\n" for j in range(i, i + 1000)))
        i += 1000
    text = "".join(parts)
    return text[:text.rindex("\ndef ", 0, size) + 1]  # whole functions, at most ``size`` characters


def elif_chain(branches: int) -> str:
    arms = "".join(f"    elif x == {i}:\n        return {i}\n" for i in range(1, branches))
    return f"def f(x):\n    if x.sum() > 0:\n        return 0\n{arms}    return -1\n"


def hunks(directory: str, count: int, lines: int) -> None:
    """``count`` hunks over a ``lines``-line file, every header naming line 1 (each found by search)."""
    with open(os.path.join(directory, "m.py"), "w") as f:
        f.write("".join(f"x{i} = {i}\n" for i in range(lines)))
    step = lines // count
    with open(os.path.join(directory, "the.patch"), "w") as f:
        f.write("--- a/m.py\n+++ b/m.py\n" + "".join(
            f"@@ -1,1 +1,1 @@\n-x{h * step} = {h * step}\n+x{h * step} = -1\n" for h in range(count)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", action="store_true", help="measure a checkout from before the bounds")
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        cases: list[tuple[str, str]] = []
        for name, text in (("rewrite: 2.5 MB of dense code", dense(2_500_000)),
                           ("rewrite: 1 MiB of dense code", dense((1 << 20) - 2000)),
                           ("rewrite: 600-branch elif chain", elif_chain(600))):
            path = os.path.join(scratch, f"{len(cases)}.py")
            with open(path, "w") as f:
                f.write(text)
            cases.append((name, path))
        tree = os.path.join(scratch, "tree")
        os.mkdir(tree)
        hunks(tree, 5000, 200_000)
        cases.append(("patch: 5,000 hunks on a 200,000-line file", tree))
        for name, path in cases:
            try:
                done = subprocess.run([sys.executable, "-c", _CASE, name, path, "1" if args.before else "0"],
                                      capture_output=True, text=True, timeout=args.timeout)
                result = json.loads(done.stdout) if done.returncode == 0 else {"failed": done.stderr[-300:]}
            except subprocess.TimeoutExpired:
                result = {"answer": f"still running after {args.timeout:g} s"}
            print(f"{name}: {json.dumps(result)}", flush=True)


if __name__ == "__main__":
    main()
