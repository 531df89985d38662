"""Claims that can fail: the domain a claimed quantity lives in, the counterexample that
would break a claim, and the registry of every claim the kit makes.

A claim ``value op bound`` (:func:`clinlib.core.prose.claim`) says something only if some
value the quantity can take breaks it. ``measured 0 >= 0`` about a count, or ``share <= 1``
about a fraction, holds for every input: it is refused. Each claim names the range of its
quantity from a fixed vocabulary (:data:`DOMAINS`), and :func:`counterexample` finds the value
inside that range nearest the bound on the failing side; no such value means a vacuous claim.

:func:`collect` is the registry: every ``claim(...)`` call in the notebooks' code cells and in
clinlib's modules (the headline checks), read from the sources without running them, with
its statement, operator, bound (when it is a literal) and domain. ``tests/core/
test_claim_registry.py`` evaluates each literal predicate on its counterexample and requires
it to fail; a claim whose bound is computed is checked the same way when it is made.
"""

from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

# name -> (low, high, integer): the range a claimed quantity can take.
DOMAINS: dict[str, tuple[float, float, bool]] = {
    "real": (-math.inf, math.inf, False),  # a signed difference, a margin
    "nonneg": (0.0, math.inf, False),  # a largest |gap|, a cost, a ratio of sizes
    "count": (0.0, math.inf, True),  # rows, cells, answers
    "share": (0.0, 1.0, False),  # an accuracy, a recall, a rate
    "flag": (0.0, 1.0, True),  # yes (1) / no (0)
}
OPS = ("<=", ">=", "<", ">", "==")
# the smallest step off the bound on the failing side, relative to the bound's size
_STEP = 1e-6


class VacuousClaim(ValueError):
    """A claim that holds for every value its quantity can take (it cannot fail)."""


def default_domain(fmt: str, value: object = None) -> str:
    """The domain a claim gets when it names none: ``flag`` for a bool, ``count`` for an
    integer format (``fmt="d"``), else ``real``."""
    if isinstance(value, bool):
        return "flag"
    return "count" if fmt.endswith("d") else "real"


def _inside(x: float, domain: str) -> bool:
    lo, hi, integer = DOMAINS[domain]
    return lo <= x <= hi and (not integer or float(x).is_integer())


def holds(value: float, op: str, bound: float, tol: float = 0.0) -> bool:
    """The predicate itself: ``value op bound`` widened by ``tol`` (``==``: within ``tol``)."""
    if op == "==":
        return abs(value - bound) <= tol
    if op == "<=":
        return value <= bound + tol
    if op == "<":
        return value < bound + tol
    if op == ">=":
        return value >= bound - tol
    if op == ">":
        return value > bound - tol
    raise ValueError(f"claim op {op!r}: use one of {', '.join(OPS)}")


def counterexample(op: str, bound: float, tol: float = 0.0, domain: str = "real") -> float | None:
    """A value inside ``domain`` for which ``value op bound`` (within ``tol``) fails, the one
    nearest the bound; None when every value of the domain satisfies it (a vacuous claim)."""
    if domain not in DOMAINS:
        raise ValueError(f"claim domain {domain!r}: use one of {', '.join(DOMAINS)}")
    integer = DOMAINS[domain][2]
    step = max(_STEP * max(1.0, abs(bound)), 1e-12)
    candidates: list[float] = []
    if op in ("<=", "==", "<"):  # fails above
        edge = bound + tol
        candidates.append(
            (math.floor(edge) + 1 if op != "<" else math.ceil(edge))
            if integer
            else (edge + step if op != "<" else edge)
        )
    if op in (">=", "==", ">"):  # fails below
        edge = bound - tol
        candidates.append(
            (math.ceil(edge) - 1 if op != ">" else math.floor(edge))
            if integer
            else (edge - step if op != ">" else edge)
        )
    if op not in OPS:
        raise ValueError(f"claim op {op!r}: use one of {', '.join(OPS)}")
    for x in candidates:
        if _inside(x, domain) and not holds(x, op, bound, tol):
            return float(x)
    return None


