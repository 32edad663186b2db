"""Torch-free checks of how the model reads torch's texts: chained graph breaks by root cause,
their consequence, guard-failure values, the program's own command, and advice from facts.

The texts are torch 2.13's, copied from real runs (tests/integration/test_models.py makes them).
"""

from __future__ import annotations

import dataclasses

from dynscope.analysis.names import plural, short_location, torch_frame_location
from dynscope.analysis.problems import recompile_advice
from dynscope.events import GuardFailureSeen
from dynscope.model.break_text import break_consequence, gb_id_from_link, parse_break_artifact, parse_break_message
from dynscope.model.recompile_text import guard_failure, is_recompile_limit, recompile_limit
from dynscope.model.records import GuardFailure, Run

# Wav2Vec2's SpecAugment mask loop (modeling_wav2vec2.py:179): a data-dependent op inside a loop.
LOOP_MESSAGE = (
    "Data dependent operator\n  Explanation: Operator `aten._local_scalar_dense.default` has a non-Tensor output "
    "whose value is dependent on the data of Tensor inputs.\n  Hint: Enable tracing of data-dependent output "
    "operators with `torch._dynamo.config.capture_scalar_outputs = True`\n\n  Developer debug context: "
    "aten._local_scalar_dense.default\n\n For more details about this graph break, please visit: "
    "https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0033.html\n\n"
    "*** While handling this graph break, another graph break occurred: ***\n\n"
    "graph break in loop\n  Explanation: torch.compile detected a graph break in a for/while loop. Skipping the "
    "frame and falling back to eager, as graph breaks in loops are not supported.\n  Hint: This graph break may have "
    "been caused by an earlier graph break. Resolving the earlier graph break may resolve this one.\n\n"
    "  Developer debug context: frame skipped: torch_dynamo_resume_in__compute_mask_indices_at_141 "
    "(modeling_wav2vec2.py line 141)\n\n For more details about this graph break, please visit: "
    "https://meta-pytorch.github.io/compile-graph-break-site/gb/gb7000.html"
)
SKIPPED = "Failed to handle graph break gracefully. Skipping the function and falling back to eager. " \
          "Graph break encountered:\n\n"


def test_a_chained_break_is_read_as_its_root_cause():
    text = parse_break_message(LOOP_MESSAGE)
    assert text.headline == "Data dependent operator"
    assert text.explanation.startswith("Operator `aten._local_scalar_dense.default`")
    assert text.hints == ("Enable tracing of data-dependent output operators with "
                          "`torch._dynamo.config.capture_scalar_outputs = True`",)
    assert text.doc_link.endswith("/gb0033.html") and gb_id_from_link(text.doc_link) == "GB0033"
    assert text.chained == ("graph break in loop",)


def test_the_consequence_is_a_fact_of_the_break():
    assert break_consequence(SKIPPED + LOOP_MESSAGE, ("graph break in loop",), True) == (
        "inside a loop: the whole frame fell back to eager", True)
    consequence, skipped = break_consequence(SKIPPED + "Missing tp_iternext", (), False)
    assert skipped and consequence.endswith("the whole frame fell back to eager")
    assert break_consequence("Encountered graph break when attempting to trace CALL:\n\nx", (), False) == (None, False)


def test_a_torch_trace_log_reads_the_same_root_cause():
    artifact = ("Graph break in user code at /m/modeling_wav2vec2.py:179\nGraph Break Reason: " + SKIPPED
                + LOOP_MESSAGE + "\n\nUser code traceback:\n")
    parsed = parse_break_artifact(artifact)
    assert (parsed.gb_type, parsed.gb_id, parsed.line) == ("Data dependent operator", "GB0033", 179)


