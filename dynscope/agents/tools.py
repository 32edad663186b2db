"""What ``dynscope mcp`` answers: each tool returns a documented JSON document (a dict).

Reading tools open captures inside the served directory with the model (nothing in a capture
is executed; a capture from a stranger is as harmless here as in every view). Tools that run a
program (explain, fix, judging a patch, minify) need the server started with ``--allow-run``;
they run the command line in a child process (``python -m dynscope ...``), whose documented
output file is the answer, and write their captures under ``.dynscope-mcp/`` in the served
directory so the reading tools can open them.
"""

from __future__ import annotations

import errno
import json
import os
import re
import secrets
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dynscope.agents.served import MAX_LISTED_DEPTH, ServedDirectory
from dynscope.errors import DynscopeError

if TYPE_CHECKING:
    from dynscope.model import Capture

CAPTURES_SCHEMA = "dynscope.captures/1"
EXPLAIN_SCHEMA = "dynscope.mcp-explain/1"
OUTPUT_DIRECTORY = ".dynscope-mcp"  # hidden: fix's scratch copies link hidden directories instead of copying them
MAX_PATCH_BYTES = 4 << 20
# judge_patch's --budget: one baseline and one trial of a patch; an agent waits on the answer, so minutes, not
# the hour of run_timeout_s. The child is stopped JUDGE_GRACE_S after the budget (the CLI's start and its report).
JUDGE_BUDGET_S = 300.0
MAX_JUDGE_BUDGET_S = 1800.0
JUDGE_GRACE_S = 60.0
STDERR_TAIL = 4000  # characters of a failed run's stderr in the refusal
MAX_ARGS = 1000  # a program's arguments: how many, and their characters in all
MAX_ARGS_CHARS = 64 * 1024
_WORD = re.compile(r"[A-Za-z0-9_./:\[][A-Za-z0-9_./:\[\]-]{0,63}")  # never an option: no leading -


class RunNotAllowed(DynscopeError):
    pass


def refusal(tool: str, command: str) -> str:
    return (f"refused: {tool} runs a program ({command}), and this server was started without --allow-run. "
            "Restart it as `dynscope mcp --allow-run` to let clients run programs in the directory it serves.")


