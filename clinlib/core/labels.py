"""Reading ``name(key=value, ...)`` labels: strategy labels (``dense-retrieval(k=3)``) and
setting specs (``mixed(ratio=0.5, seed=123)``) share one grammar, so a label printed by the kit
parses back to the same object (docs/design.md, "labels")."""

from __future__ import annotations

import ast
import math
import re
from typing import Any

CALL_RE = re.compile(r"^\s*([a-z0-9-]+)\s*(?:\((.*)\))?\s*$", re.S)


def split_call(text: str) -> tuple[str, dict[str, Any]] | None:
    """``name`` or ``name(k=v, ...)`` with Python literal values -> (name, params).

    Returns:
        None when the text does not follow the grammar (the caller names the value in its
        own one-line error); ``**kwargs`` and positional arguments are refused.
    """
    m = CALL_RE.match(str(text))
    if not m:
        return None
    name, inner = m.group(1), m.group(2)
    if not inner or not inner.strip():
        return name, {}
    try:
        call = ast.parse(f"f({inner})", mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(call, ast.Call) or call.args or any(kw.arg is None for kw in call.keywords):
        return None
    try:
        return name, {str(kw.arg): _literal(kw.value) for kw in call.keywords}
    except ValueError:
        return None


def _literal(node: ast.expr) -> Any:
    """A Python literal, or the bare name ``inf`` (a window of every visit, ``m=inf``)."""
    if isinstance(node, ast.Name) and node.id == "inf":
        return math.inf
    return ast.literal_eval(node)


def format_call(name: str, params: dict[str, Any]) -> str:
    """Inverse of :func:`split_call`: ``name`` or ``name(k=v, ...)`` with sorted keys."""
    if not params:
        return name
    return f"{name}(" + ", ".join(f"{k}={v!r}" for k, v in sorted(params.items())) + ")"
