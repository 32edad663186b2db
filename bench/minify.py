"""dynscope minify against torch's own tools, on the same injected bugs, in one run.

For each of torch's CPU fault injections in Inductor's relu lowering
(torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = compile_error, runtime_error,
accuracy) in tests/programs/minify_model.py (82 compute nodes), three tools find the
culprit:

* dynscope minify (one detection run, one reused check worker, a verified repro.py);
* torch's minifier, TORCHDYNAMO_REPRO_AFTER=aot, isolated (its default): the program run
  that dumps minifier_launcher.py, then the launcher (level 2 for compile errors, 3 for the
  runtime error, which aborts the process, 4 for accuracy);
* torch's CompilerBisector, ``python -m torch._inductor.compiler_bisector run`` on the
  program (the culprit backend, subsystem and op; no repro).

Printed per bug and tool: wall time of the whole process(es), number of checks (graph
compiles judged), culprit found, and repro size (compute nodes in the repro's forward).
Each tool runs in its own fresh temporary directory with its own empty Inductor cache
(TORCHINDUCTOR_CACHE_DIR), so no tool profits from what another, or an earlier run, compiled.

    python bench/minify.py [--bugs compile_error,runtime_error,accuracy] [--tools dynscope,torch,bisector]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODEL = REPO / "tests" / "programs" / "minify_model.py"
BUGS = ("compile_error", "runtime_error", "accuracy")
TOOLS = ("dynscope", "torch", "bisector")
TORCH_LEVEL = {"compile_error": "2", "runtime_error": "3", "accuracy": "4"}
TIMEOUT_S = 1800


@dataclass
class Row:
    bug: str
    tool: str
    seconds: float
    checks: int | None
    culprit: str
    repro_nodes: int | None
    note: str = ""


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, float]:
    started = time.perf_counter()
    caches = {"TORCHINDUCTOR_CACHE_DIR": str(_scratch(cwd) / "inductor-cache"),
              "TRITON_CACHE_DIR": str(_scratch(cwd) / "triton-cache")}
    proc = subprocess.run(cmd, cwd=cwd, env={**os.environ, **caches, **(env or {})}, capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    return proc, time.perf_counter() - started


_SCRATCH: list[Path] = []


def _scratch(cwd: Path) -> Path:
    """The temporary directory of the tool being measured (set by main for each run)."""
    return _SCRATCH[-1] if _SCRATCH else cwd


def repro_nodes(path: Path) -> int | None:
    """Compute statements in the forward of the repro's Repro module (torch's and ours)."""
    if not path.exists():
        return None
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "Repro":
            forward = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
            if forward is not None:
                operations = (ast.Call, ast.BinOp, ast.Subscript, ast.UnaryOp)
                return sum(1 for s in forward.body if isinstance(s, ast.Assign) and isinstance(s.value, operations))
    return None


def bench_dynscope(bug: str, tmp: Path) -> Row:
    accuracy = ["--accuracy"] if bug == "accuracy" else []
    proc, seconds = run([sys.executable, "-m", "dynscope", "minify", *accuracy, "--out", "out", str(MODEL), "--bug", bug], tmp)
    result_path = tmp / "out" / "result.json"
    if not result_path.exists():
        return Row(bug, "dynscope minify", seconds, None, "failed: " + proc.stderr.strip().splitlines()[-1], None)
    result = json.loads(result_path.read_text())
    culprit = f"{result['culprit_backend']} / {result['subsystem']} / {result['op']}"
    note = "verified in a fresh process" if result["verified"] else "NOT verified"
    return Row(bug, "dynscope minify", seconds, result["checks_run"], culprit, repro_nodes(tmp / "out" / "repro.py"), note)


def bench_torch_minifier(bug: str, tmp: Path) -> Row:
    env = {"TORCHDYNAMO_REPRO_AFTER": "aot", "TORCHDYNAMO_REPRO_LEVEL": TORCH_LEVEL[bug]}
    check = ["--check"] if bug == "accuracy" else []
    dump, dump_s = run([sys.executable, str(MODEL), "--bug", bug, *check], tmp, env)
    launchers = sorted(tmp.glob("torch_compile_debug/*/minifier/minifier_launcher.py"), key=os.path.getmtime)
    if not launchers:
        return Row(bug, "torch minifier (aot, isolated)", dump_s, None, "no minifier_launcher.py written", None)
    launcher = launchers[-1]
    minify, minify_s = run([sys.executable, str(launcher)], launcher.parent)
    queries = re.findall(r"Made (\d+) queries", minify.stderr)
    repros = sorted(tmp.rglob("repro.py"), key=os.path.getmtime)
    nodes = repro_nodes(repros[-1]) if repros else None
    ops = re.findall(r"torch\.ops\.aten\.(\w+)", repros[-1].read_text()) if repros else []
    culprit = f"(repro ops: {', '.join(dict.fromkeys(ops)) or '?'})"
    note = f"dump {dump_s:.1f} s + minify {minify_s:.1f} s"
    if minify.returncode != 0 and not queries:
        note += f"; launcher failed: {(minify.stderr.strip().splitlines() or ['?'])[-1][:80]}"
    return Row(bug, "torch minifier (aot, isolated)", dump_s + minify_s, int(queries[-1]) if queries else None,
               culprit, nodes, note)


def bench_bisector(bug: str, tmp: Path) -> Row:
    counter = tmp / "runs.txt"
    # The bisector judges by exit status; count its runs with a one-line wrapper.
    wrapper = tmp / "counted.py"
    wrapper.write_text(
        "import runpy, sys\n"
        f"open({str(counter)!r}, 'a').write('x')\n"
        f"sys.argv = [{str(MODEL)!r}, *sys.argv[1:]]\n"
        f"runpy.run_path({str(MODEL)!r}, run_name='__main__')\n")
    check = ["--check"] if bug == "accuracy" else []
    proc, seconds = run([sys.executable, "-m", "torch._inductor.compiler_bisector", "run", sys.executable,
                         str(wrapper), "--bug", bug, *check], tmp)
    found = re.search(r"Bisection complete: (.*)", proc.stdout)
    culprit = found.group(1) if found else "no result"
    match = re.search(r"BisectionResult\(backend='(\w+)', subsystem='?(\w+)'?, bisect_number=\w+, debug_info='?([^')]*)", culprit)
    if match:
        culprit = f"{match.group(1)} / {match.group(2)} / {match.group(3)}"
    runs = len(counter.read_text()) if counter.exists() else None
    return Row(bug, "torch CompilerBisector", seconds, runs, culprit, None, "no repro (bisection only)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bugs", default=",".join(BUGS))
    parser.add_argument("--tools", default=",".join(TOOLS))
    args = parser.parse_args()
    benches = {"dynscope": bench_dynscope, "torch": bench_torch_minifier, "bisector": bench_bisector}
    rows: list[Row] = []
    for bug in args.bugs.split(","):
        for tool in args.tools.split(","):
            with tempfile.TemporaryDirectory() as tmp:
                _SCRATCH.append(Path(tmp))
                row = benches[tool](bug, Path(tmp))
            rows.append(row)
            print(f"{row.bug:14s} {row.tool:32s} {row.seconds:7.1f} s  checks={row.checks}  "
                  f"repro_nodes={row.repro_nodes}  {row.culprit}  {row.note}", file=sys.stderr, flush=True)
    print()
    print("| bug | tool | wall time | checks | repro compute nodes | culprit | note |")
    print("|---|---|---:|---:|---:|---|---|")
    for r in rows:
        print(f"| {r.bug} | {r.tool} | {r.seconds:.1f} s | {r.checks if r.checks is not None else '-'} | "
              f"{r.repro_nodes if r.repro_nodes is not None else '-'} | {r.culprit} | {r.note} |")
    for bug in args.bugs.split(","):
        ours = next((r for r in rows if r.bug == bug and r.tool == "dynscope minify"), None)
        theirs = next((r for r in rows if r.bug == bug and r.tool.startswith("torch minifier")), None)
        if ours and theirs and theirs.seconds:
            print(f"{bug}: dynscope takes {ours.seconds / theirs.seconds:.2f}x the wall time of torch's isolated minifier")


if __name__ == "__main__":
    main()
