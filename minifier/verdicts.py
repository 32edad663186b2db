"""The repro's proof, remembered for ``--resume``: repro.py is run in a fresh process once per content.

A resumed run whose checks all come from ``checks.jsonl`` writes the same repro.py (and the same
recorded values) again; running it in a fresh process again would pay torch's import and
Inductor's first compile for an answer the output directory already holds. The verdict is kept
with the SHA-256 of the files the repro runs, and reused only for exactly those bytes. A hang is
not kept: it says more about the timeout of that run than about the repro.

Torch-free: the parent reads and writes this file.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass

from dynscope.minifier.signature import HANG, Signature


@dataclass(frozen=True)
class Verdict:
    signature: Signature | None  # how the repro failed in a fresh process (None: it ran cleanly)


def digest(paths: list[str]) -> str:
    """The SHA-256 over the files a repro runs (a missing one counts as absent, not as empty)."""
    sha = hashlib.sha256()
    for path in paths:
        sha.update(os.path.basename(path).encode() + b"\0")
        try:
            with open(path, "rb") as f:
                sha.update(b"present\0" + hashlib.sha256(f.read()).digest())
        except FileNotFoundError:
            sha.update(b"absent\0")
    return sha.hexdigest()


def recall(path: str, key: str) -> Verdict | None:
    """The verdict kept for exactly these bytes, or None (none kept, another repro, unreadable)."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("digest") != key:
        return None
    signature = data.get("signature")
    if signature is not None and not isinstance(signature, dict):
        return None
    return Verdict(Signature.from_json(signature))


def remember(path: str, key: str, verdict: Verdict) -> None:
    if verdict.signature is not None and verdict.signature.kind == HANG:
        if os.path.exists(path):
            os.remove(path)
        return
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"digest": key, "signature": verdict.signature.to_json() if verdict.signature else None}, f)
