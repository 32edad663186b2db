"""dynscope share against captures forged as an attacker (or an unlucky user) would make them (no torch).

Each test writes a capture through the real writer with what a recorded run could hold — a working
directory of / or /tmp, paths in free text after spaces and in parentheses, file:// URLs, ~user
paths, torch's per-user cache folder, a host name in a message, a token on a command line, a string
global in a guard — shares it with the CLI, and asserts on the bundle's raw bytes and every row and
payload (tests/share_checks.py): exactly what is replaced, what is kept, and that every view opens it.
"""

from __future__ import annotations

import os
import re
import sqlite3
import tempfile
from pathlib import Path

import pytest
from share_checks import stored_texts

from dynscope.commands import main
from dynscope.share.bundle import share_capture
from dynscope.share.guard_values import GuardValueScrubber
from dynscope.share.identity import IdentityScrubber, is_tree
from dynscope.share.paths import PathMapper
from dynscope.store.writer import CaptureWriter

PROGRAM = "/home/ann/proj/train.py"
HOST = "ann-laptop.corp.example.com"
TORCH_CACHE = "/tmp/torchinductor_ann/ab/cabcdef.py"
TOKEN_VALUE = "tok_9f8e7d6c5b4a3921"  # not a known token shape: only the guard rule can catch it
NEW_TOKEN = "tok_0a1b2c3d4e5f6789"  # the value the guard saw when it failed
GUARDS = (
    "TREE_GUARD_MANAGER:\n"
    "| +- GuardManager: source=G['TOKEN'], accessed_by=DictGetItemGuardAccessor('TOKEN')\n"
    f"| | +- EQUALS_MATCH: G['TOKEN'] == '{TOKEN_VALUE}'\n"
    "| | +- EQUALS_MATCH: L['self'].mode == 'sum'\n"
    "| | +- EQUALS_MATCH: L['scale'] == 2.0\n"
)
FREE_TEXT = (
    f'Traceback (most recent call last):\n  File "{PROGRAM}", line 3, in <module>\n'
    "see /home/ann/my proj (copy)/helper.py and (/home/ann/proj/src/m.py:4)\n"
    "open file:///home/ann/notes/plan.txt or file://localhost/srv/data/x.bin\n"
    "cached in ~ann/.cache/thing/x.py and ~/other/y.py, kept at ~5 ms\n"
    f"# kernel path: {TORCH_CACHE}\n"
    "cache folder torchinductor_ann in use\n"
    "windows: C:\\Users\\ann\\work\\m.py\n"
    f"rendezvous at {HOST.split('.')[0]}:29500 ({HOST}), mail ann@example.com\n"
    "config: torchinductor_worker_logpath='' max_tokens=512 tokenizer=fast\n"
    "run: train.py --token=hunter2hunter2 --api-key abcdef123456 HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUv\n"
    "db: postgres://ann:pg_pass_77@db.example.com/x, Authorization: Bearer abcdefghijklmnop123\n"
    "docs: https://pytorch.org/docs/stable/torch.compiler.html x // 2\n"
)


