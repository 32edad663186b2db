"""A stage's FX graph as recorded by the fx_graphs probe, loadable as a networkx DiGraph."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, TypedDict

from dynscope.model.json_values import JsonObject, JsonValue, as_list, as_object, as_str
from dynscope.model.output_code import parse_stack_text
from dynscope.model.records import StackFrame

if TYPE_CHECKING:
    import networkx


@dataclass(frozen=True)
class Provenance:
    """A node of torch's provenance tree (node.meta["from_node"]): a node this one was made from,
    in the graph ``graph_id``, by the pass ``pass_name``; ``from_node``: where that one came from."""

    name: str | None
    graph_id: int | None
    pass_name: str | None
    from_node: tuple[Provenance, ...] = ()


class Ancestor(TypedDict):
    name: str | None
    graph_id: int | None
    pass_name: str | None


@dataclass(frozen=True)
class FxNode:
    name: str
    op: str  # placeholder | call_function | call_method | call_module | get_attr | output
    target: str
    args: JsonValue  # in display form (``display_form``)
    kwargs: JsonObject  # in display form
    inputs: tuple[str, ...]
    tensor: JsonValue  # {"shape", "dtype", "stride", "device"} (or a list of them), when known: untrusted, narrow it
    stack_trace: str | None
    module_stack: tuple[tuple[str, str], ...]  # (module path, module class), outermost first
    from_node: tuple[Provenance, ...]
    original_aten: str | None

    @property
    def origins(self) -> list[str]:
        """Names of the nodes this one was made from, one pass back."""
        return list(dict.fromkeys(s.name for s in self.from_node if s.name))

    def ancestors(self) -> list[Ancestor]:
        """Every node in its provenance tree, nearest first."""
        out: list[Ancestor] = []
        frontier = list(self.from_node)
        while frontier:
            source = frontier.pop(0)
            out.append(Ancestor(name=source.name, graph_id=source.graph_id, pass_name=source.pass_name))
            frontier.extend(source.from_node)
        return out

    @property
    def is_compute(self) -> bool:
        return self.op in ("call_function", "call_method", "call_module")

    @property
    def op_kind(self) -> str:
        """A short name for what the node computes: 'aten.mul.Tensor' -> 'mul', 'torch._C._nn.gelu' -> 'gelu'."""
        if not self.is_compute:
            return self.op
        target = self.target
        for prefix in ("torch.ops.aten.", "aten.", "torch.ops.prims.", "prims.", "torch._C._nn.", "torch.nn.functional.", "torch."):
            if target.startswith(prefix):
                target = target[len(prefix):]
                break
        parts = target.split(".")
        if len(parts) > 1 and parts[-1] in ("default", "Tensor", "Scalar", "self", "dim_IntList", "int", "out"):
            parts = parts[:-1]
        return parts[-1] if parts else target

    def to_text(self) -> str:
        meta = self.tensor if isinstance(self.tensor, dict) else None
        typed = f": {meta.get('dtype', '')}[{', '.join(str(d) for d in _iterated(meta['shape']))}]" if meta and "shape" in meta else ""
        if self.op == "placeholder":
            return f"{self.name}{typed} = input"
        if self.op == "output":
            returned = self.args[0] if isinstance(self.args, list) and len(self.args) == 1 else self.args
            return f"return {_render_arg(returned)}"
        call = f"{self.target}({_render_arg(self.args)[1:-1]}"
        if self.kwargs:
            call += (", " if self.args else "") + ", ".join(f"{k}={_render_arg(v)}" for k, v in self.kwargs.items())
        frame = self.user_frame
        where = f"  # line {frame.line}" if frame is not None else ""
        return f"{self.name}{typed} = {call}){where}"

    @property
    def module_path(self) -> str | None:
        return self.module_stack[-1][0] if self.module_stack else None

    @cached_property
    def user_frame(self) -> StackFrame | None:
        """The innermost user source line this node came from."""
        if not self.stack_trace:
            return None
        frames = parse_stack_text(self.stack_trace)
        return frames[-1] if frames else None


class FxGraph:
    def __init__(self, data: JsonObject) -> None:
        self.graph_id: int | None = _int_or_none(data.get("graph_id"))
        self.nodes: list[FxNode] = [_node(n) for n in as_list(data.get("nodes")) if isinstance(n, dict)]
        self.by_name: dict[str, FxNode] = {n.name: n for n in self.nodes}

    def __len__(self) -> int:
        return len(self.nodes)

    @property
    def compute_nodes(self) -> list[FxNode]:
        return [n for n in self.nodes if n.is_compute]

    def op_counts(self) -> Counter[str]:
        return Counter(n.op_kind for n in self.compute_nodes)

    def users(self, name: str) -> list[str]:
        return [n.name for n in self.nodes if name in n.inputs]

    def to_text(self) -> list[str]:
        """One canonical line per node, the same for every stage and torch printer, so that
        text diffs between stages show real changes rather than formatting."""
        return [node.to_text() for node in self.nodes]

    def to_networkx(self) -> networkx.DiGraph:
        """Nodes keyed by name with their record as attribute ``node``; edges input -> user."""
        import networkx as nx

        graph = nx.DiGraph()
        for node in self.nodes:
            graph.add_node(node.name, node=node, op=node.op, target=node.target)
        for node in self.nodes:
            for source in node.inputs:
                if source in self.by_name:
                    graph.add_edge(source, node.name)
        return graph


def _node(raw: JsonObject) -> FxNode:
    return FxNode(
        name=str(raw["name"]),
        op=str(raw.get("op", "")),
        target=str(raw.get("target", "")),
        args=display_form(raw.get("args")),
        kwargs=as_object(display_form(raw.get("kwargs"))),
        inputs=tuple(str(i) for i in as_list(raw.get("inputs"))),
        tensor=raw.get("tensor"),
        stack_trace=as_str(raw.get("stack_trace")),
        module_stack=tuple((str(entry[0]), str(entry[1])) for entry in as_list(raw.get("module_stack"))
                           if isinstance(entry, list) and len(entry) == 2),
        from_node=_provenance(raw.get("from_node")),
        original_aten=as_str(raw.get("original_aten")),
    )


def _provenance(value: JsonValue) -> tuple[Provenance, ...]:
    # Recursion is bounded: a capture's JSON nests at most 64 deep (dynscope.store.json_text).
    return tuple(Provenance(as_str(s.get("name")), _int_or_none(s.get("graph_id")), as_str(s.get("pass_name")),
                            _provenance(s.get("from_node")))
                 for s in as_list(value) if isinstance(s, dict))


def _int_or_none(value: JsonValue) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _iterated(value: JsonValue) -> list[JsonValue]:
    """What a for loop over the value gives (a shape is a list; text iterates by character)."""
    if isinstance(value, str):
        return list(value)
    return list(value) if isinstance(value, list | dict) else [value]


def _render_arg(value: JsonValue) -> str:
    if isinstance(value, dict) and set(value) == {"node"}:
        return str(value["node"])
    if isinstance(value, dict) and set(value) == {"repr"}:
        return str(value["repr"])
    if isinstance(value, list):
        return "(" + ", ".join(_render_arg(v) for v in value) + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_render_arg(v)}" for k, v in value.items()) + "}"
    return repr(value)


_MAX_SHOWN_STR = 120


def display_form(value: JsonValue) -> JsonValue:
    """An argument as views know it, whatever encoding the capture used.

    Since graph encoding 2 (dynscope.probes.fx_graphs) constants are stored exactly, in typed
    forms {"$": kind, ...}, so that the minifier can rebuild graphs. Views keep the simpler
    form of encoding 1: sequences as lists, other constants as {"repr": text}, strings of at
    most 120 characters.
    """
    if isinstance(value, list):
        return [display_form(v) for v in value]
    if isinstance(value, str):
        return value[:_MAX_SHOWN_STR]
    if not isinstance(value, dict):
        return value
    kind = value.get("$")
    if set(value) in ({"node"}, {"repr"}):
        return value
    if not isinstance(kind, str):
        return {k: display_form(v) for k, v in value.items()}
    if kind == "tuple":
        return [display_form(v) for v in as_list(value.get("items"))]
    if kind == "dict":
        return {str(display_form(item[0])): display_form(item[1]) for item in as_list(value.get("items"))
                if isinstance(item, list) and len(item) == 2}
    if kind == "float":
        return _float(value.get("value", "nan"))
    return {"repr": _typed_repr(kind, value)}


def _float(value: JsonValue) -> float:
    """float() of a stored float: a number, or text for the ones JSON cannot hold ("nan", "inf")."""
    if isinstance(value, bool | int | float | str):
        return float(value)
    return float("nan")


def _typed_repr(kind: str, value: JsonObject) -> str:
    """The repr encoding 1 stored for the constant."""
    if kind in ("dtype", "layout", "memory_format"):
        return f"torch.{value.get('name')}"
    if kind == "device":
        index = value.get("index")
        return f"device(type={value.get('type')!r}" + (f", index={index})" if index is not None else ")")
    if kind == "slice":
        parts = [_render_arg(display_form(value.get(k))) for k in ("start", "stop", "step")]
        return f"slice({', '.join(parts)})"
    if kind == "ellipsis":
        return "Ellipsis"
    if kind == "complex":
        return repr(complex(_float(value.get("real", 0.0)), _float(value.get("imag", 0.0))))
    return str(value)
