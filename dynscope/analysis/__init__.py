"""Pure functions of the model that several views share (grouping, summaries, diffs)."""
