"""A capture as a notebook shows it: its summary as an HTML fragment (dynscope.reporters.notebook)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from dynscope.errors import DynscopeError


def cell_label(file: str) -> str | None:
    """``In[3]`` for a file this kernel compiled a cell from (IPython names tracebacks the same
    way); None for any other file, or outside IPython."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    compiler: Any = getattr(shell, "compile", None)
    format_code_name = getattr(compiler, "format_code_name", None)
    if format_code_name is None:
        return None
    named = format_code_name(file)
    if not isinstance(named, tuple) or len(named) != 2:
        return None
    return str(named[1])


@dataclass(frozen=True)
class CaptureView:
    """A capture file, rendered as its summary by Jupyter and VS Code (``_repr_html_``)."""

    path: str

    @classmethod
    def open(cls, path: str) -> CaptureView:
        """Checked now (a file, a capture by its header), so a wrong path fails at the magic."""
        from dynscope.store.header import is_capture_file

        if not os.path.isfile(path):
            raise DynscopeError(f"no such capture: {path}")
        if not is_capture_file(path):
            raise DynscopeError(f"{path} is not a dynscope capture")
        return cls(os.path.abspath(path))

    def html(self) -> str:
        from dynscope.model import Capture
        from dynscope.reporters.notebook import NotebookOptions, notebook_html

        with Capture.open(self.path) as capture:
            return notebook_html(capture, NotebookOptions(file_labels=cell_label))

    def _repr_html_(self) -> str:
        try:
            return self.html()
        except DynscopeError as e:  # a damaged capture: one line, as the command line says it
            import html

            from dynscope.safe_text import one_line

            return f"<div>dynscope: {html.escape(one_line(str(e)))}</div>"

    def __repr__(self) -> str:
        return f"<dynscope capture {self.path}>"
