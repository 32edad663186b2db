"""The rewrite worker: the catalogue on one file, in a process of its own (dynscope/rewrites/bounded.py
starts it and says what its bounds are for).

Reads one JSON request on stdin ({source, site, offers, rule_seconds, max_nesting, memory_bytes}) and writes
one JSON answer on stdout: {"rewrites": [...], "notes": [...]} or {"declined": "why"}. Nothing it
reads is run: the source is text to libcst, as in fix's own process before.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import resource
import signal
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

from dynscope.rewrites import BreakSite, Offers, Rewrite


def main() -> None:
    request = json.loads(sys.stdin.buffer.read().decode("utf-8", "surrogatepass"))
    _cap_memory(int(request["memory_bytes"]))
    try:
        offers = Offers(frozenset(request["offers"]["hatches"]), frozenset(request["offers"]["compiled"]),
                        frozenset(int(n) for n in request["offers"].get("compiled_lines", ())))
        answer = _rewrite(request["source"], BreakSite(**request["site"]), offers, float(request["rule_seconds"]),
                          float(request["structure_seconds"]), int(request["max_nesting"]))
    except MemoryError:
        answer = {"declined": f"needed more than {int(request['memory_bytes']) >> 30} GiB"}
    sys.stdout.buffer.write(json.dumps(answer, ensure_ascii=False).encode("utf-8", "surrogatepass"))


def _cap_memory(limit: int) -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def nesting(tree: ast.AST) -> int:
    """The depth of the deepest node (an ``elif`` is one level below its ``if``, as in libcst's tree)."""
    deepest, stack = 0, [(tree, 1)]
    while stack:  # no recursion: the depth is what is being checked
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _rewrite(source: str, site: BreakSite, offers: Offers, rule_seconds: float, structure_seconds: float,
             max_nesting: int) -> dict[str, Any]:
    import libcst as cst

    from dynscope.rewrites.catalogue import rewrites_for
    from dynscope.rewrites.locate import parents, positions

    try:
        depth = nesting(ast.parse(source.removeprefix("\ufeff")))  # a BOM is no syntax error to libcst
    except (SyntaxError, ValueError):
        return {"rewrites": [], "notes": []}  # not Python: libcst would not parse it either, as before
    except RecursionError:
        return {"declined": "nested too deeply for Python's own parser"}
    if depth > max_nesting:
        return {"declined": f"nested {depth} levels deep, more than the rewrite step takes ({max_nesting})"}
    try:
        module = cst.parse_module(source)  # native code, no timer reaches it: the parent's stops it
    except cst.ParserSyntaxError:
        return {"rewrites": [], "notes": []}
    except RecursionError:
        return {"declined": "nested too deeply for libcst"}
    notes: list[str] = []
    # What every rule reads (each node's lines and holder), made once under a limit of its own
    _Timed(structure_seconds, notes)("reading the file's structure", lambda: (positions(module), parents(module)) and None)
    if notes:
        return {"declined": notes[0]}
    rewrites = rewrites_for(source, site, offers, _Timed(rule_seconds, notes), module)
    return {"rewrites": [dataclasses.asdict(r) for r in rewrites], "notes": notes}


class _OutOfTime(BaseException):  # not an Exception: a rule's own `except Exception` must not swallow it
    pass


class _Timed:
    """Runs each rule under a timer of ``seconds``; a rule over it, or failing, is skipped with a note.
    libcst's context managers turn the timer's exception into a KeyError on the way out, so whether
    the timer fired is kept apart from what was raised."""

    def __init__(self, seconds: float, notes: list[str]) -> None:
        self.seconds, self.notes, self.fired = seconds, notes, False
        signal.signal(signal.SIGALRM, self._out_of_time)

    def _out_of_time(self, _signum: int, _frame: FrameType | None) -> None:
        self.fired = True
        raise _OutOfTime

    def __call__(self, name: str, call: Callable[[], Rewrite | None]) -> Rewrite | None:
        self.fired = False
        signal.setitimer(signal.ITIMER_REAL, self.seconds)
        try:
            return call()
        except MemoryError:
            raise
        except BaseException as e:  # a rule that fails on a stranger's file is one rule less, not fix's end
            signal.setitimer(signal.ITIMER_REAL, 0)
            step, skipped = (name, "") if " " in name else (f"rule {name}", ": skipped")  # a rule, or a step all share
            if self.fired:
                self.notes.append(f"{step} took more than {self.seconds:g} s{skipped}")
            elif isinstance(e, RecursionError):
                self.notes.append(f"{step}: the file is nested too deeply for libcst{skipped}")
            elif isinstance(e, Exception):
                self.notes.append(f"{step} failed on this file ({type(e).__name__}){skipped}")
            else:
                raise
            return None
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
