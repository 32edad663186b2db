"""dynscope in a notebook: a real notebook executed headless (nbclient) under a real ipykernel.

`%load_ext dynscope`, a `%%dynscope` cell whose function breaks the graph (backend eager), and the
HTML it displays naming the break's line as the notebook numbers it; then `%dynscope open` on the
capture, and one capture over several cells (`%dynscope start` ... `stop`) holding a recompile
that a later cell caused.
"""

from __future__ import annotations

import html
import re
import sys
from pathlib import Path

from conftest import import_or_skip

nbformat = import_or_skip("nbformat")
nbclient = import_or_skip("nbclient")
import_or_skip("ipykernel")

from dynscope.model import Capture  # noqa: E402

BREAKING_CELL = """%%dynscope -o cell.dynscope
def step(x):
    y = x * 2
    print(y)
    return y + 1

compiled = torch.compile(step, backend="eager")
compiled(torch.ones(3))"""


def _run_notebook(directory: Path, cells: list[str]) -> list[list[dict]]:
    """Every cell's outputs, run in order by a fresh kernel of this interpreter (the test's
    dynscope and torch, not whatever "python3" kernel is installed), in ``directory``."""
    import json

    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    kernels = directory / ".kernels"
    (kernels / "dynscope-test").mkdir(parents=True)
    (kernels / "dynscope-test" / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "dynscope test", "language": "python"}))
    km = KernelManager(kernel_name="dynscope-test", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernels)]))
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    client = nbclient.NotebookClient(notebook, km=km, timeout=300, allow_errors=True,
                                     resources={"metadata": {"path": str(directory)}})
    client.execute()
    return [cell["outputs"] for cell in notebook.cells]


def _html(outputs: list[dict]) -> str:
    return "".join(o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {}))


def _errors(outputs: list[dict]) -> list[str]:
    """Exceptions a cell raised, and the usage errors IPython prints instead of a traceback."""
    raised = [f"{o['ename']}: {o['evalue']}" for o in outputs if o["output_type"] == "error"]
    printed = [line for o in outputs if o["output_type"] == "stream" and o["name"] == "stderr"
               for line in o["text"].splitlines() if line.startswith("UsageError")]
    return raised + printed


def test_a_cell_under_capture_shows_its_break_at_the_cells_line(tmp_path):
    outputs = _run_notebook(tmp_path, [
        "%load_ext dynscope\nimport torch",
        BREAKING_CELL,
        "%dynscope open cell.dynscope",
        "%dynscope start -o session.dynscope",
        "g = torch.compile(lambda x: x.sin() + 1, backend='eager')\ng(torch.ones(3))",
        "g(torch.ones(3, 4))",  # a later cell, new shape: a recompile in the same capture
        "%dynscope stop",
        # Capture objects render themselves: the one dynscope.capture() returns, and an opened capture.
        "import dynscope\nwith dynscope.capture('block.dynscope') as cap:\n"
        "    torch.compile(lambda x: x.cos(), backend='eager')(torch.ones(2))\ncap",
        "dynscope.open_capture('cell.dynscope')",
    ])
    for cell in outputs:
        assert _errors(cell) == []

    # The cell ran as a cell: its print went to its output, and the summary was displayed after it.
    breaking = outputs[1]
    assert any(o["output_type"] == "stream" and "tensor([2., 2., 2.])" in o["text"] for o in breaking)
    shown = _html(breaking)
    assert "graph break" in shown and "print" in shown
    # The break's line as the notebook numbers it (line 1 is %%dynscope), with its code.
    assert re.search(r"In\[2\], line 4 in step", shown), shown
    assert html.escape("print(y)") in shown
    assert "<script" not in shown.lower() and "http://" not in shown and "<style" not in shown.lower()

    # The capture is a real capture of that cell: the break at line 4 of the cell's code.
    with Capture.open(str(tmp_path / "cell.dynscope")) as capture:
        breaks = capture.graph_breaks()
        assert [b.location.line for b in breaks] == [4]
        assert capture.run.command == ["%%dynscope", "In[2]"]

    # %dynscope open shows an existing capture, as the cell's value.
    opened = _html(outputs[2])
    assert "In[2], line 4 in step" in opened and "cell.dynscope" in opened

    # start ... stop: the compile of cell 5 and the recompile cell 6 caused, in one capture.
    said = "".join(o.get("text", "") for o in outputs[3])
    assert f"recording every cell into {tmp_path / 'session.dynscope'} until %dynscope stop" in said
    session = _html(outputs[6])
    assert "session.dynscope" in session and "Recompiles" in session
    with Capture.open(str(tmp_path / "session.dynscope")) as capture:
        assert len(capture.recompiles()) == 1
        assert len(capture.compiles()) == 2

    block = _html(outputs[7])
    assert "block.dynscope" in block and "1</strong> compiles" in block and "No graph breaks" in block
    assert "In[2], line 4 in step" in _html(outputs[8])


def test_mistakes_are_one_line_usage_errors(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    outputs = _run_notebook(tmp_path, [
        "%load_ext dynscope",
        "%dynscope open missing.dynscope",
        "%dynscope open notes.txt",
        "%%dynscope -o notes.txt\n1 + 1",
        "%dynscope stop",
        "%dynscope frobnicate",
        "%%dynscope -o raised.dynscope\nraise ValueError('boom')",
    ])
    assert _errors(outputs[1]) == ["UsageError: dynscope: no such capture: missing.dynscope"]
    assert _errors(outputs[2]) == ["UsageError: dynscope: notes.txt is not a dynscope capture"]
    assert _errors(outputs[3]) == ["UsageError: dynscope: refusing to overwrite notes.txt: it is not a dynscope capture"]
    assert (tmp_path / "notes.txt").read_text() == "mine"
    assert _errors(outputs[4]) == ["UsageError: dynscope: nothing is recording (%dynscope start begins a recording)"]
    assert _errors(outputs[5])[0].startswith("UsageError: dynscope: unknown action 'frobnicate'")
    # A cell that raises: its traceback as in any cell, then the summary saying so, from a whole capture.
    assert _errors(outputs[6]) == ["ValueError: boom"]
    assert "the code raised ValueError: boom" in _html(outputs[6])
    with Capture.open(str(tmp_path / "raised.dynscope")) as capture:
        assert capture.exception is not None and capture.exception.message == "boom"
        assert capture.run.incomplete is None
