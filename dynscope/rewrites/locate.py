"""Finding the code torch's line number points at, and small reads of libcst trees the rules share."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TypeVar

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, ParentNodeProvider, PositionProvider

from dynscope.rewrites import BreakSite

CSTNodeT = TypeVar("CSTNodeT", bound=cst.CSTNode)


# The rules of one rewrites_for call ask about the same module many times; resolving the metadata
# of a large file (transformers' models run to thousands of lines) costs far more than the asking.
# One module at a time: the caches hold no more than one file.
_positions: list[tuple[cst.Module, Mapping[cst.CSTNode, CodeRange]]] = []
_parents: list[tuple[cst.Module, Mapping[cst.CSTNode, cst.CSTNode]]] = []


def positions(module: cst.Module) -> Mapping[cst.CSTNode, CodeRange]:
    """Every node of ``module`` (the module's own nodes, not copies) with the lines it spans."""
    if not _positions or _positions[0][0] is not module:
        _positions[:] = [(module, MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider))]
    return _positions[0][1]


def parents(module: cst.Module) -> Mapping[cst.CSTNode, cst.CSTNode]:
    """Every node of ``module`` with the node that holds it."""
    if not _parents or _parents[0][0] is not module:
        _parents[:] = [(module, MetadataWrapper(module, unsafe_skip_copy=True).resolve(ParentNodeProvider))]
    return _parents[0][1]


def all_nodes(module: cst.Module) -> Iterator[cst.CSTNode]:
    """Every node of ``module``, from the cached metadata (cheaper than a fresh walk of a large file)."""
    return iter(positions(module))





_kinds: list[tuple[cst.Module, dict[type[cst.CSTNode], list[tuple[cst.CSTNode, CodeRange]]]]] = []


def nodes_of_kind(module: cst.Module, kind: type[CSTNodeT]) -> list[tuple[CSTNodeT, CodeRange]]:
    """Every node of one kind in ``module`` with its span (cached: every rule asks for statements)."""
    if not _kinds or _kinds[0][0] is not module:
        _kinds[:] = [(module, {})]
    by_kind = _kinds[0][1]
    if kind not in by_kind:
        by_kind[kind] = [(node, span) for node, span in positions(module).items() if isinstance(node, kind)]
    return by_kind[kind]  # type: ignore[return-value]  # filled by isinstance(node, kind) above


def statements_at(module: cst.Module, line: int) -> list[cst.SimpleStatementLine]:
    """The simple statements (one-line statements: calls, assignments, asserts) that span ``line``."""
    return [node for node, where in nodes_of_kind(module, cst.SimpleStatementLine) if where.start.line <= line <= where.end.line]


def ifs_at(module: cst.Module, line: int) -> list[cst.If]:
    """The ``if`` / ``elif`` statements whose condition spans ``line`` (where Dynamo reports a branch)."""
    where = positions(module)
    return [node for node, span in nodes_of_kind(module, cst.If)
            if where[node.test].start.line <= line <= where[node.test].end.line and span.start.line <= line]


def functions_around(module: cst.Module, line: int) -> list[cst.FunctionDef]:
    """The functions whose body spans ``line``, innermost last."""
    found = [(span.start.line, node) for node, span in nodes_of_kind(module, cst.FunctionDef)
             if span.start.line <= line <= span.end.line]
    return [node for _start, node in sorted(found, key=lambda pair: pair[0])]