# --- the registry: every claim() call site, read from the sources ----------------------------


@dataclass(frozen=True)
class ClaimSite:
    """One ``claim(...)`` call in a notebook cell or a clinlib module."""

    where: str  # "notebooks/07_x.ipynb[24]" or "clinlib/analysis/headline.py:61"
    statement: str  # the literal text of the statement (fields blanked)
    op: str | None  # None when not a literal
    bound: float | None  # None when computed
    tol: float  # 0 unless a literal tol= is given
    domain: str  # the named or default domain


def _literal_number(node: ast.expr | None) -> float | None:
    if node is None:
        return None
    try:
        value = ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _text(node: ast.expr) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{…}" for v in node.values)
    if isinstance(node, ast.BinOp):
        return _text(node.left) + _text(node.right)
    return "{…}"


def _is_claim(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    return isinstance(node.func, ast.Name) and node.func.id == "claim"


def _site(node: ast.Call, where: str) -> ClaimSite:
    kw = {k.arg: k.value for k in node.keywords}
    args = list(node.args) + [None] * 4
    op_node = args[2] if args[2] is not None else kw.get("op")
    op = op_node.value if isinstance(op_node, ast.Constant) else None
    fmt_node = kw.get("fmt")
    fmt = fmt_node.value if isinstance(fmt_node, ast.Constant) else ".3g"
    dom_node = kw.get("domain")
    domain = dom_node.value if isinstance(dom_node, ast.Constant) else default_domain(fmt)
    return ClaimSite(
        where=where,
        statement=_text(args[0]) if args[0] is not None else "",
        op=op,
        bound=_literal_number(args[3] if args[3] is not None else kw.get("bound")),
        tol=_literal_number(kw.get("tol")) or 0.0,
        domain=domain,
    )


def sites_in_source(source: str, where: str) -> list[ClaimSite]:
    """Every ``claim(...)`` call in a Python source, in order."""
    tree = ast.parse(source)
    calls = [n for n in ast.walk(tree) if _is_claim(n)]
    calls.sort(key=lambda n: (n.lineno, n.col_offset))
    return [_site(n, f"{where}:{n.lineno}") for n in calls]


def _cell_source(cell: dict) -> str:
    src = "".join(cell["source"])
    return "" if src.lstrip().startswith("%") else src


def collect(root: str | Path) -> list[ClaimSite]:
    """The registry: every claim() call in ``root``'s notebooks (code cells) and clinlib."""
    root = Path(root)
    out: list[ClaimSite] = []
    for nb_path in sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(nb_path.read_text())["cells"]
        for i, cell in enumerate(cells):
            if cell["cell_type"] == "code" and "claim(" in "".join(cell["source"]):
                rel = f"notebooks/{nb_path.name}[{i}]"
                out.extend(sites_in_source(_cell_source(cell), rel))
    for py in sorted((root / "clinlib").rglob("*.py")):
        text = py.read_text()
        if re.search(r"from clinlib(?:\.core\.prose)? import [^\n]*\bclaim\b", text):
            out.extend(sites_in_source(text, str(py.relative_to(root))))
    return out


def undisplayed(source: str) -> list[int]:
    """Lines of ``claim(...)`` calls in a cell that Jupyter would not show: a claim is shown
    when it is the cell's last expression or inside a ``display(...)`` / returned list; a
    bare claim statement before the last one is checked but never rendered."""
    if source.lstrip().startswith("%"):
        return []
    body = ast.parse(source).body
    out = []
    for i, stmt in enumerate(body):
        last = i == len(body) - 1
        if isinstance(stmt, ast.Expr) and not last:
            value = stmt.value
            if _is_claim(value):
                out.append(value.lineno)
            elif isinstance(value, ast.Tuple | ast.List):
                out.extend(e.lineno for e in value.elts if _is_claim(e))
    return out