def forge(path: Path, *, cwd: str, hostname: str = HOST, compile_id: str = "0/0") -> Path:
    """A capture as a run in ``cwd`` could leave it: a program file, torch's guards and a free-text
    payload, as the real writer writes them."""
    writer = CaptureWriter(path)
    writer.set_meta(dynscope_version="0", torch_version="2.13.0", python="3.11", cwd=cwd, hostname=hostname,
                    command=["dynscope", "explain", PROGRAM, "--token=hunter2hunter2"], pid=1, started=1.0,
                    finished=2.0, exit_code=0)
    writer.append("dynscope:run_start", {"argv": [PROGRAM, "--token=hunter2hunter2"]})
    writer.append("str", {"str": [PROGRAM, 0]})
    writer.append("dynamo_start", {"dynamo_start": {"stack": [{"line": 3, "name": "forward", "filename": 0}]}},
                  compile_id=compile_id, attempt=0)
    writer.append("dynamo_cpp_guards_str", {}, GUARDS, compile_id=compile_id, attempt=0)
    writer.append("artifact:recompile_reasons", {"artifact": {"name": "recompile_reasons", "encoding": "string"}},
                  f"0/0: TOKEN == '{TOKEN_VALUE}'", compile_id=compile_id, attempt=0)
    writer.append("dynscope:guard_failure", {"function": "forward", "failed_compile_id": compile_id,
                                             "reason": f"0/0: TOKEN == '{TOKEN_VALUE}'",
                                             "guard": f"TOKEN == '{TOKEN_VALUE}'", "actual": f"'{NEW_TOKEN}'"},
                  compile_id=compile_id, attempt=0)
    writer.append("dynscope:graph_break", {"gb_type": "x", "reason": FREE_TEXT, "explanation": "e", "hints": [],
                                           "user_stack": []}, compile_id=compile_id, attempt=0)
    writer.append("inductor_output_code", {"inductor_output_code": {"filename": TORCH_CACHE}},
                  f"# {TORCH_CACHE}\n{FREE_TEXT}", compile_id=compile_id, attempt=0)
    writer.close()
    return path


def bundle_text(bundle: Path) -> str:
    return "\n".join(stored_texts(bundle)) + "\n" + bundle.read_bytes().decode("latin-1")


def share(capture: Path, out: Path, *options: str, capsys=None) -> tuple[int, str, str]:
    code = main(["share", str(capture), "-o", str(out), *options])
    printed = capsys.readouterr() if capsys is not None else None
    return code, printed.out if printed else "", printed.err if printed else ""


# Nothing of these may stay, whatever the tree: who, where, and the secrets.
GONE = ("/home/ann", "ann", HOST, HOST.split(".")[0], "torchinductor_ann", "my proj", "(copy)", "notes/plan.txt",
        "/srv/data", ".cache/thing", "other/y.py", "Users", "hunter2hunter2", "abcdef123456", "hf_AbCdEf",
        TOKEN_VALUE, NEW_TOKEN, "pg_pass_77", "abcdefghijklmnop123")


def _absent(text: str, needles) -> list[str]:
    return [n for n in needles if re.search(r"(?<![A-Za-z0-9])" + re.escape(n) + r"(?![A-Za-z0-9])", text)]


@pytest.mark.parametrize("cwd", ["/", "/tmp", "/var/tmp", "/dev/shm", tempfile.gettempdir(), "/home/ann"])
def test_a_recorded_cwd_of_root_temp_or_home_is_no_tree(tmp_path, capsys, cwd):
    """N2: with the recorded directory /, every path was "inside the tree" and kept whole (the
    program's path, torchinductor_<user>)."""
    capture = forge(tmp_path / "c.dynscope", cwd=cwd)
    out = tmp_path / "b.dynscope"
    code, printed, err = share(capture, out, capsys=capsys)
    assert code == 0, err
    text = bundle_text(out)
    assert _absent(text, GONE) == []
    assert "proj/train.py" not in text and "tmp/torchinductor" not in text
    assert "<path:" in text and "<user>" in text and "<host>" in text and "<secret>" in text
    assert f"the recorded directory {cwd} is no program's tree" in printed
    assert main(["summary", str(out)]) == 0