@dataclass(frozen=True)
class Tools:
    served: ServedDirectory
    allow_run: bool = False
    run_timeout_s: float = 3600.0

    # -- reading ----------------------------------------------------------------------------

    def list_captures(self) -> dict[str, Any]:
        listing = self.served.captures()
        document: dict[str, Any] = {"schema": CAPTURES_SCHEMA, "root": self.served.root, "captures": listing.captures,
                                    "truncated": listing.truncated}
        if listing.too_deep:
            document["skipped"] = (f"{len(listing.too_deep)} directories deeper than {MAX_LISTED_DEPTH} levels were not "
                                   f"looked into (the first: {listing.too_deep[0]})")
        return document

    def summary(self, capture: str) -> dict[str, Any]:
        from dynscope.analysis.run_view import run_view
        from dynscope.analysis.summary import summary_document

        with self._open(capture) as opened:
            return summary_document(run_view(opened))

    def problems(self, capture: str) -> dict[str, Any]:
        from dynscope.analysis.documents import problems_document
        from dynscope.analysis.run_view import run_view

        with self._open(capture) as opened:
            return problems_document(run_view(opened))

    def stages(self, capture: str, compile_id: str | None = None) -> dict[str, Any]:
        from dynscope.analysis.documents import stages_document

        with self._open(capture) as opened:
            ids = [compile_id] if compile_id else [c.compile_id for c in opened.compiles()]
            for cid in ids:
                opened.compile(cid)  # an unknown id: one line naming it
            return stages_document(opened, ids)

    def show_stage(self, capture: str, compile_id: str, stage: str, view: str | None = None) -> dict[str, Any]:
        from dynscope.analysis.documents import stage_document
        from dynscope.commands._common import resolve_stage

        with self._open(capture) as opened:
            found = resolve_stage(opened, compile_id, stage)
            if not found.recorded:
                raise DynscopeError(f"stage {found.key} of compile {compile_id} is missing: {found.missing_reason}")
            if view is not None and view not in found.variants:
                raise DynscopeError(f"stage {found.key} has no view {view!r}; its views: {', '.join(sorted(found.variants))}")
            return stage_document(opened, found, view)

    def diff_compiles(self, capture: str, compile_a: str, compile_b: str) -> dict[str, Any]:
        from dynscope.analysis.diff import diff_compiles
        from dynscope.analysis.documents import compile_diff_document

        with self._open(capture) as opened:
            opened.compile(compile_a)
            opened.compile(compile_b)
            return compile_diff_document(opened, diff_compiles(opened, compile_a, compile_b))

    def compare(self, before: str, after: str) -> dict[str, Any]:
        from dynscope.analysis.compare import compare, comparison_document

        with self._open(before) as a, self._open(after) as b:
            return comparison_document(compare(a, b))

    @contextmanager
    def _open(self, capture: str) -> Iterator[Capture]:
        with self.served.open_capture(capture) as opened:
            yield opened

    # -- running (--allow-run) --------------------------------------------------------------

    def explain(self, script: str, args: list[str] | None = None, profile: bool = False) -> dict[str, Any]:
        """Run a script under dynscope; the summary of its new capture (inside the served directory)."""
        self._may_run("explain", "dynscope explain SCRIPT")
        program = self.served.existing_file(script, what="script")
        arguments = _program_args(args)
        out = os.path.join(self._output_path("explain"), "explain.dynscope")
        options = ["--profile"] if profile else []
        done = self._dynscope(["explain", "-q", "-o", out, *options, program, *arguments],
                              cwd=os.path.dirname(program))
        if not os.path.isfile(out):
            raise DynscopeError(f"explain wrote no capture (exit {done.returncode}): {_tail(done.stderr)}")
        relative = self.served.relative(out)
        return {"schema": EXPLAIN_SCHEMA, "exit_code": done.returncode, "capture": relative,
                "summary": self.summary(relative)}

    def fix(self, script: str, args: list[str] | None = None, only: str | None = None,
            budget_s: float = 900.0) -> dict[str, Any]:
        """dynscope fix SCRIPT: the remedies proven by re-runs (dynscope.fix/2)."""
        self._may_run("fix", "dynscope fix SCRIPT")
        options = [f"--only={only}"] if only else []
        return self._fix(script, args, [*options, "--budget", str(budget_s)])

    def judge_patch(self, script: str, patch: str, args: list[str] | None = None,
                    budget_s: float = JUDGE_BUDGET_S) -> dict[str, Any]:
        """dynscope fix --patch: does this unified diff fix the run with the same outputs (dynscope.fix/2).
        ``budget_s`` (at most MAX_JUDGE_BUDGET_S) bounds the whole judgement, the patch's parsing included."""
        self._may_run("judge_patch", "dynscope fix --patch PATCH SCRIPT")
        if isinstance(budget_s, bool) or not (isinstance(budget_s, (int, float)) and 0 < budget_s <= MAX_JUDGE_BUDGET_S):
            raise DynscopeError(f"budget_s must be a number of seconds above 0 and at most {MAX_JUDGE_BUDGET_S:g} "
                                f"(default {JUDGE_BUDGET_S:g}), not {budget_s!r}")
        if len(patch.encode("utf-8", "surrogatepass")) > MAX_PATCH_BYTES:
            raise DynscopeError(f"the patch is larger than {MAX_PATCH_BYTES:,} bytes")
        with tempfile.TemporaryDirectory(prefix="dynscope-mcp-patch-") as scratch:
            patch_file = os.path.join(scratch, "change.patch")  # outside the served tree: not part of the runs' copies
            with open(patch_file, "w", encoding="utf-8") as f:
                f.write(patch)
            return self._fix(script, args, ["--patch", patch_file, "--budget", str(budget_s)],
                             timeout_s=min(self.run_timeout_s, budget_s + JUDGE_GRACE_S))

    def minify(self, capture: str, compile_id: str, backend: str = "inductor", accuracy: bool = False) -> dict[str, Any]:
        """dynscope minify --from CAPTURE --compile ID: the failing layer and op, and a repro (its result.json)."""
        self._may_run("minify", "dynscope minify, which compiles and runs the recorded graph")
        _check_word(compile_id, "compile_id")
        _check_word(backend, "backend")
        out = self._output_path("minify")
        # The child reads a copy made from the descriptor the door opened, never the name again.
        source = os.path.join(out, "capture.dynscope")
        self.served.copy_capture(capture, source)
        options = ["--accuracy"] if accuracy else []
        done = self._dynscope(["minify", f"--from={source}", f"--compile={compile_id}", f"--backend={backend}",
                               f"--out={os.path.join(out, 'minify')}", *options], cwd=out)
        return self._document(os.path.join(out, "minify", "result.json"), "minify", done)

    def _fix(self, script: str, args: list[str] | None, options: list[str],
             timeout_s: float | None = None) -> dict[str, Any]:
        program = self.served.existing_file(script, what="script")
        arguments = _program_args(args)
        out = self._output_path("fix")
        runs, result = os.path.join(out, "runs"), os.path.join(out, "fix.json")
        done = self._dynscope(["fix", f"--json={result}", f"--out={runs}", *options, program, *arguments],
                              cwd=os.path.dirname(program), timeout_s=timeout_s)
        return self._document(result, "fix", done)

    def _may_run(self, tool: str, command: str) -> None:
        if not self.allow_run:
            raise RunNotAllowed(refusal(tool, command))

    def _output_path(self, kind: str) -> str:
        """A new directory of ours (mode 0700) in ``.dynscope-mcp`` of the served tree, made through
        the door: a link by either name (a tree from elsewhere can hold one) is refused, never followed."""
        try:
            os.mkdir(OUTPUT_DIRECTORY, 0o700, dir_fd=self.served.root_fd)
        except FileExistsError:
            pass
        except OSError as e:
            raise DynscopeError(f"cannot make {OUTPUT_DIRECTORY} in the served directory: {e.strerror}") from None
        where = os.path.join(self.served.root, OUTPUT_DIRECTORY)
        try:
            directory = os.open(OUTPUT_DIRECTORY, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW,
                                dir_fd=self.served.root_fd)
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR):
                # A dangling link too: mkdir found the name taken, and it is no directory of ours.
                raise DynscopeError(f"{where} is a link or not a directory; dynscope mcp writes its runs' output only "
                                    "into a directory of the served tree (remove it)") from None
            raise DynscopeError(f"cannot open {where}: {e.strerror}") from None
        try:
            if os.fstat(directory).st_uid != os.getuid():
                raise DynscopeError(f"{where} belongs to another user; dynscope mcp writes only into its own "
                                    "(remove it)")
            os.fchmod(directory, 0o700)  # no one else lists the runs' names (a tarball's may have come 0755)
            stem = f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}"
            for _ in range(100):
                name = f"{stem}-{secrets.token_hex(4)}"
                try:
                    os.mkdir(name, 0o700, dir_fd=directory)  # exclusive: nothing planted can be in it
                except FileExistsError:
                    continue
                return os.path.join(where, name)
            raise DynscopeError(f"cannot make a new directory in {where}")
        finally:
            os.close(directory)

    def _dynscope(self, argv: list[str], *, cwd: str, timeout_s: float | None = None) -> subprocess.CompletedProcess[str]:
        """The command line in a child process: its stdout is not the MCP channel, and it reads
        nothing from it. Started without its working directory on sys.path (a stranger's tree can
        hold a json.py): dynscope.runner.interpreter. Stopped after ``timeout_s`` (default: the
        server's --run-timeout)."""
        from dynscope.runner.interpreter import child_environment, module_command

        timeout = self.run_timeout_s if timeout_s is None else timeout_s
        try:
            return subprocess.run([*module_command("dynscope"), *argv], cwd=cwd, env=child_environment(),
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace",
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            raise DynscopeError(f"dynscope {argv[0]} ran past {timeout:.0f} s and was stopped") from None
        except (OSError, ValueError) as e:  # E2BIG: arguments too long for the system
            raise DynscopeError(f"cannot start dynscope {argv[0]}: {e}") from None

    def _document(self, path: str, command: str, done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
        try:
            with self.served.opened(self.served.relative(path), what="result") as found, \
                    open(os.dup(found.fd), encoding="utf-8") as f:
                document: dict[str, Any] = json.load(f)
        except DynscopeError:
            raise DynscopeError(f"dynscope {command} wrote no result (exit {done.returncode}): "
                                f"{_tail(done.stderr)}") from None
        except (OSError, ValueError) as e:
            raise DynscopeError(f"dynscope {command}'s result is not JSON: {e}") from None
        return document


def _program_args(args: list[str] | None) -> list[str]:
    """A program's arguments: text without NUL (the system cannot pass it), within the bounds."""
    if args is None:
        return []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise DynscopeError("args must be a list of strings")
    if len(args) > MAX_ARGS or sum(len(a) for a in args) > MAX_ARGS_CHARS:
        raise DynscopeError(f"args: at most {MAX_ARGS:,} arguments of {MAX_ARGS_CHARS:,} characters in all")
    for i, a in enumerate(args):
        if "\0" in a:
            raise DynscopeError(f"args[{i}] holds a NUL character, which no program can be given")
    return list(args)


def _check_word(value: str, what: str) -> None:
    """A compile id or backend name: one word (given to the child as --name=VALUE, never as an option)."""
    if not isinstance(value, str) or _WORD.fullmatch(value) is None:
        raise DynscopeError(f"{what} {value!r} is not a {what.replace('_', ' ')} (letters, digits and _ . / : - "
                            "[ ], at most 64, not starting with -)")


def _tail(text: str) -> str:
    text = text.strip()
    return text if len(text) <= STDERR_TAIL else "…" + text[-STDERR_TAIL:]
