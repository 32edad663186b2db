"""Make a large, realistic capture: thousands of compiles, ~100 MB of payloads.

Real captures of the examples (compiled with inductor) are the templates; their compiles
are replicated under new frame ids until the requested count is reached, with each copy's
payloads made unique (so de-duplication cannot shrink them) and output code padded until
the file reaches the requested size. The result is read by the real model like any capture.

    python bench/make_large_capture.py OUT.dynscope [--compiles 1000] [--target-mb 100]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dynscope.store.reader import CaptureReader, Event  # noqa: E402
from dynscope.store.writer import CaptureWriter  # noqa: E402

TEMPLATE_RUNS = (
    ("graph_breaks.py", "--backend", "inductor"),
    ("recompiles.py", "--backend", "inductor"),
    ("train_loop.py", "--backend", "inductor"),
)
CACHE = Path(os.environ.get("DYNSCOPE_BENCH_CACHE", Path.home() / ".cache" / "dynscope-bench"))


def template_captures() -> list[Path]:
    """Captures of the examples, made once and cached (compiling them takes a minute or two)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    paths = []
    for script, *args in TEMPLATE_RUNS:
        path = CACHE / f"template-{script.removesuffix('.py')}.dynscope"
        if not path.exists():
            subprocess.run(
                [sys.executable, "-m", "dynscope", "explain", "-q", "-o", str(path), str(REPO / "examples" / script), *args],
                check=True, cwd=REPO, stdout=subprocess.DEVNULL,
            )
        paths.append(path)
    return paths


def make_large_capture(path: str, *, compiles: int = 1000, target_mb: float = 100.0,
                       templates: list[Path] | None = None, seed: int = 0) -> str:
    rng = random.Random(seed)
    sources = [_load(CaptureReader(t)) for t in (templates or template_captures())]
    per_copy = sum(len(s["compiles"]) for s in sources)
    copies = max(1, -(-compiles // per_copy))
    template_bytes = sum(len(p or "") for s in sources for _, p in s["events"])
    # Pad output code so the whole file lands near target_mb (measured: ~1.1 MB of padding
    # text per MB of file, once the templates' own compressed payloads are counted).
    padding_per_copy = max(0, int(target_mb * 1.1e6 / copies) - template_bytes // 3)
    writer = CaptureWriter(path)
    meta = dict(sources[0]["meta"])
    meta.update(command=["bench/make_large_capture.py", f"--compiles={compiles}", f"--target-mb={target_mb}"])
    writer.set_meta(**meta)
    written = 0
    frame_base = 0
    for copy in range(copies):
        for source in sources:
            if written >= compiles:
                break
            code_events = sum(1 for e, _ in source["events"] if e.name == "inductor_output_code") or 1
            pad = _padding(rng, padding_per_copy // (len(sources) * code_events))
            written += _replicate(writer, source, copy, frame_base, pad, compiles - written)
            frame_base += source["frames"]
    writer.close()
    return path


def _load(reader: CaptureReader) -> dict:
    events = [(e, reader.payload(e.payload_hash)) for e in reader.events()]
    frames = {e.metadata.get("frame_id") for e, _ in events if e.metadata.get("frame_id") is not None}
    return {
        "meta": reader.meta,
        "events": events,
        "frames": max(frames) + 1 if frames else 1,
        "compiles": sorted({e.compile_id for e, _ in events if e.compile_id}),
    }


def _replicate(writer: CaptureWriter, source: dict, copy: int, frame_base: int, pad: str, budget: int) -> int:
    keep = set(source["compiles"][:budget])
    new_ids: dict[int, int | None] = {}
    for event, payload in source["events"]:
        if event.compile_id is not None and event.compile_id not in keep:
            continue
        if event.name in ("dynscope:run_start", "dynscope:run_end", "dynscope:probes_removed") and copy:
            continue
        metadata = _shift(event, frame_base)
        if event.name == "dynscope:fx_graph":
            metadata["event_id"] = new_ids.get(metadata.get("event_id"))
        if payload is not None and event.compile_id is not None:
            payload = _unique(event, payload, copy, pad)
        new_ids[event.id] = writer.append(
            event.name, metadata, payload, compile_id=_shift_id(event.compile_id, frame_base),
            attempt=event.attempt, ts=event.ts,
        )
    return len(keep)


def _shift(event: Event, base: int) -> dict:
    metadata = json.loads(json.dumps(event.metadata))
    if isinstance(metadata.get("frame_id"), int):
        metadata["frame_id"] += base
    body = metadata.get(event.name)
    if isinstance(body, dict) and isinstance(body.get("compile_id"), str):
        body["compile_id"] = _shift_id(body["compile_id"], base)
    return metadata


def _shift_id(compile_id: str | None, base: int) -> str | None:
    if compile_id is None or compile_id.startswith("!"):
        return compile_id
    frame, _, rest = compile_id.partition("/")
    return f"{int(frame) + base}/{rest}" if frame.isdigit() else compile_id


def _unique(event: Event, payload: str, copy: int, pad: str) -> str:
    if event.name == "dynscope:fx_graph" or payload.lstrip().startswith(("{", "[")):
        return payload  # JSON payloads keep their shape; they are small
    extra = pad if event.name == "inductor_output_code" else ""
    return f"{payload}\n# bench copy {copy}\n{extra}"


def _padding(rng: random.Random, size: int) -> str:
    if size <= 0:
        return ""
    lines = []
    while size > 0:
        line = "# " + "".join(rng.choice("0123456789abcdef") for _ in range(78))
        lines.append(line)
        size -= len(line) + 1
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output")
    parser.add_argument("--compiles", type=int, default=1000)
    parser.add_argument("--target-mb", type=float, default=100.0)
    args = parser.parse_args()
    started = time.perf_counter()
    make_large_capture(args.output, compiles=args.compiles, target_mb=args.target_mb)
    size = os.path.getsize(args.output) / 1e6
    print(f"wrote {args.output}: {args.compiles} compiles, {size:.1f} MB in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
