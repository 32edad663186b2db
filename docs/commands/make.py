"""Write docs/commands/<command>.md, one page per dynscope command, from the command line itself.

Each page's usage and options are the command's own ``--help`` (so they cannot drift: the test
tests/unit/test_command_docs.py fails when a page differs from what this script writes); what
the command is for, its exit statuses and an example are written below, per command. Some examples
show real output, made here from the recorded captures in tests/data/captures.

    python docs/commands/make.py        # rewrite every page (from the repository's root)
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = Path(__file__).resolve().parent
# The recorded captures the examples with output read (a torch version whose captures are checked in).
SAMPLE = "tests/data/captures/2.13.0+cpu"
HELP_COLUMNS = "100"

COMMON_EXITS = (
    (2, "bad input: a missing, damaged or incomplete capture, a bad option; one line on stderr"),
    (70, "a dynscope bug: one line on stderr (`DYNSCOPE_DEBUG=1` shows the traceback)"),
    (130, "interrupted (Ctrl-C)"),
)


@dataclass(frozen=True)
class Page:
    what: str  # what the command is for, in a paragraph
    exits: tuple[tuple[int, str], ...]  # the statuses beyond COMMON_EXITS, 0 first
    example: str  # shell lines
    shown: tuple[str, ...] = ()  # argv (after `dynscope`) whose real output follows the example
    shown_lines: int = 14


PAGES_BY_COMMAND: dict[str, Page] = {
    "explain": Page(
        "Runs your program as `python` would (same argv, working directory, stdin and stdout, signals), with "
        "dynscope's probes on torch.compile, records everything into a capture file as it happens, and prints "
        "a summary on stderr at the end: graph breaks with their cause and hint, recompiles with the guard that "
        "failed, compile errors, and where compile time went. `--profile` also measures what each problem costs "
        "at run time. The compile caches are used as you have them: each cache lookup is recorded (hit, miss, "
        "bypass, and the key component that changed), a hit's output code and kernels too, and a stage a hit "
        "skipped is shown as \"not run: cache hit\"; `--cold` records every stage, with the caches off in a "
        "private cache directory (yours is neither read nor written). `--warm` runs the program cold then warm "
        "with the compile caches on, in a fresh cache directory, and shows what the warm start saved and why "
        "anything still missed ([caches.md](../caches.md)).",
        ((0, "the program's own exit status: dynscope exits as the program did (a program killed by a signal "
             "kills dynscope with the same signal)"),),
        "dynscope explain -o run.dynscope train.py --epochs 1\n"
        "dynscope explain --profile -o timed.dynscope -m mypkg.train --steps 10\n"
        "dynscope explain --cold -o every-stage.dynscope train.py --epochs 1\n"
        "dynscope explain --warm -o warm.dynscope train.py --epochs 1"),
    "summary": Page(
        "Prints a capture's summary again: the run, its graph breaks (most frequent or most costly first), "
        "recompiles, errors and compile time, and what `dynscope numerics` found when the run was checked. "
        "`--json` prints the `dynscope.summary/1` document "
        "([summary-json.md](../summary-json.md)); several captures (one per rank) show where the ranks diverge.",
        ((0, "the summary was printed"),),
        "dynscope summary run.dynscope\ndynscope summary run.dynscope --json | jq '.graph_breaks[0]'",
        shown=("summary", f"{SAMPLE}/graph_breaks_eager.dynscope")),
    "stages": Page(
        "Lists every compile's stages in pipeline order (bytecode, Dynamo's FX graph, AOTAutograd's graphs, "
        "post-grad graphs, scheduler IR, output code, kernels), each recorded with its size and views, or "
        "missing with the reason torch did not emit it.",
        ((0, "the stages were listed"),),
        "dynscope stages run.dynscope --compile 0/0",
        shown=("stages", f"{SAMPLE}/conv_net_inductor.dynscope"), shown_lines=18),
    "show": Page(
        "Prints one stage of one compile (`--stage dynamo`, `--stage post_grad`, `--stage kernel:NAME`), "
        "syntax-highlighted on a terminal, as plain text in a pipe or with `--raw`; `--view` picks a variant "
        "(`before`/`after` of a pass).",
        ((0, "the stage was printed"), (1, "the stage is missing in that compile (the reason is on stderr)")),
        "dynscope show run.dynscope --compile 0/0 --stage aot_forward --raw\n"
        "dynscope show run.dynscope --compile 0/0 --stage kernel:cpp_fused_add_0"),
    "diff": Page(
        "Diffs two stages of one compile (what a pass did: `--from dynamo --to aot_forward`) or one stage of "
        "two compiles (what a recompile changed: `--compile 0/0 --against 0/1`), graph-aware: renamed nodes "
        "are matched, decompositions and fusions named.",
        ((0, "the diff was printed"),),
        "dynscope diff run.dynscope --compile 0/0 --from dynamo --to aot_forward\n"
        "dynscope diff run.dynscope --compile 0/0 --against 0/1"),
    "graph": Page(
        "Draws a stage's FX graph with Graphviz as SVG, PNG or PDF (or writes the DOT text for `.dot`); large graphs "
        "are collapsed by module or by kernel.",
        ((0, "the drawing was written"),
         (1, "Graphviz could not draw it: the DOT text was written beside it instead (said on stderr)")),
        "dynscope graph run.dynscope --compile 0/0 --stage aot_forward -o forward.svg"),
    "tui": Page(
        "Explores a capture in the terminal: the problems ranked, each break and recompile with its source, the "
        "stages of a compile step by step with their diffs, kernels, search. A run checked by `dynscope numerics` "
        "has a sixth view (key 6): the error along each graph node by node, the first suspect's kernel code and "
        "source line. `--against BASE` shows what changed since another run.",
        ((0, "the TUI was closed"),),
        "dynscope tui run.dynscope\ndynscope tui branch.dynscope --against main.dynscope"),
    "report": Page(
        "Writes a report of one capture (or one per rank): a self-contained HTML page (works offline), Markdown "
        "for an issue, or the JSON document. Source excerpts come only from the directory you run dynscope in "
        "and `--source-root` ([security.md](../security.md)).",
        ((0, "the report was written"),),
        "dynscope report run.dynscope -o report.html\ndynscope report run.dynscope --format md > report.md"),
    "check": Page(
        "Fails a CI job on what a run added over its baseline (`--baseline`, matched as `compare` matches) or "
        "on more than a limit allows (`--max-graph-breaks`..., `--max-cache-misses`; an exceeded limit names each "
        "break, recompile or error it counted, at its line). `--max-numerics-suspects N` "
        "gates a `dynscope numerics -o` capture (a failure names each suspect's line) and `--min-speedup X` an "
        "`explain --vs-eager` capture (compiled at least X times eager's speed); given a capture without that "
        "check, they stop with status 2. Findings print as compiler-style lines, GitHub "
        "annotations (`--format github`) or one SARIF 2.1.0 log for code scanning (`--format sarif`); `--junit` "
        "also writes JUnit XML; an allow file accepts known problems, each with a reason "
        "([summary-json.md](../summary-json.md#dynscope-check)).",
        ((0, "no new problem and every limit holds"), (1, "a new problem or a limit exceeded"),
         (2, "also: an incomplete capture, whatever the limits")),
        "dynscope check run.dynscope --max-graph-breaks 0 --max-recompiles 2\n"
        "dynscope check numerics.dynscope --max-numerics-suspects 0\n"
        "dynscope check profiled.dynscope --min-speedup 1.0   # from: dynscope explain --vs-eager\n"
        "dynscope check branch.dynscope --baseline main.dynscope --allow known.toml --format sarif > dynscope.sarif",
        shown=("check", f"{SAMPLE}/graph_breaks_eager.dynscope", "--baseline", f"{SAMPLE}/train_loop_aot_eager.dynscope")),
    "compare": Page(
        "Compares two runs of one program: graph breaks added, removed or moved (matched by what they are: "
        "kind, function, the text of the line and its neighbours, order; never by line number), recompiles and "
        "errors added or removed, compile time by stage, kernels "
        "per frame, and the compile caches' key components that changed (runs that kept their caches). Paths "
        "compare relative to each run's directory; a renamed entry script is still the same "
        "program, and the output says the scripts differ, and when the runs used different backends. "
        "`--json` prints `dynscope.compare/1`, `--md` Markdown "
        "for a pull request.",
        ((0, "the comparison was printed (a regression is not an error here: `check --baseline` fails on it)"),),
        "dynscope compare main.dynscope branch.dynscope\ndynscope compare main.dynscope branch.dynscope --md",
        shown=("compare", f"{SAMPLE}/recompiles_eager.dynscope", f"{SAMPLE}/graph_breaks_eager.dynscope")),
    "minify": Page(
        "Finds which layer of torch.compile breaks a program (Dynamo, AOTAutograd, Inductor; a crash or wrong "
        "numbers with `--accuracy`), shrinks the failing graph to the fewest ops that still fail, and writes a "
        "standalone `repro.py`. `--from CAPTURE --compile ID` starts from a graph a capture recorded; "
        "`--from CAPTURE --suspect` from the first suspect `dynscope numerics` recorded: the subgraph that ends at "
        "that node, compared with eager (`--accuracy`), instead of bisecting the whole graph. The program's run, "
        "the checks and the repro's proof compile in one private cache directory, removed at the end: a graph "
        "checked again unchanged loads from it, and your own cache is neither read nor written "
        "([caches.md](../caches.md)).",
        ((0, "a minimal repro was written and verified to fail the same way"),
         (1, "no failure was found (or the repro did not verify)")),
        "dynscope minify train.py --epochs 1\ndynscope minify --from run.dynscope --compile 0/0\n"
        "dynscope minify --from checked.dynscope --suspect"),
    "fix": Page(
        "Tries the remedies for a program's graph breaks, recompiles and errors, each in a fresh run of the "
        "program, and reports what each one did: breaks, recompiles, compile and run time before and after, and "
        "whether every output stayed equal. The proven ones are run together, and the change to make is printed. "
        "`--patch FILE` judges your own patch the same way; `--from CAPTURE` reruns a capture's recorded command "
        "after asking ([fix-json.md](../fix-json.md)).",
        ((0, "the remedies were tried (with `--patch`: every patch fixed or improved the run)"),
         (1, "with `--patch`: a patch did not fix or improve the run"),
         (2, "also: `--from` without a terminal to ask on and without `--yes`; a `--patch` it cannot judge, before "
             "anything runs: a FIFO, device or directory, over 16 MiB, not UTF-8, more than 5,000 hunks or 500 files "
             "(64 MiB together), a line number of more than 18 digits, a hunk that does not apply, or applying it took "
             "the whole `--budget` ([security.md](../security.md#patches-and-rewrites-bounds)); a `--patch` that "
             "changes torch's or dynscope's own code, a `.pth` file, `sitecustomize.py`/`usercustomize.py` or an "
             "installed package's non-`.py` file (refused before anything runs: a trial could not run the change)")),
        "dynscope fix train.py --epochs 1\ndynscope fix --patch my.diff train.py --epochs 1"),
    "numerics": Page(
        "Finds where the compiled run's numbers part from eager's, in one run of your program: each Inductor graph at "
        "its first call is run compiled (twice: values that change run to run are nondeterministic, never blamed), in "
        "eager at the program's precision and in a float64 reference (float32 for bf16/fp16 programs), and every "
        "intermediate the compiled code exposes is judged by torch's accuracy rule (`torch._dynamo.utils.same` with "
        "`fp64_ref`): suspect when the compiled error exceeds eager's own error by the stated factor. It names the first "
        "suspect node, its generated kernel and your source line, and records a capture (`--json`: "
        "[numerics-json.md](../numerics-json.md)); `--from CAPTURE` reruns a capture's recorded command after asking.",
        ((0, "the compiled run stays within eager's own error (or only differs run to run)"),
         (1, "a node is suspect: the compiled run parts from eager beyond eager's own error"),
         (2, "also: no Inductor graph ran, or `--from` without a terminal to ask on and without `--yes`")),
        "dynscope numerics examples/numerics_relu_bug.py --inject-relu-bug\n"
        "dynscope numerics --json numerics.json -o run.dynscope train.py --epochs 1"),
    "import": Page(
        "Imports `TORCH_TRACE` logs (plain or gzip, a file or a directory; what a cluster job leaves behind) "
        "into captures, one per rank, that every view opens.",
        ((0, "the captures were written"),),
        "TORCH_TRACE=/tmp/trace torchrun --nproc-per-node 8 train.py\ndynscope import /tmp/trace -o run.dynscope"),
    "timeline": Page(
        "Writes the compile timeline as Chrome trace-event JSON (Perfetto, chrome://tracing), one track per "
        "rank: where each rank compiled, and for how long.",
        ((0, "the trace was written"),),
        "dynscope timeline run.rank*.dynscope -o trace.json"),
    "mcp": Page(
        "Serves captures to coding agents over the Model Context Protocol (stdio): reading tools (`list_captures`, `summary`, "
        "`problems`, `stages`, `show_stage`, `diff_compiles`, `compare`) answer with dynscope's JSON documents; tools that run a "
        "program (`explain`, `fix`, `judge_patch`, `minify`) are refused unless `--allow-run`. Every path a client names must be "
        "inside `--root`. Needs `pip install 'dynscope[mcp]'` ([mcp.md](../mcp.md)); in a notebook, see [notebook.md](../notebook.md).",
        ((0, "the client closed the connection"),
         (2, "also: the `mcp` package is not installed, or `--run-timeout` is not a positive number")),
        "claude mcp add dynscope -- dynscope mcp --root /path/to/project\ndynscope mcp --root . --allow-run"),
    "share": Page(
        "Writes a copy of a capture fit for a public issue. Source lines become `<source:HASH>` (frames, "
        "tracebacks, FX code and guard comments, then every line of the program wherever it appears); paths "
        "inside the program's tree become relative, installed packages `<site-packages>/...`, the standard "
        "library `<stdlib>/...`, anything else `<path:HASH>` (hashes salted per bundle), wherever they stand in "
        "text (after spaces, in parentheses, `file://` URLs, `~user/...`); a recorded directory of `/`, a "
        "temporary folder or a home is no tree, so every path is hashed; user and host names become `<user>` and "
        "`<host>`, secrets on command lines (`--token=...`, `HF_TOKEN=...`, `sk-...`) `<secret>`, string values "
        "compared in guards (`G['TOKEN'] == '...'`) `'<value:HASH>'` unless `--keep-guard-values`; the recorded "
        "command, working directory, hostname and environment are removed; `--drop-stages` also drops graphs, "
        "kernels and bytecode. It prints what it removed and what it kept. Every view opens the bundle, and a "
        "maintainer who runs it in a checkout of the program sees the source from their own files. Names, shapes, "
        "guard expressions and their numbers, timings and torch's messages stay: read it before posting it "
        "([security.md](../security.md#sharing-a-capture-dynscope-share)).",
        ((0, "the bundle was written"),
         (2, "also: the output is the capture itself, a link, or a file that is not a capture; `--tree` is `/`, a "
             "temporary folder, a home or a system folder")),
        "dynscope share run.dynscope -o bug.dynscope\ndynscope share run.dynscope -o bug.dynscope --drop-stages"),
}


@contextlib.contextmanager
def _columns(width: str):
    """A fixed terminal width (argparse and rich wrap to it), the environment left as it was."""
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = width
    try:
        yield
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before


def help_text(command: str) -> str:
    from dynscope.commands import build_parser

    with _columns(HELP_COLUMNS):
        parser, _ = build_parser()
        sub = next(a for a in parser._subparsers._group_actions if a.dest == "command").choices[command]  # type: ignore[union-attr]
        return sub.format_help().rstrip() + "\n"


def real_output(argv: tuple[str, ...], lines: int) -> str:
    from dynscope.commands import main

    out = io.StringIO()
    previous = os.getcwd()
    os.chdir(ROOT)
    try:
        with _columns("110"), contextlib.redirect_stdout(out):
            main(list(argv))
    finally:
        os.chdir(previous)
    shown = out.getvalue().rstrip("\n").splitlines()
    return "\n".join(shown[:lines] + (["…"] if len(shown) > lines else [])) + "\n"


def render(command: str) -> str:
    page = PAGES_BY_COMMAND[command]
    also = {code: meaning.removeprefix("also: ") for code, meaning in page.exits if meaning.startswith("also: ")}
    rows = [(code, meaning) for code, meaning in page.exits if code not in also]
    rows += [(code, f"{meaning}; {also[code]}" if code in also else meaning) for code, meaning in COMMON_EXITS]
    exits = "\n".join(f"| {code} | {meaning} |" for code, meaning in sorted(rows, key=lambda e: e[0]))
    parts = [
        f"# dynscope {command}\n",
        page.what + "\n",
        "## Usage and options\n",
        "```text\n" + help_text(command) + "```\n",
        "## Exit status\n",
        "| status | when |\n|---|---|\n" + exits + "\n",
        "## Example\n",
        "```bash\n" + page.example + "\n```\n",
    ]
    if page.shown:
        parts.append(f"`dynscope {' '.join(page.shown)}` (a capture recorded for the tests, {SAMPLE}):\n")
        parts.append("```text\n" + real_output(page.shown, page.shown_lines) + "```\n")
    parts.append("All commands: [docs/commands](README.md).\n")
    return "\n".join(parts)


# The flags that mean the same in every command (dynscope/commands/_common.py holds their one definition).
FLAGS = """## Flags that mean the same everywhere

