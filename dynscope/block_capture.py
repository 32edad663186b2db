"""What ``dynscope.capture(path)`` returns: a recorder that the user also reads back.

The recorder (dynscope.recorder) writes a capture and knows nothing of reading one; this
subclass adds what a user does with the result of a ``with`` block: ``load()`` it as a model,
or let a notebook show its summary.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from dynscope.recorder import Recorder

if TYPE_CHECKING:
    from dynscope.model import Capture


class BlockCapture(Recorder):
    def load(self) -> Capture:
        from dynscope.model import Capture

        return Capture.open(self.path)

    def _repr_html_(self) -> str | None:
        """In a notebook, ``cap`` after ``with dynscope.capture(path) as cap:`` shows the capture's
        summary (dynscope.notebook); while it records, or once its file is gone, the plain repr."""
        if self.recording or not os.path.isfile(self.path):
            return None
        from dynscope.notebook.display import CaptureView

        return CaptureView(self.path)._repr_html_()
