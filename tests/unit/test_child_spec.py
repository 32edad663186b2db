"""The one record every parent builds and the recording child alone reads (dynscope/runner/spec.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dynscope.runner.extensions import ChildHooks, ProgramStop, remove_all, start_extensions, stop_for
from dynscope.runner.program import Program
from dynscope.runner.spec import ChildExtension, ChildSpec, SpecError, check_extension_name


def _spec(**changes) -> ChildSpec:
    fields = dict(program=Program("script", "train.py", ["--lr", "0.1", "ünï"]), capture="/tmp/run.dynscope",
                  command=("dynscope", "explain", "train.py"), keep_caches=True, profile=True, force_eager=False,
                  workdir="/tmp/out/trial-1.cwd", sigint_notes_fd=7,
                  extensions=(ChildExtension("dynscope.fix.apply", json.dumps({"remedies": [{"op": "config"}]})),
                              ChildExtension("dynscope.minifier.child")))
    fields.update(changes)
    return ChildSpec(**fields)


def test_a_spec_survives_its_json_round_trip():
    for spec in (_spec(), _spec(program=Program("module", "pkg.main", []), workdir=None, sigint_notes_fd=None,
                                extensions=())):
        again = ChildSpec.from_json(spec.to_json())
        assert again == spec
        assert again.to_json() == spec.to_json()
        assert isinstance(again.command, tuple) and isinstance(again.extensions, tuple)


def test_a_spec_is_frozen():
    spec = _spec()
    with pytest.raises(AttributeError):
        spec.capture = "/elsewhere"  # type: ignore[misc]


@pytest.mark.parametrize("name", ["os", "dynscope", "dynscopex.fix", "dynscope.", "dynscope..fix", "dynscope.fix.",
                                  ".dynscope.fix", "dynscope.fix apply", "dynscope.fix/apply", "dynscope.fix-apply",
                                  "dynscope.1fix", "../dynscope.fix", "dynscope.fix\n", "", "DYNSCOPE.fix"])
def test_only_modules_of_dynscope_can_be_named_as_extensions(name):
    with pytest.raises(SpecError):
        ChildExtension(name)
    text = _spec(extensions=()).to_json().replace('"extensions":[]', '"extensions":' + json.dumps([{"module": name}]))
    with pytest.raises(SpecError):
        ChildSpec.from_json(text)


def test_good_extension_names():
    for name in ("dynscope.fix.apply", "dynscope.minifier.child", "dynscope.x_1._y"):
        assert check_extension_name(name) == name


@pytest.mark.parametrize("text", ["", "[]", "{", '{"program": 1}', '{"program": {"kind": "script"}}',
                                  '{"program": {"kind": "shell", "target": "x", "args": []}, "capture": "c"}',
                                  '{"program": {"kind": "script", "target": "x", "args": [1]}, "capture": "c"}',
                                  '{"program": {"kind": "script", "target": "x", "args": []}, "capture": "c", '
                                  '"keep_caches": "yes"}',
                                  '{"program": {"kind": "script", "target": "x", "args": []}, "capture": "c", '
                                  '"sigint_notes_fd": -1}',
                                  '{"program": {"kind": "script", "target": "x", "args": []}, "capture": "c", '
                                  '"extensions": {"module": "dynscope.fix.apply"}}',
                                  '{"program": {"kind": "script", "target": "x", "args": []}, "capture": "c", '
                                  '"extensions": [{"module": "dynscope.fix.apply", "payload": {"remedies": []}}]}',
                                  "[" * 100000])
def test_a_spec_dynscope_did_not_write_is_refused(text):
    with pytest.raises(SpecError):
        ChildSpec.from_json(text)


def test_the_child_refuses_a_bad_spec_in_one_line():
    for argv in ([], ["{not json"], [_spec(extensions=()).to_json().replace('"extensions":[]', '"extensions":[{"module":"os"}]')]):
        proc = subprocess.run([sys.executable, "-m", "dynscope.runner.child", *argv], capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("dynscope: "), proc.stderr


def test_an_extension_is_loaded_by_its_name_and_started_once(monkeypatch):
    import types

    started = []
    module = types.ModuleType("dynscope._test_extension")
    removed = []

    def start_in_child(recorder, payload):
        started.append((recorder, json.loads(payload)))
        return ChildHooks(remove=lambda: removed.append(True),
                          stop_for=lambda exc: ProgramStop(exc, "stopped", 0) if isinstance(exc, KeyError) else None)

    module.start_in_child = start_in_child  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "dynscope._test_extension", module)
    recorder = object()
    hooks = start_extensions([ChildExtension("dynscope._test_extension", '{"a": 1}')], recorder)  # type: ignore[arg-type]
    assert started == [(recorder, {"a": 1})]
    assert stop_for(hooks, KeyError("x")) is not None and stop_for(hooks, ValueError("x")) is None
    remove_all(hooks)
    remove_all(hooks)  # removed once, whichever way the program ended
    assert removed == [True]


def test_a_module_without_the_entry_point_is_no_extension():
    from dynscope.errors import DynscopeError

    with pytest.raises(DynscopeError, match="not a child extension"):
        start_extensions([ChildExtension("dynscope.safe_text")], object())  # type: ignore[arg-type]
    with pytest.raises(DynscopeError, match="cannot load"):
        start_extensions([ChildExtension("dynscope.no_such_module")], object())  # type: ignore[arg-type]


def test_the_fix_payload_round_trips():
    from dynscope.events import ChangeSource, SetConfig
    from dynscope.fix.trial_payload import EXTENSION, TrialRemedies

    remedies = TrialRemedies((SetConfig("torch._dynamo.config", "capture_scalar_outputs", True),
                              ChangeSource((("/p/model.py", "x = 1\n"),))))
    extension = remedies.extension()
    assert extension.module == EXTENSION == "dynscope.fix.apply"
    assert TrialRemedies.from_payload(extension.payload) == remedies
    with pytest.raises(ValueError, match="unknown action 'run'"):
        TrialRemedies.from_payload('{"remedies": [{"op": "run", "code": "import os"}]}')