- `--json [PATH]` and `--md [PATH]` (`summary`, `compare`, `report`, `fix`; `numerics` has `--json [PATH]`): the
  document is written to PATH, or to stdout when no path follows (`dynscope summary run.dynscope --json`).
  A capture or a script right after the flag is the command's input, never the document's path:
  `summary --json run.dynscope` prints the summary of `run.dynscope`, and `numerics --json train.py`
  stops with one line saying where the path goes.
- `-o` means one kind of thing per command family:
  - commands that **record a run** (`explain`, `numerics`, `import`, `share`): `-o` is the capture they write;
  - commands that **draw or write a view** of a capture (`report`, `graph`, `timeline`): `-o` is that file
    (its suffix picks the format where there is a choice).
  - `fix` writes its result with `--json PATH` / `--md PATH` and its runs' captures under `--out DIR`; its old
    `-o PATH` (the JSON) keeps working until the next release, with a one-line notice on stderr.
- The compile-time phases have one set of names everywhere (`summary`, `summary --compile-time`, the TUI,
  the reports, `compare`): Dynamo tracing, guard building, AOT dispatch and partition, Inductor passes,
  Inductor lowering, Inductor scheduling, code generation, C++/Triton compilation, autotuning, backward
  compile; where torch logged only its compilation metrics, their stages are named by the phases they span
  ("code generation + C++/Triton compilation").
