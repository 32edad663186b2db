"""The Textual terminal UI (`dynscope tui CAPTURE`), installed as ``dynscope.tui``.

app.py          the App: tabs, keys, routing between views (messages.py)
overview.py     run facts, counts, top problems
compiles.py     navigation tree (navigator.py) + stage stepper (stage_stepper.py)
breaks.py       graph breaks, explained, with the source line
guards.py       recompiles (failing guard, expected vs actual, compile diff) and guard lists
kernels.py      kernel code and provenance
search.py       `/` search; palette.py: ctrl+p commands; help.py: `?`; source.py: a user file
code_view.py    the line-rendered code panel; text.py: capture strings as literal rich Text
"""
