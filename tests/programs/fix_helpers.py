"""A setting of tests/programs/fix_model.py that a deliberately wrong remedy changes (dynscope fix tests)."""

SCALE = 2.0