- "2 attempts" on a compile: Dynamo traced the frame twice within that compile; it restarts its analysis
  after a graph break (to compile the code before the break) or a speculation that failed, and the last
  attempt is what compiled.

"""


def index() -> str:
    from dynscope.commands import SUBCOMMANDS

    rows = "\n".join(f"- [`dynscope {name}`]({name}.md): {first_sentence(PAGES_BY_COMMAND[name].what)}"
                     for name in SUBCOMMANDS)
    return ("# dynscope's commands\n\nOne page per command: what it is for, its usage and options (its own "
            "`--help`), its exit statuses and an example. The pages are written by `python docs/commands/make.py` "
            "from the command line itself, and a test checks that they are current.\n\n" + rows + "\n\n"
            + FLAGS + "In Jupyter, `%load_ext dynscope` adds the `%%dynscope` and `%dynscope` magics: "
            "[notebook.md](../notebook.md).\n")


def first_sentence(text: str) -> str:
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


def expected_pages() -> dict[str, str]:
    from dynscope.commands import SUBCOMMANDS

    pages = {f"{name}.md": render(name) for name in SUBCOMMANDS}
    pages["README.md"] = index()
    return pages


def main() -> int:
    sys.path.insert(0, str(ROOT))
    for name, text in expected_pages().items():
        (PAGES / name).write_text(text)
        print(f"wrote docs/commands/{name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
