"""Checks as the minimizer and the bisector see them: "does this still fail the same way?"

Each check goes to the worker with the case's fixed settings (backend, torch configs,
grad mode, accuracy tolerances, recorded input values) and comes back as a signature.
Results are memoized by the request's content, in memory and in ``checks.jsonl`` in the
output directory: a rerun with ``--resume`` answers every check it already made from
there and continues where the last run stopped.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dynscope.minifier.fragment import Fragment
from dynscope.minifier.signature import Signature, crash_signature, hang_signature
from dynscope.minifier.worker import Worker


@dataclass(frozen=True)
class CheckResult:
    signature: Signature | None  # None: compiled and ran cleanly
    applications: dict[str, list[str]] = field(default_factory=dict)
    seconds: float = 0.0
    invalid: str | None = None  # the graph could not be rebuilt (an edit went too far)
    cached: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"signature": self.signature.to_json() if self.signature else None,
                "applications": self.applications, "seconds": self.seconds, "invalid": self.invalid}

    @classmethod
    def from_json(cls, data: dict[str, Any], *, cached: bool = False) -> CheckResult:
        return cls(Signature.from_json(data.get("signature")), data.get("applications") or {},
                   float(data.get("seconds") or 0.0), data.get("invalid"), cached)


@dataclass
class Settings:
    """What stays the same across a case's checks."""

    backend: dict[str, Any]
    configs: dict[str, dict[str, Any]]
    grad_enabled: bool
    accuracy: dict[str, float] | None
    values: dict[str, Any] | None = None  # recorded input values {"path", "names"}, used when a check asks


class Checker:
    def __init__(self, worker: Worker, settings: Settings, *, timeout: float, cache_path: str | None,
                 on_check: Callable[[CheckResult], None] | None = None) -> None:
        self.worker = worker
        self.settings = settings
        self.timeout = timeout
        self.target: Signature | None = None
        self.use_values = False  # send the recorded input values with every check (the failure needs them)
        self.checks_run = 0  # made by the worker now (not answered from the memo)
        self.checks_total = 0
        self.on_check = on_check
        self._cache_path = cache_path
        self._memo: dict[str, dict[str, Any]] = _load_memo(cache_path) if cache_path else {}

    def check(self, fragment: Fragment, *, backend: dict[str, Any] | None = None,
              configs: dict[str, dict[str, Any]] | None = None, subsystem: dict[str, Any] | None = None,
              with_values: bool | None = None) -> CheckResult:
        s = self.settings
        request = {
            "op": "check",
            "fragment": fragment.to_json(),
            "backend": backend or s.backend,
            "configs": configs if configs is not None else s.configs,
            "grad_enabled": s.grad_enabled,
            "accuracy": s.accuracy,
            "subsystem": subsystem,
            "values": s.values if (self.use_values if with_values is None else with_values) else None,
            "seed": 0,
        }
        key = hashlib.sha256(json.dumps(request, sort_keys=True, default=str).encode()).hexdigest()
        self.checks_total += 1
        if key in self._memo:
            result = CheckResult.from_json(self._memo[key], cached=True)
        else:
            result = self._run(request)
            self.checks_run += 1
            self._remember(key, result)
        if self.on_check is not None:
            self.on_check(result)
        return result

    def reproduces(self, result: CheckResult) -> bool:
        return self.target is not None and self.target.same_as(result.signature)

    def fails(self, fragment: Fragment, **kwargs: Any) -> bool:
        return self.reproduces(self.check(fragment, **kwargs))

    def _run(self, request: dict[str, Any]) -> CheckResult:
        reply = self.worker.request(request, self.timeout)
        # A check that killed the worker still says what it compiled before it died.
        applications = reply.progress.get("applications") or {}
        if reply.hung_after is not None:
            return CheckResult(hang_signature(reply.hung_after), applications, seconds=reply.hung_after)
        if reply.crashed is not None:
            return CheckResult(crash_signature(reply.crashed), applications)
        data = reply.data or {}
        if "error" in data:
            raise RuntimeError(f"the check worker failed: {data['error']}")
        return CheckResult.from_json(data)

    def _remember(self, key: str, result: CheckResult) -> None:
        self._memo[key] = result.to_json()
        if self._cache_path:
            with open(self._cache_path, "a") as f:
                f.write(json.dumps({"key": key, "result": result.to_json()}) + "\n")


def _load_memo(path: str) -> dict[str, dict[str, Any]]:
    memo: dict[str, dict[str, Any]] = {}
    if not os.path.exists(path):
        return memo
    with open(path) as f:
        for line in f:
            try:
                entry = json.loads(line)
                memo[entry["key"]] = entry["result"]
            except (ValueError, KeyError, TypeError, RecursionError):
                continue  # a line cut short when the last run was killed
    return memo
