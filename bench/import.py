"""`dynscope import` against tlparse on the same large TORCH_TRACE log: time and peak RSS.

The log is real: a TORCH_TRACE log of examples/graph_breaks.py compiled with inductor (made
once, cached), replicated under new frame ids until it reaches --target-mb. Each copy's text
payloads (graphs, output code) get a distinct last line, with torch's md5 (`has_payload`)
recomputed, so neither tool can skip work by de-duplicating identical payloads. Both tools
run on it side by side in this one run, each in its own process; peak RSS comes from wait4.

    python bench/import.py [--target-mb 300] [--source LOG] [--repeat 1]

tlparse is used when installed (`pip install tlparse`); otherwise only dynscope is timed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("DYNSCOPE_BENCH_CACHE", Path.home() / ".cache" / "dynscope-bench"))
_HEADER = re.compile(r"^([VIWEC]\d{4} [\d:.]+ +\d+ [^\]]*\] )(\{.*\})$")


def source_log() -> Path:
    """A real TORCH_TRACE log of an inductor run (made once: compiling takes ~30 s)."""
    path = CACHE / "torch_trace_graph_breaks_inductor.log"
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([sys.executable, str(REPO / "examples" / "graph_breaks.py"), "--backend", "inductor"],
                           env={**os.environ, "TORCH_TRACE": tmp}, check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            (log,) = Path(tmp).glob("dedicated_log_torch_trace_*.log")
            shutil.copy(log, path)
    return path


def read_events(path: Path) -> list[tuple[str, dict, list[str]]]:
    events: list[tuple[str, dict, list[str]]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("\t") and events:
            events[-1][2].append(line[1:])
            continue
        match = _HEADER.match(line)
        if match:
            events.append((match.group(1), json.loads(match.group(2)), []))
    return events


def make_large_log(source: Path, out: Path, target_mb: float) -> tuple[int, int]:
    """Replicate the source's events under new frame ids until the file reaches target_mb."""
    events = read_events(source)
    frames = 1 + max((md.get("frame_id") or 0) for _, md, _ in events)
    copies = 0
    with out.open("w", encoding="utf-8") as f:
        while f.tell() < target_mb * 1e6:
            for prefix, md, payload in events:
                md = dict(md)
                if md.get("frame_id") is not None:
                    md["frame_id"] += copies * frames
                for key in ("compilation_metrics", "bwd_compilation_metrics"):  # they name their compile again
                    metrics = md.get(key)
                    if isinstance(metrics, dict) and isinstance(metrics.get("compile_id"), str) and \
                            re.fullmatch(r"\d+/\d+", metrics["compile_id"]):
                        frame, compile_ = metrics["compile_id"].split("/")
                        md[key] = {**metrics, "compile_id": f"{int(frame) + copies * frames}/{compile_}"}
                if "has_payload" in md:
                    lines = list(payload)
                    # Make every copy's payload unique, keeping JSON payloads valid JSON.
                    if lines and lines[0] == "{" and len(lines) > 1 and lines[1] != "}":
                        lines[0] = f'{{"bench_copy": {copies},'
                    elif lines and lines[0] == "[" and len(lines) > 1 and lines[1] != "]":
                        lines[0] = f'["bench copy {copies}",'
                    elif lines and not lines[0].startswith(("{", "[")):
                        lines.append(f"# copy {copies}")
                    md["has_payload"] = hashlib.md5("\n".join(lines).encode()).hexdigest()
                    payload = lines
                f.write(prefix + json.dumps(md) + "".join(f"\n\t{p}" for p in payload) + "\n")
            copies += 1
    return copies, copies * len(events)


def timed(cmd: list[str]) -> tuple[float, float, int]:
    """(seconds, peak RSS in MB, exit code) of one command in its own process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        sys.stderr.write(proc.stderr.read().decode(errors="replace")[-2000:] if proc.stderr else "")
    return elapsed, usage.ru_maxrss / 1024, proc.returncode


def tree_size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target-mb", type=float, default=300)
    parser.add_argument("--source", type=Path, help="a TORCH_TRACE log to replicate (default: made from an example)")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    tlparse = shutil.which("tlparse") or (shutil.which("tlparse", path=str(Path(sys.executable).parent)))
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "dedicated_log_torch_trace_big.log"
        copies, n_events = make_large_log(args.source or source_log(), log, args.target_mb)
        size_mb = log.stat().st_size / 1e6
        print(f"log: {size_mb:.0f} MB, {n_events} events, {copies} copies of the source run")
        rows = []
        for _ in range(args.repeat):
            out = Path(tmp) / "big.dynscope"
            s, rss, rc = timed([sys.executable, "-m", "dynscope", "import", "-q", str(log), "-o", str(out)])
            rows.append(("dynscope import", s, rss, rc, tree_size(out)))
            if tlparse:
                tl_out = Path(tmp) / "tl_out"
                s, rss, rc = timed([tlparse, str(log), "-o", str(tl_out), "--overwrite", "--no-browser"])
                rows.append(("tlparse", s, rss, rc, tree_size(tl_out) if tl_out.exists() else 0))
                shutil.rmtree(tl_out, ignore_errors=True)
            out.unlink(missing_ok=True)
    print("\n| tool | seconds | peak RSS (MB) | output (MB) | exit |\n|---|---|---|---|---|")
    for name, s, rss, rc, size in rows:
        print(f"| {name} | {s:.1f} | {rss:.0f} | {size / 1e6:.0f} | {rc} |")
    ours = [r[1] for r in rows if r[0] == "dynscope import"]
    theirs = [r[1] for r in rows if r[0] == "tlparse"]
    if theirs:
        print(f"\ndynscope import / tlparse time: {min(ours) / min(theirs):.2f}")
    else:
        print("\ntlparse is not installed (pip install tlparse): dynscope timed alone")


if __name__ == "__main__":
    main()
