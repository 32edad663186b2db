"""``assert_never`` on every Python dynscope supports (typing has it from 3.11 on).

A ``match`` over a union ends in ``case _: assert_never(x)``: the type checker then reports a
case nobody handled, and reaching it at run time is an error.
"""

from __future__ import annotations

import sys
from typing import NoReturn

if sys.version_info >= (3, 11):
    from typing import assert_never as assert_never
else:  # Python 3.10: the same check for the type checker, an error if ever reached
    def assert_never(value: NoReturn, /) -> NoReturn:
        raise AssertionError(f"unhandled case: {value!r}")
