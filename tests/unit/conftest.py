"""The unit layer runs without torch (README "Tests"); these checks keep it so where torch is installed too."""

from __future__ import annotations

import sys

import pytest


@pytest.fixture(autouse=True)
def _imports_no_torch():
    # Only when torch is not loaded already: a whole-suite run imports it in tests/integration first.
    before = "torch" in sys.modules
    yield
    if not before and "torch" in sys.modules:
        pytest.fail("this unit test imported torch: the unit layer must run where torch is not installed")
