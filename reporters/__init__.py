"""Views of a capture for people and machines: terminal summary, HTML, Markdown, JSON."""
