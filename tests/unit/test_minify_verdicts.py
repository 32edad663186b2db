"""minify --resume reuses the repro's proof only for the very bytes it proved (minifier/verdicts.py)."""

from __future__ import annotations

import json
from pathlib import Path

from dynscope.minifier import verdicts
from dynscope.minifier.signature import Signature, hang_signature

FAILED = Signature("compile_error", "CppCompileError", "C++ compile error", "CppCompileError: C++ compile error")


def files(tmp_path: Path) -> tuple[Path, Path, Path]:
    repro, values = tmp_path / "repro.py", tmp_path / "repro_inputs.pt"
    repro.write_text("print('repro')\n")
    return repro, values, tmp_path / "verified.json"


def test_a_verdict_is_recalled_for_the_same_bytes_only(tmp_path):
    repro, values, kept = files(tmp_path)
    key = verdicts.digest([str(repro), str(values)])
    assert verdicts.recall(str(kept), key) is None  # nothing kept yet
    verdicts.remember(str(kept), key, verdicts.Verdict(FAILED))
    recalled = verdicts.recall(str(kept), key)
    assert recalled is not None and recalled.signature is not None and recalled.signature.same_as(FAILED)
    repro.write_text("print('another repro')\n")
    assert verdicts.recall(str(kept), verdicts.digest([str(repro), str(values)])) is None
    values.write_bytes(b"")  # a values file appearing, even empty, is another repro
    assert verdicts.digest([str(repro), str(values)]) != verdicts.digest([str(repro), str(tmp_path / "gone.pt")])


def test_a_clean_run_is_a_verdict_and_a_hang_is_not_kept(tmp_path):
    repro, values, kept = files(tmp_path)
    key = verdicts.digest([str(repro), str(values)])
    verdicts.remember(str(kept), key, verdicts.Verdict(None))
    assert verdicts.recall(str(kept), key) == verdicts.Verdict(None)
    verdicts.remember(str(kept), key, verdicts.Verdict(hang_signature(30)))
    assert verdicts.recall(str(kept), key) is None and not kept.exists()


def test_an_unreadable_or_foreign_file_is_no_verdict(tmp_path):
    repro, values, kept = files(tmp_path)
    key = verdicts.digest([str(repro), str(values)])
    for text in ("not json", "[1, 2]", json.dumps({"digest": key, "signature": "x"}), json.dumps({"digest": 3})):
        kept.write_text(text)
        assert verdicts.recall(str(kept), key) is None
