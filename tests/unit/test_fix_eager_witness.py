"""Eager is a witness (issue 40, item 5), on typed facts written by hand: where the compiled baseline
computes other numbers than the program with torch.compile off, a remedy that restores eager's numbers
is not failed for differing from the compiled baseline, it is said first, and the setting that keeps
NumPy's random stream is offered for a break at a line that draws from np.random.
"""

from __future__ import annotations

from dynscope.analysis.fix_document import Baseline, EagerWitness
from dynscope.analysis.fix_problems import BreakFacts, FixProblem, ProblemKey
from dynscope.analysis.fix_verdict import MATCHES_EAGER, Metrics, RunFacts, judge
from dynscope.analysis.remedies import remedies_for
from dynscope.events import CallOutputs, SetConfig
from dynscope.fix.judging import Judge
from dynscope.model.fix import Features

A = ProblemKey("break", "Unsupported Tensor.item() call", "/p/spec.py", 7)


def _out(*values: float) -> CallOutputs:
    return CallOutputs.from_json({"region": "1:augment", "call": 1, "leaves": [
        {"kind": "tensor", "dtype": "float32", "shape": [1], "values": [v]} for v in values]})


def _run(values: tuple[float, ...], *, breaks: int = 2, problems: dict[ProblemKey, int] | None = None,
         stdout: str = "60.7\n", exit_code: int = 0) -> RunFacts:
    metrics = Metrics(breaks, 0, 0, 1.0, 1.0, breaks + 1)
    return RunFacts(True, exit_code, None, stdout, metrics, {A: 2} if problems is None else problems,
                    (_out(*values),))


COMPILED = _run((60.7, 110.8))  # np.random drawn from torch's stream inside the compiled function
EAGER = _run((62.5, 127.0), breaks=0, problems={}, stdout="62.5\n")  # torch.compile off: NumPy's own stream


def _witnessed() -> Judge:
    judged, witness = Judge(COMPILED, 0.0, 0.0, check_stdout=True, compare_time=False).with_eager(EAGER, "eager.dynscope")
    assert witness.differs and judged.eager is EAGER
    return judged


def test_the_eager_run_is_a_witness_only_where_the_compiled_baseline_differs_from_it():
    witness = _witnessed()
    assert witness.eager is EAGER
    plain = Judge(COMPILED, 0.0, 0.0, check_stdout=True, compare_time=False)
    same, said = plain.with_eager(_run((60.7, 110.8), breaks=0, problems={}), "eager.dynscope")
    assert same is plain and not said.differs and said.message == "the compiled baseline computes what eager computes"
    # an eager run that ended otherwise witnesses nothing
    crashed, said = plain.with_eager(_run((62.5, 127.0), exit_code=1), "eager.dynscope")
    assert crashed is plain and not said.differs and "ended differently" in said.message
    _, said = plain.with_eager(EAGER, "eager.dynscope")
    assert "differ from eager" in said.message and "1:augment call 1 output 0" in said.message


def test_a_rewrite_that_matches_eager_is_not_failed_for_differing_from_the_compiled_baseline():
    restores_eager = _run((62.5, 127.0), breaks=0, problems={}, stdout="62.5\n")
    v = _witnessed()(restores_eager, [A])
    assert v.verdict == "fixed" and v.correct
    assert v.why == f"the problem is gone, nothing new, outputs equal; {MATCHES_EAGER}"
    # without the witness the very same run fails
    assert judge(COMPILED, restores_eager, [A], rtol=0, atol=0).verdict == "failed"


def test_a_run_that_matches_neither_fails_and_one_that_matches_the_baseline_says_nothing_of_eager():
    neither = _run((1.0, 2.0), breaks=0, problems={})
    v = _witnessed()(neither, [A])
    assert v.verdict == "failed" and v.why.startswith("outputs differ: ")
    keeps_compiled = _run((60.7, 110.8), breaks=0, problems={})
    v = _witnessed()(keeps_compiled, [A])
    assert v.verdict == "fixed" and MATCHES_EAGER not in v.why


def test_eager_numbers_with_the_compiled_stdout_printed_something_else():
    # the outputs are eager's, the stdout the compiled run's: held to eager's stdout, it differs
    mixed = _run((62.5, 127.0), breaks=0, problems={}, stdout="60.7\n")
    v = _witnessed()(mixed, [A])
    assert v.verdict == "failed" and v.why == "the program printed something else"


def test_the_document_names_the_eager_run_only_where_one_was_made():
    metrics = Metrics(2, 0, 0, 1.0, 1.0, 3)
    plain = Baseline(metrics, 0, "baseline.dynscope", 1.0)
    assert "eager_run" not in plain.to_json()
    witness = EagerWitness("eager.dynscope", True, ("1:augment call 1 output 0: differs",), "compiled differs")
    shown = Baseline(metrics, 0, "baseline.dynscope", 1.0, eager=witness).to_json()["eager_run"]
    assert shown == {"capture": "eager.dynscope", "compiled_differs": True,
                     "differs": ["1:augment call 1 output 0: differs"], "message": "compiled differs"}


def _break(code: str) -> FixProblem:
    facts = BreakFacts("Unsupported Tensor.item() call", "aten._local_scalar_dense", (), code)
    return FixProblem("graph_break", A, "/p/spec.py", 7, "mask", "what happened", 2, facts)


NUMPY_TORCH = Features(configs={"use_numpy_random_stream": False}, functions=frozenset({"compiler_disable"}),
                       program_root="/p")


def test_numpy_random_stream_is_offered_for_a_break_that_draws_from_np_random():
    offered = [r for r in remedies_for(_break("    width = np.random.randint(1, 4)"), NUMPY_TORCH)
               if isinstance(r.action, SetConfig) and r.action.name == "use_numpy_random_stream"]
    assert len(offered) == 1
    assert offered[0].action == SetConfig("torch._dynamo.config", "use_numpy_random_stream", True)
    assert offered[0].applies_as == "config"
    assert "torch._dynamo.config.use_numpy_random_stream = True" in offered[0].patch


def test_numpy_random_stream_is_not_offered_elsewhere_nor_on_a_torch_without_it():
    def keys(problem: FixProblem, features: Features) -> list[str]:
        return [r.key for r in remedies_for(problem, features) if "use_numpy_random_stream" in r.key]

    assert keys(_break("    n = int(x.sum().item())"), NUMPY_TORCH) == []
    assert keys(_break("    width = np.random.randint(1, 4)"), Features(program_root="/p")) == []
    already = Features(configs={"use_numpy_random_stream": True}, program_root="/p")
    assert keys(_break("    width = numpy.random.rand(3)"), already) == []
    assert keys(_break("    width = numpy.random.rand(3)"), NUMPY_TORCH) != []
