"""``dynscope share``: a copy of a capture fit for a public issue (dynscope.share.bundle)."""