def test_free_text_paths_are_found_wherever_they_stand(tmp_path, capsys):
    """N8: after a space, in parentheses, file:// URLs, ~user, Windows paths; inside a real tree
    its paths stay relative, and what is not a path stays as it was."""
    capture = forge(tmp_path / "c.dynscope", cwd="/home/ann/proj")
    out = tmp_path / "b.dynscope"
    code, printed, err = share(capture, out, capsys=capsys)
    assert code == 0, err
    text = bundle_text(out)
    assert _absent(text, GONE) == []
    # kept: the tree's paths, relative; URLs; torch's config keys and words that only look like keys
    for kept in ("(src/m.py:4)", "https://pytorch.org/docs/stable/torch.compiler.html x // 2", "~5 ms",
                 "torchinductor_worker_logpath=''", "max_tokens=512 tokenizer=fast", "file://<path:",
                 "torchinductor_<user>", "--token=<secret>", "--api-key <secret>", "HF_TOKEN=<secret>",
                 "rendezvous at <host>:29500 (<host>)", "<user>@example.com",
                 "postgres://<user>:<secret>@db.example.com", "Bearer <secret>"):
        assert kept in text, kept
    assert "made relative to /home/ann/proj" in printed and "names: " in printed


def test_names_in_compile_ids_and_event_names_are_replaced(tmp_path):
    capture = forge(tmp_path / "c.dynscope", cwd="/home/ann/proj", compile_id="0/0 ann")
    out = tmp_path / "b.dynscope"
    share_capture(str(capture), str(out))
    db = sqlite3.connect(f"file:{out}?mode=ro", uri=True)
    ids = {cid for (cid,) in db.execute("SELECT DISTINCT compile_id FROM events WHERE compile_id IS NOT NULL")}
    assert ids == {"0/0 <user>"}


@pytest.mark.parametrize("drop_stages", [False, True])
def test_guard_values_are_replaced_unless_kept(tmp_path, capsys, drop_stages):
    """N12: --drop-stages kept the guard tree (not a stage), and a guard on a string global held its
    value. Each string compared in a guard becomes a salted hash; numbers stay."""
    capture = forge(tmp_path / "c.dynscope", cwd="/home/ann/proj")
    out = tmp_path / "b.dynscope"
    stages = ["--drop-stages"] if drop_stages else []
    code, printed, err = share(capture, out, *stages, capsys=capsys)
    assert code == 0, err
    text = bundle_text(out)
    assert TOKEN_VALUE not in text and NEW_TOKEN not in text and "'sum'" not in text
    hashes = re.findall(r"G\['TOKEN'\] == '(<value:[0-9a-f]{8}>)'", text)
    reason = re.findall(r"TOKEN == '(<value:[0-9a-f]{8}>)'", text)
    assert len(set(hashes)) == 1 and set(reason) == set(hashes)  # one value, one hash: the reason matches its guard
    assert "L['scale'] == 2.0" in text and "DictGetItemGuardAccessor('TOKEN')" in text
    # the guard tree's two, the artifact's reason, the guard failure's reason, guard and the value it saw
    assert "guard values: 6 string values" in printed
    code, printed, err = share(capture, out, "--keep-guard-values", *stages, capsys=capsys)
    assert code == 0, err
    kept = bundle_text(out)
    assert f"G['TOKEN'] == '{TOKEN_VALUE}'" in kept and f"'{NEW_TOKEN}'" in kept and "guard values:" not in printed
    assert "guards (their numbers and strings)" in printed


def test_guard_value_hashes_tell_values_apart_and_leave_other_text():
    scrub = GuardValueScrubber(b"salt")
    text = "L['m'] == 'sum' vs L['m'] == \"sum\" vs L['m'] != 'max'; 'a' == L['y']; f('q'); x == 3"
    out = scrub.scrub(text)
    sums = re.findall(r"L\['m'\] == ('<value:\w+>')", out)
    assert len(sums) == 2 and sums[0] == sums[1] and "'max'" not in out and "'a'" not in out
    assert out.endswith("f('q'); x == 3") and scrub.replaced == 4


def test_share_refuses_a_tree_that_is_no_tree(tmp_path, capsys):
    capture = forge(tmp_path / "c.dynscope", cwd="/home/ann/proj")
    for tree in ("/", "/tmp", os.path.expanduser("~")):
        code, _, err = share(capture, tmp_path / "b.dynscope", "--tree", tree, capsys=capsys)
        assert code == 2 and err.count("\n") == 1 and "is no program's tree" in err
    assert not (tmp_path / "b.dynscope").exists()


