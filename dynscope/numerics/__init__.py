"""dynscope numerics: where compiled and eager part ways.

The child extension (``child.py``) checks every Inductor graph at its first call: the compiled
run's intermediates (Inductor's intermediate hooks), eager at the program's precision and a
higher-precision reference (``engine.py``), judged by torch's accuracy criterion
(``criterion.py``); it records one ``NumericsChecked`` event. ``document.py`` turns that record
into the command's JSON document and exit status (no torch).
"""
