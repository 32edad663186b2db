"""How far ``dense-expert-loop`` reaches in the installed transformers: every line of its source that finds experts
with ``.nonzero(`` (a line naming an expert, not a ``for``), handed to the rule as a "Dynamic shape operator" break;
prints how many the rule answers and the places it declines.

    python bench/generated/expert_loop_reach.py          # about 30 s: it parses every file with such a line
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import libcst as cst
import transformers

from dynscope.rewrites import BreakSite
from dynscope.rewrites.expert_loops import dense_expert_loop

_FINDS_EXPERTS = re.compile(r"\.nonzero\(")


def main() -> None:
    root = Path(os.path.dirname(transformers.__file__))
    answered, declined = 0, []
    for path in sorted(root.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        if "nonzero(" not in source or "index_add_" not in source:
            continue
        module = cst.parse_module(source)
        for number, line in enumerate(source.splitlines(), 1):
            if _FINDS_EXPERTS.search(line) and "expert" in line and "for " not in line:
                if dense_expert_loop(module, source, BreakSite(number, "Dynamic shape operator", "")) is not None:
                    answered += 1
                else:
                    declined.append(f"{path.relative_to(root)}:{number}")
    print(f"transformers {transformers.__version__}: dense-expert-loop answers {answered} of "
          f"{answered + len(declined)} lines that find experts with nonzero()")
    for place in declined:
        print(f"  declined: {place}")


if __name__ == "__main__":
    main()