def test_guard_failures_keep_what_torch_said():
    f = guard_failure("0/0: tensor 'x' requires_grad mismatch. expected requires_grad=1", None)
    assert (f.expected, f.actual) == ("requires_grad=1", "requires_grad=0")
    f = guard_failure("0/0: tensor 'x' size mismatch at index 0. expected 4, actual 6", None)
    assert (f.failed_compile_id, f.expected, f.actual) == ("0/0", "4", "6")
    f = guard_failure("0/1: temperature == 2.0   # return x / temperature  # f.py:12 in f",
                       GuardFailureSeen(guard="temperature == 2.0", actual="2"))
    assert (f.guard, f.expected, f.actual, f.user_code) == ("temperature == 2.0", "2.0", "2", "return x / temperature")
    assert guard_failure("1/0: L['y'] is None", None).expected == "None"


def test_recompile_limit_text():
    reason = ("Dynamo recompile limit exceeded\n  Explanation: Dynamo attempted to recompile the code object too many "
              "times, exceeding the recompile_limit cache size limit (currently set to 8).")
    assert is_recompile_limit(reason) and recompile_limit(reason) == ("recompile_limit", 8)
    assert not is_recompile_limit("Data dependent operator\n  Explanation: ...")


def test_the_program_command_leaves_out_dynscopes_options():
    def run(command):
        return Run(**{**{f.name: None for f in dataclasses.fields(Run)}, "command": command})

    assert run(["dynscope", "explain", "-o", "rc.dynscope", "recompiles.py", "--backend", "eager"]).program_command \
        == ["recompiles.py", "--backend", "eager"]
    assert run(["dynscope", "explain", "-q", "--html", "r.html", "-m", "pkg.train", "-o", "x"]).program_command \
        == ["-m", "pkg.train", "-o", "x"]
    assert run(["dynscope", "explain", "--", "-weird.py"]).program_command == ["-weird.py"]
    assert run(["train.py"]).program_command == ["train.py"]


def test_advice_follows_the_recorded_facts():
    int_float = recompile_advice(GuardFailure("0/1", "temperature == 2.0", "temperature == 2.0", "2.0", "2", None))
    assert int_float.startswith("int/float specialization") and "float 2.0" in int_float and "int 2" in int_float
    value = recompile_advice(GuardFailure("0/2", "temperature == 2", "temperature == 2", "2", "3", None))
    assert "specialized on the Python int 2 and got 3" in value
    shape = GuardFailure("0/0", "tensor 'x' size mismatch at index 0. expected 4, actual 6", None, "4", "6", None)
    assert "mark the dimension dynamic" in recompile_advice(shape)
    settled = recompile_advice(shape, made_dynamic=True)
    assert settled.startswith("Dynamo made this dimension dynamic") and "mark the dimension dynamic" not in settled


def test_words():
    assert [plural(n, "error") for n in (0, 1, 2)] == ["0 errors", "1 error", "2 errors"]
    assert plural(1, "op") == "1 op" and plural(3, "recompile-limit hit") == "3 recompile-limit hits"
    assert short_location("/a/b/examples/graph_breaks.py", 20) == "graph_breaks.py:20"


def test_a_guards_user_line_names_the_file_whatever_torch_cut_off():
    # torch shortens a guard's frame by the common path with its own install directory, and
    # where that is "/" it cuts one character too many (torch.utils._traceback.shorten_filename).
    files = {"/tmp/proj/examples/recompiles.py", "/tmp/proj/lib/model.py"}
    cwd = "/tmp/proj"
    assert torch_frame_location("mp/proj/examples/recompiles.py:12 in scaled_softmax", files, cwd) == \
        "examples/recompiles.py:12 in scaled_softmax"  # torch under /work: common path "/"
    assert torch_frame_location("proj/examples/recompiles.py:12 in scaled_softmax", files, cwd) == \
        "examples/recompiles.py:12 in scaled_softmax"  # torch under /tmp/venv: common path "/tmp"
    assert torch_frame_location("lib/model.py:3 in forward", files, "/elsewhere") == \
        "/tmp/proj/lib/model.py:3 in forward"  # outside the run's directory: the whole path
    assert torch_frame_location("other.py:3 in f", files, cwd) == "other.py:3 in f"  # unknown: as torch wrote it
    assert torch_frame_location("not a frame", files, cwd) == "not a frame"