def test_is_tree():
    assert not any(is_tree(p) for p in ("/", "/tmp", "/tmp/", "/var/tmp", "/dev/shm", "/home", "/home/ann",
                                        "/Users/ann", "/usr", "/root", tempfile.gettempdir()))
    assert all(is_tree(p) for p in ("/home/ann/proj", "/work", "/tmp/job-1/src", "/srv/app/repo"))


def test_names_are_words_of_their_own():
    names = IdentityScrubber()
    names.learn(["ann", "root", "ci", "x"], [HOST, "localhost"])
    assert names.users == {"ann"}  # root, ci: generic or short; they say nothing of who
    # a user or host named like the bundle's own names would break them: never replaced
    names.learn(["path", "source", "site", "packages", "stdlib", "value", "secret"], ["path", "host"])
    assert names.users == {"ann"} and names.hosts == {HOST, "ann-laptop"}
    assert names.hosts == {HOST, "ann-laptop"}
    assert names.scrub("torchinductor_ann ann@box joanne annual ann-laptop.corp.example.com ann") == \
        "torchinductor_<user> <user>@box joanne annual <host> <user>"


def test_paths_in_free_text_keep_whole_and_stay_bounded():
    mapper = PathMapper("/home/ann/proj", b"salt")
    assert mapper.map_text("x (/home/ann/a b/c (1)/d.py) y") == f"x ({mapper.map_path('/home/ann/a b/c (1)/d.py')}) y"
    # a run folder Hydra names, a path JSON escaped in a payload that is not JSON as a whole
    assert mapper.map_text("/home/ann/outputs/lr=0.1,bs=32/run.py:3") == \
        f"{mapper.map_path('/home/ann/outputs/lr=0.1,bs=32/run.py')}:3"
    assert mapper.map_text('{"f": "\\/home\\/ann\\/k\\/x.py", "g": "\\/home\\/ann\\/proj\\/m.py"') == \
        f'{{"f": "{mapper.map_path("/home/ann/k/x.py")}", "g": "m.py"'
    # a sentence is not a path: at most five words in one directory's name
    sentence = "/x " + "word " * 10_000 + "/y/z"
    assert len(mapper.map_text(sentence)) > 40_000


# -- the bundle's file: where it is written and what else it touches -------------------------------

def _tree_state(root: Path) -> dict[str, tuple[bool, bytes | str]]:
    state: dict[str, tuple[bool, bytes | str]] = {}
    for p in sorted(root.rglob("*")):
        state[str(p)] = (True, os.readlink(p)) if p.is_symlink() else (False, p.read_bytes() if p.is_file() else b"")
    return state


def test_the_output_never_writes_through_a_link_or_over_another_file(tmp_path, capsys):
    capture = forge(tmp_path / "c.dynscope", cwd="/home/ann/proj")
    victim_dir = tmp_path / "victim"
    victim_dir.mkdir()
    victim = victim_dir / "notes.dynscope"
    share_capture(str(capture), str(victim))  # a capture the attacker wants replaced
    (victim_dir / "bashrc").write_text("mine")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "link.dynscope").symlink_to(victim)
    (out_dir / "b.dynscope-wal").symlink_to(victim_dir / "bashrc")  # a planted sidecar
    (out_dir / "b.dynscope-journal").symlink_to(victim_dir / "bashrc")
    before = _tree_state(victim_dir)
    code, _, err = share(capture, out_dir / "link.dynscope", capsys=capsys)
    assert code == 2 and err.count("\n") == 1 and "it is a symbolic link" in err
    code, _, err = share(capture, out_dir / "b.dynscope", capsys=capsys)
    assert code == 0, err
    assert _tree_state(victim_dir) == before  # nothing written through the links
    assert not (out_dir / "b.dynscope-wal").is_symlink()
    # the capture shared, by another name (a hard link), is refused
    os.link(capture, tmp_path / "same.dynscope")
    code, _, err = share(capture, tmp_path / "same.dynscope", capsys=capsys)
    assert code == 2 and "it is the capture being shared" in err


