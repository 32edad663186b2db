"""Generators and iterator patterns Dynamo cannot trace, in the forms it can.

- ``sum(t * w for t in xs)`` / ``all(...)`` / ``any(...)`` / ``max`` / ``min`` / ``tuple`` / ``list``
  over a generator expression → the same over a list comprehension ("Attempt to trace
  generator", "Unsupported method call" on a generator): a list is a value Dynamo unrolls.
- ``next(iter(d.values()))`` → ``list(d.values())[0]`` (the first item, without an iterator
  object; an empty collection raises IndexError instead of StopIteration).
"""

from __future__ import annotations

import libcst as cst

from dynscope.rewrites import BreakSite, Rewrite
from dynscope.rewrites.locate import dotted_name, expression_code, mentions, replace, statements_at, walk

_CONSUMERS = {"sum", "all", "any", "max", "min", "tuple", "list", "sorted"}
_BREAK_WORDS = ("generator", "iter", "next", "unsupported method call", "builtin", "tp_iter", "genexpr")


def _generator_argument(call: cst.Call) -> cst.GeneratorExp | None:
    if dotted_name(call.func) not in _CONSUMERS or not call.args:
        return None
    first = call.args[0].value
    return first if isinstance(first, cst.GeneratorExp) and call.args[0].keyword is None and not call.args[0].star else None


def _next_of_iter(call: cst.Call) -> cst.BaseExpression | None:
    """``X`` for ``next(iter(X))`` (no default)."""
    if dotted_name(call.func) != "next" or len(call.args) != 1:
        return None
    inner = call.args[0].value
    if isinstance(inner, cst.Call) and dotted_name(inner.func) == "iter" and len(inner.args) == 1 and inner.args[0].keyword is None:
        return inner.args[0].value
    return None


def generators_to_lists(module: cst.Module, _source: str, site: BreakSite) -> Rewrite | None:
    if not mentions(site, *_BREAK_WORDS):
        return None
    for statement in statements_at(module, site.line):
        for call in walk(statement):
            if not isinstance(call, cst.Call):
                continue
            generator = _generator_argument(call)
            if generator is not None:
                listed = cst.ListComp(elt=generator.elt, for_in=generator.for_in)
                rewritten = replace(module, generator, listed)
                return Rewrite("generator-to-list", f"give {dotted_name(call.func)}() a list comprehension instead of a "
                               f"generator (line {site.line})", "Dynamo cannot trace a generator object here; a list it can",
                               site.line, rewritten.code)
            collection = _next_of_iter(call)
            if collection is not None:
                first = cst.parse_expression(f"list({expression_code(collection)})[0]")
                rewritten = replace(module, call, first)
                return Rewrite("generator-to-list", f"take the first item with list(...)[0] instead of next(iter(...)) "
                               f"(line {site.line})", "Dynamo cannot trace the iterator object next(iter(...)) makes here",
                               site.line, rewritten.code)
    return None