def dotted_name(node: cst.BaseExpression) -> str:
    """``a.b.c`` for a name or an attribute chain of names; "" for anything else."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        inner = dotted_name(node.value)
        return f"{inner}.{node.attr.value}" if inner else ""
    return ""


def mentions(site: BreakSite, *phrases: str) -> bool:
    """Whether torch's text for the break names one of ``phrases`` (case-insensitive); True when
    torch recorded no text at all, so that the code alone decides."""
    text = f"{site.gb_type}\n{site.reason}".lower()
    if not text.strip():
        return True
    return any(phrase.lower() in text for phrase in phrases)


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """``node`` and every node below it, in source order."""
    yield node
    for child in node.children:
        yield from walk(child)


def plain_names(node: cst.CSTNode, name: str | None = None) -> list[cst.Name]:
    """Each plain name ``node`` reads or writes (the ``b`` of ``a.b`` excluded), in source order; only ``name``'s
    when given."""
    attributes = {id(inner.attr) for inner in walk(node) if isinstance(inner, cst.Attribute)}
    return [inner for inner in walk(node) if isinstance(inner, cst.Name) and id(inner) not in attributes
            and (name is None or inner.value == name)]


def names_in(node: cst.CSTNode) -> set[str]:
    """The plain names ``node`` reads or writes (the ``b`` of ``a.b`` excluded)."""
    return {inner.value for inner in plain_names(node)}


def has_comment(node: cst.CSTNode) -> bool:
    """Whether a comment sits anywhere inside ``node`` (a rewrite that would drop it declines)."""
    return any(isinstance(inner, cst.Comment) for inner in walk(node))


def expression_code(expression: cst.BaseExpression) -> str:
    """The source text of one expression, as written."""
    return cst.Module(body=[]).code_for_node(expression)


def block_of(function: cst.FunctionDef) -> list[cst.BaseStatement]:
    body = function.body
    return list(body.body) if isinstance(body, cst.IndentedBlock) else []


def ensure_import(module: cst.Module, name: str) -> cst.Module:
    """``module`` with ``import <name>`` added after its leading imports, unless it already binds ``name``
    at its top level (``import name``, ``import name.sub``); ``name`` may be dotted (``torch._dynamo``)."""
    body = list(module.body)
    insert_at = 0
    after_plain_import = 0  # stdlib names go with the plain imports (`import numpy as np`), not after `from . import x`
    for index, statement in enumerate(body):
        if not isinstance(statement, cst.SimpleStatementLine):
            break
        first = statement.body[0] if statement.body else None
        if isinstance(first, cst.Import):
            if any(alias.asname is None and _imports(alias, name) for alias in first.names):
                return module
            insert_at = after_plain_import = index + 1
        elif isinstance(first, cst.ImportFrom):
            insert_at = index + 1
        elif index == 0 and isinstance(first, cst.Expr) and isinstance(first.value, (cst.SimpleString, cst.ConcatenatedString)):
            insert_at = 1  # the docstring
        else:
            break
    if binds_at_top(module, name):
        return module
    if after_plain_import:
        insert_at = after_plain_import
    statement = cst.parse_statement(f"import {name}\n")
    if insert_at == 0 and body:
        # keep the file's leading comments above the new import
        first_statement = body[0]
        if first_statement.leading_lines:
            assert isinstance(statement, cst.SimpleStatementLine)
            statement = statement.with_changes(leading_lines=first_statement.leading_lines)
            body[0] = first_statement.with_changes(leading_lines=[])
    body.insert(insert_at, statement)
    return module.with_changes(body=body)


def _imports(alias: cst.ImportAlias, name: str) -> bool:
    """``import a.b.c`` makes ``a``, ``a.b`` and ``a.b.c`` usable: whether ``name`` is one of them."""
    return (dotted_name(alias.name) + ".").startswith(name + ".")


def binds_at_top(module: cst.Module, name: str) -> bool:
    """A top-level ``import name`` further down, or inside a top-level ``if``/``try`` (transformers'
    ``if is_torch_available(): import torch``)."""
    for statement in module.body:
        for inner in walk(statement):
            if isinstance(inner, (cst.FunctionDef, cst.ClassDef)):
                break
            if isinstance(inner, cst.Import) and any(
                    alias.asname is None and _imports(alias, name) for alias in inner.names):
                return True
            if isinstance(inner, cst.ImportAlias) and inner.asname is not None and isinstance(inner.asname.name, cst.Name) \
                    and inner.asname.name.value == name:
                return True
    return False


class _ReplaceNode(cst.CSTTransformer):
    def __init__(self, old: cst.CSTNode, new: cst.CSTNode) -> None:
        self.old, self.new = old, new

    def on_leave(self, original_node: CSTNodeT, updated_node: CSTNodeT
                 ) -> CSTNodeT | cst.RemovalSentinel | cst.FlattenSentinel[CSTNodeT]:
        if original_node is self.old:
            return self.new  # type: ignore[return-value]  # a node of the kind its holder takes: the rules replace like with like
        return updated_node


def replace(module: cst.Module, old: cst.CSTNode, new: cst.CSTNode) -> cst.Module:
    """``module`` with the node ``old`` (one of its own nodes) replaced by ``new``."""
    replaced = module.visit(_ReplaceNode(old, new))
    if not isinstance(replaced, cst.Module):
        raise TypeError("a rewrite replaced the whole module")
    return replaced


class _ReplaceEach(cst.CSTTransformer):
    def __init__(self, new: Mapping[cst.CSTNode, cst.CSTNode]) -> None:
        self.new = new

    def on_leave(self, original_node: CSTNodeT, updated_node: CSTNodeT
                 ) -> CSTNodeT | cst.RemovalSentinel | cst.FlattenSentinel[CSTNodeT]:
        return self.new.get(original_node, updated_node)  # type: ignore[return-value]  # like with like, as in replace


def replace_each(module: cst.Module, new: Mapping[cst.CSTNode, cst.CSTNode]) -> cst.Module:
    """``module`` with each of its own nodes that ``new`` names replaced by its value (nodes apart, none inside another)."""
    replaced = module.visit(_ReplaceEach(new))
    if not isinstance(replaced, cst.Module):
        raise TypeError("a rewrite replaced the whole module")
    return replaced


def block_holding(module: cst.Module, statement: cst.BaseStatement) -> tuple[cst.BaseStatement, ...] | None:
    """The statements of the block ``statement`` sits in (a function's body, a module's, an arm's)."""
    holder = parents(module).get(statement)
    if isinstance(holder, (cst.IndentedBlock, cst.Module)):
        return tuple(holder.body)
    return None


class _ReplaceRun(cst.CSTTransformer):
    def __init__(self, first: cst.BaseStatement, count: int, new: list[cst.BaseStatement]) -> None:
        self.first, self.count, self.new = first, count, new

    def _spliced(self, body: tuple[cst.BaseStatement, ...], original: tuple[cst.BaseStatement, ...]) -> list[cst.BaseStatement]:
        index = next(i for i, statement in enumerate(original) if statement is self.first)
        return list(body[:index]) + self.new + list(body[index + self.count:])

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock) -> cst.IndentedBlock:
        if any(statement is self.first for statement in original_node.body):
            return updated_node.with_changes(body=self._spliced(tuple(updated_node.body), tuple(original_node.body)))
        return updated_node

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        if any(statement is self.first for statement in original_node.body):
            return updated_node.with_changes(body=self._spliced(tuple(updated_node.body), tuple(original_node.body)))
        return updated_node


def replace_run(module: cst.Module, first: cst.BaseStatement, count: int, new: list[cst.BaseStatement]) -> cst.Module:
    """``module`` with ``count`` consecutive statements of one block, from ``first`` on, replaced by ``new``."""
    return module.visit(_ReplaceRun(first, count, new))


def comment_lines(*nodes: cst.CSTNode | None) -> list[cst.EmptyLine]:
    """The comments inside ``nodes``, as lines to put above the statement that replaces them."""
    return [cst.EmptyLine(indent=True, comment=inner) for node in nodes if node is not None
            for inner in walk(node) if isinstance(inner, cst.Comment)]
