"""The recorded numerics captures (tests/data/numerics/): the record the views read, the JSON
document and the exit status from it -- without torch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dynscope.events import NumericsChecked
from dynscope.model import Capture
from dynscope.numerics.criterion import exit_status, first_suspect, verdict
from dynscope.numerics.document import SCHEMA, document

DATA = Path(__file__).resolve().parents[1] / "data" / "numerics"


def recorded(name: str) -> NumericsChecked:
    with Capture.open(str(DATA / f"{name}.dynscope")) as capture:
        found = capture.record_reader.records(NumericsChecked)
    assert len(found) == 1
    return found[0][0]


def test_the_relu_bug_names_the_relu_its_kernel_and_its_line():
    record = recorded("relu_bug")
    assert record.verdict == "suspect" and exit_status(record.verdict) == 1
    assert record.first_suspect == first_suspect(record.nodes) is not None
    suspect = record.nodes[record.first_suspect]
    assert (suspect.node, suspect.op, suspect.kernel) == ("relu", "aten.relu.default", "cpp_fused_relu_0")
    assert suspect.source.endswith("examples/numerics_relu_bug.py:25")
    assert suspect.stack and suspect.stack[-1].code is not None and "torch.relu" in suspect.stack[-1].code
    assert suspect.compiled_error > 1000 * suspect.eager_error
    before = [n for n in record.nodes if n.index < suspect.index]
    assert before and not any(n.suspect for n in before)  # the addmm feeding it is fine
    assert record.reference_dtype == "float64" and record.program_dtype == "float32"
    assert record.graphs_checked == 1 and "fp64_ref" in record.criterion


def test_the_bf16_block_is_within_eagers_own_error():
    record = recorded("bf16_within")
    assert record.verdict == verdict(record.nodes) == "within" and exit_status(record.verdict) == 0
    assert record.first_suspect is None and record.nodes and not any(n.suspect for n in record.nodes)
    assert record.reference_dtype == "float32" and record.program_dtype == "bfloat16"


@pytest.mark.parametrize("name", ["relu_bug", "bf16_within"])
def test_the_json_document_is_what_the_command_wrote(name):
    record = recorded(name)
    written = json.loads((DATA / f"{name}.json").read_text())
    made = document(record, capture=written["capture"])
    assert made == written
    assert made["schema"] == SCHEMA and made["exit_status"] == exit_status(record.verdict)
    assert made["nodes_compared"] == len(made["nodes"]) == len(record.nodes)
    if record.first_suspect is None:
        assert made["first_suspect"] is None
    else:
        assert made["first_suspect"] == made["nodes"][record.first_suspect]


def test_every_documented_field_is_in_the_document():
    text = (Path(__file__).resolve().parents[2] / "docs" / "numerics-json.md").read_text()
    made = document(recorded("relu_bug"), capture="x")
    for key in made:
        assert f"`{key}`" in text, key
    for key in made["nodes"][0]:
        assert f"`{key}`" in text, key