def test_share_changes_nothing_but_its_output(tmp_path, capsys):
    capture = forge(tmp_path / "c.dynscope", cwd=str(tmp_path))
    (tmp_path / "train.py").write_text("x = 1\n")
    before = _tree_state(tmp_path)
    code, _, err = share(capture, tmp_path / "b.dynscope", capsys=capsys)
    assert code == 0, err
    after = _tree_state(tmp_path)
    assert set(after) - set(before) == {str(tmp_path / "b.dynscope")}
    assert {k: v for k, v in after.items() if k in before} == before


def test_hostile_text_costs_one_pass():
    """Quotes and backslashes after ==, thousands of learned user names, sentences of would-be
    directories: each hostile megabyte costs about what a plain one does (side by side, a ratio)."""
    import time

    names = IdentityScrubber()
    names.learn([f"user{i:05d}" for i in range(20_000)], [HOST])
    guards = GuardValueScrubber(b"salt")
    mapper = PathMapper("/home/ann/proj", b"salt")
    mapper.learn([f"/home/ann/proj/f{i}.py" for i in range(2_000)])

    def cost(text: str) -> float:
        start = time.process_time()
        names.scrub(guards.scrub(mapper.map_text(text)))
        return time.process_time() - start

    plain = cost("a plain line of torch's text, x == 2, /a/b.py\n" * 5_000)  # 250 kB, as each below
    for hostile in ("== '" + "\\'" * 125_000, "'\\'" * 83_000 + " ==", "== '" * 62_000, " /a b c d e" * 23_000,
                    "/" * 250_000, "~a/" * 83_000, "C:\\" * 83_000, "token=" * 40_000, "user19999 " * 25_000):
        assert cost(hostile) < 20 * plain + 0.2, hostile[:20]
    assert names.scrub("user19999 and user00000") == "<user> and <user>"


def test_paths_in_sarif_and_html_payloads(tmp_path):
    """A payload that is a SARIF log (JSON: file:// URIs) or an HTML page (paths in attributes and text)."""
    import json

    sarif = {"runs": [{"results": [{"locations": [{"physicalLocation": {"artifactLocation": {
        "uri": "file:///home/ann/proj/src/m.py", "uriBaseId": "file:///home/ann/"}}}]}],
        "invocations": [{"commandLine": "dynscope check --token=hunter2hunter2", "workingDirectory": {
            "uri": "file:///home/ann/proj"}}]}]}
    html = ('<a href="file:///home/ann/secret/x.py">/home/ann/secret/x.py</a><td title=\'/srv/ann-data/y.py\'>'
            "(/opt/corp/internal/z.py)</td>")
    writer = CaptureWriter(tmp_path / "c.dynscope")
    writer.set_meta(dynscope_version="0", torch_version="2.13.0", python="3.11", cwd="/home/ann/proj", started=1.0)
    writer.append("artifact:sarif", {"artifact": {"name": "sarif", "encoding": "json"}}, json.dumps(sarif))
    writer.append("artifact:report", {"artifact": {"name": "report", "encoding": "string"}}, html)
    writer.close()
    out = tmp_path / "b.dynscope"
    share_capture(str(tmp_path / "c.dynscope"), str(out))
    text = bundle_text(out)
    assert _absent(text, ("/home/ann", "ann", "secret/x.py", "/srv", "ann-data", "corp/internal", "hunter2hunter2")) == []
    assert '"uri":"file://src/m.py"' in text and "--token=<secret>" in text and "<a href=\"file://<path:" in text
