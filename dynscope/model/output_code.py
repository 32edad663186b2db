"""Split Inductor's output code (the Python wrapper module) into its kernels.

Kernels are defined as ``name = async_compile.<cpp_pybinding|cpp|triton|...>(..., r'''<source>''')``
and launched from the wrapper's ``call()``; extern kernels (``extern_kernels.mm(...)``) are
library calls. Inductor writes comments above definitions and launches that name the FX
nodes each kernel computes; those are our provenance when torch's own tracking is absent.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from dynscope.model.records import StackFrame

_DEFINITION = re.compile(r"^(?P<name>\w+) = async_compile\.(?P<method>\w+)\(", re.MULTILINE)
_SOURCE_NODES = re.compile(r"#\s*Topologically Sorted Source Nodes: \[(?P<nodes>[^\]]*)\]")
_MAPPING_LINE = re.compile(r"^#\s+(?P<origin>\w+) => (?P<nodes>[\w, ]+)$")
_EXTERN_CALL = re.compile(r"^\s*(?:\w+ = )?(?P<name>extern_kernels\.\w+)\(", re.MULTILINE)
_AOT_ID = re.compile(r"^# AOT ID: \['\d+_(?P<graph>forward|backward|inference)'\]", re.MULTILINE)
_STACK_ENTRY = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>[^\n]+)\n(?P<code>[^\n]*)')


@dataclass
class KernelCode:
    name: str
    language: str
    source: str
    launch: str | None = None
    origin_nodes: list[str] = field(default_factory=list)  # from the comments
    post_grad_nodes: list[str] = field(default_factory=list)  # from the comments


def graph_role(output_code: str) -> str | None:
    """forward / backward / inference, from the "# AOT ID" header Inductor writes."""
    match = _AOT_ID.search(output_code)
    return match.group("graph") if match else None


def kernel_names(output_code: str) -> list[str]:
    """The names split_kernels would give, without building the kernels. Whole-run views call
    this on every compile, so it finds the two markers with str.find rather than a regex
    anchored at every line (output code runs to megabytes)."""
    names = []
    for line in _lines_with(output_code, " = async_compile."):
        match = _DEFINITION.match(line)
        if match:
            names.append(match.group("name"))
    seen: dict[str, int] = {}
    for line in _lines_with(output_code, "extern_kernels."):
        match = _EXTERN_CALL.match(line)
        if match:
            name = match.group("name")
            seen[name] = seen.get(name, 0) + 1
            names.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return names


def _lines_with(text: str, marker: str) -> Iterator[str]:
    """Each line of ``text`` holding ``marker`` (once per line)."""
    at = text.find(marker)
    while at != -1:
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        end = len(text) if end == -1 else end
        yield text[start:end]
        at = text.find(marker, end)


def split_kernels(output_code: str) -> list[KernelCode]:
    lines = output_code.splitlines()
    kernels: list[KernelCode] = []
    for match in _DEFINITION.finditer(output_code):
        start = output_code.find("'''", match.end())
        if start == -1:
            continue
        end = output_code.find("'''", start + 3)
        if end == -1:  # output code shown cut (a stage over the read bound): keep the kernel's start
            end = len(output_code)
        method = match.group("method")
        language = "triton" if method == "triton" else "cpp" if method.startswith("cpp") else method
        kernel = KernelCode(match.group("name"), language, output_code[start + 3 : end].strip("\n"))
        # Triton kernels carry their node lists above the definition, C++ ones above the launch.
        _apply_comments(kernel, _comments_above(lines, output_code.count("\n", 0, match.start())))
        launch = _find_launch(lines, kernel.name)
        if launch is not None:
            kernel.launch = lines[launch].strip()
            _apply_comments(kernel, _comments_above(lines, launch))
        kernels.append(kernel)
    return kernels + _extern_calls(lines)


def _comments_above(lines: list[str], line_no: int) -> list[str]:
    block: list[str] = []
    i = line_no - 1
    while i >= 0 and lines[i].lstrip().startswith("#"):
        block.insert(0, lines[i].strip())
        i -= 1
    return block


def _apply_comments(kernel: KernelCode, block: list[str]) -> None:
    for line in block:
        nodes = _SOURCE_NODES.search(line)
        if nodes and not kernel.origin_nodes:
            kernel.origin_nodes = [n.strip() for n in nodes.group("nodes").split(",") if n.strip()]
        mapping = _MAPPING_LINE.match(line)
        if mapping:
            for node in mapping.group("nodes").split(","):
                if node.strip() and node.strip() not in kernel.post_grad_nodes:
                    kernel.post_grad_nodes.append(node.strip())


def _find_launch(lines: list[str], name: str) -> int | None:
    call = re.compile(rf"^\s*{re.escape(name)}(\.run)?\(")
    for i, line in enumerate(lines):
        if call.match(line):
            return i
    return None


def _extern_calls(lines: list[str]) -> list[KernelCode]:
    """Library kernels (mm, addmm, convolution) called from the wrapper, numbered when repeated."""
    found: list[KernelCode] = []
    seen: dict[str, int] = {}
    for i, line in enumerate(lines):
        match = _EXTERN_CALL.match(line)
        if not match:
            continue
        name = match.group("name")
        seen[name] = seen.get(name, 0) + 1
        unique = name if seen[name] == 1 else f"{name}#{seen[name]}"
        kernel = KernelCode(unique, "extern", line.strip(), line.strip())
        _apply_comments(kernel, _comments_above(lines, i))
        found.append(kernel)
    return found


def parse_stack_text(text: str) -> list[StackFrame]:
    """Frames from traceback-formatted text ('  File "x.py", line 3, in f\\n    code')."""
    return [
        StackFrame(m.group("file"), int(m.group("line")), m.group("function").strip(), m.group("code").strip() or None)
        for m in _STACK_ENTRY.finditer(text)
    ]
