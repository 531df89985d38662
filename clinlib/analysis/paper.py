"""The paper's own numbers: ClinTraceBench's published Tables 1–14 as tidy data.

Each numbered table of the paper is shipped as one long-format CSV under ``data/paper/``
(see ``data/paper/README.md``), transcribed exactly as printed — percent or fraction as the
paper prints it (``unit`` column), a printed dash as an empty value:

- Table 1 (§3/§5.1) main results, per-task accuracy (%) + Pool./Macro/Δblind rows;
- Table 2 (§5.1) context lift over no-context-blind (pp);
- Table 3 (§5.5, SP4) equal-input T3 preservation probe, positive-class recall;
- Table 4 (Appendix D) per-cell cost, tokens and cache-hit rate;
- Tables 5–6 (Appendix G.1) T5 / T8 macro-F1;  Table 7 (G.2) per-task MDE;
- Tables 8–9 (G.3) T9 / T7 strict vs lenient parser;  Table 10 (G.5) backbone-matched prep;
- Tables 11–12 (G.6) dense top-K and summary-budget ablations;  Table 13 (G.7) macro ablation;
- Table 14 (Appendix I) the complete 288-cell accuracy matrix with n.

The consistency helpers recompute the summary rows of Table 1 from per-task cells (pooled
weighted by the §3 evaluation-set sizes, macro = unweighted mean over the nine tasks,
Δblind = macro minus the same-backbone no-context-blind macro) and list every place where a
printed number differs from its recomputation. They never "fix" the transcription.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from clinlib.analysis.metrics import MetricsInputError, summary_rows
from clinlib.core.config import PAPER_DATA_DIR
from clinlib.tasks.rules import PAPER_COUNTS


class PaperTableError(ValueError):
    """A published-table CSV, or a frame passed to a consistency helper, is missing or bad."""


# --- canonical names (paper §4 and Table 1 caption) ----------------------------------------

STRATEGIES: tuple[str, ...] = (
    "no-context-blind",
    "last-visit-only",
    "full-context",
    "dense-retrieval",
    "structured-timeline",
    "llm-summary",
    "mem0",
    "a-mem",
)
BACKBONES: tuple[str, ...] = (
    "deepseek-chat-v3.1",
    "gpt-4o-mini",
    "claude-haiku-4.5",
    "claude-sonnet-4.6",
)
TASKS: tuple[str, ...] = tuple(f"T{i}" for i in range(1, 10))

# Evaluation-set sizes (§3 "Evaluation set"; Table 14 caption). They sum to 6,271.
TASK_N: dict[str, int] = dict(PAPER_COUNTS)
N_QUESTIONS: int = sum(TASK_N.values())

# Short display names the paper prints in Table 1's header.
STRATEGY_LABELS: dict[str, str] = {
    "no-context-blind": "blind",
    "last-visit-only": "last-vis",
    "full-context": "full",
    "dense-retrieval": "dense",
    "structured-timeline": "struct.",
    "llm-summary": "summ.",
    "mem0": "Mem0",
    "a-mem": "A-MEM",
}
BACKBONE_LABELS: dict[str, str] = {
    "deepseek-chat-v3.1": "DS",
    "gpt-4o-mini": "GPT",
    "claude-haiku-4.5": "Hk",
    "claude-sonnet-4.6": "Sn",
}

# Table 1's bottom rows, stored as task values.
SUMMARY_TASKS: tuple[str, ...] = ("pooled", "macro", "delta_blind")
BLIND = "no-context-blind"
# Table 2's third regime: the mean of Mem0 and A-MEM.
MEM_AVG = "mem-avg"

# Task subsets named by Tables 12 and 13 (usable as ``recompute_pooled_macro(tasks=...)``).
TASK_SUBSETS: dict[str, tuple[str, ...]] = {
    "all": TASKS,
    "aggregation": ("T2", "T6", "T8"),
    "without_T5_T8_T9": tuple(t for t in TASKS if t not in ("T5", "T8", "T9")),
    "without_T3": tuple(t for t in TASKS if t != "T3"),
}

# How many of a unit make one "fraction" unit; used to compare percent with fraction tables.
UNIT_SCALE: dict[str, float] = {"fraction": 1.0, "percent": 100.0, "pp": 100.0}

# --- table specifications -------------------------------------------------------------------

_S = STRATEGIES
_B = BACKBONES


@dataclass(frozen=True)
class TableSpec:
    """What one published-table CSV must look like.

    Attributes:
        number: table number in the paper (1–14).
        name: file stem under data/paper/.
        source: paper section holding the table.
        title: short description.
        columns: column -> kind ("str", "float", "int", "bool"), in file order.
        keys: columns that identify a row (unique per file).
        n_rows: rows the paper prints (after the tidy reshape).
        allowed: column -> allowed values (str/int columns).
        nullable: columns that may be empty (a printed dash, or not applicable).
        kind: "Table", or "Figure" for numbers a figure's caption or text prints.
    """

    number: int
    name: str
    source: str
    title: str
    columns: dict[str, str]
    keys: tuple[str, ...]
    n_rows: int
    allowed: dict[str, tuple] = field(default_factory=dict)
    nullable: frozenset[str] = frozenset()
    kind: str = "Table"

    @property
    def file(self) -> str:
        return f"{self.name}.csv"


_VAL = {"metric": "str", "value": "float", "unit": "str"}

TABLES: dict[str, TableSpec] = {
    spec.name: spec
    for spec in (
        TableSpec(
            1,
            "table01_accuracy",
            "§3 / §5.1",
            "main results: per-task accuracy (%) and Pool./Macro/Δblind rows",
            {"strategy": "str", "backbone": "str", "task": "str", **_VAL},
            ("strategy", "backbone", "task"),
            len(_S) * len(_B) * (len(TASKS) + len(SUMMARY_TASKS)),
            {
                "strategy": _S,
                "backbone": _B,
                "task": TASKS + SUMMARY_TASKS,
                "metric": ("accuracy", "delta_blind"),
                "unit": ("percent", "pp"),
            },
            frozenset({"value"}),
        ),
        TableSpec(
            2,
            "table02_context_lift",
            "§5.1",
            "context lift over same-backbone no-context-blind (pp)",
            {"strategy": "str", "backbone": "str", "task": "str", **_VAL},
            ("strategy", "backbone", "task"),
            3 * len(_B) * (len(TASKS) + 1),
            {
                "strategy": ("full-context", "dense-retrieval", MEM_AVG),
                "backbone": _B,
                "task": TASKS + ("macro",),
                "metric": ("lift_vs_blind",),
                "unit": ("pp",),
            },
        ),
        TableSpec(
            3,
            "table03_t3_preservation",
            "§5.5 (SP4)",
            "equal-input T3 probe: positive-class recall on 19 injected positives",
            {
                "prep": "str",
                "prep_model": "str",
                "strategy": "str",
                "backbone": "str",
                "task": "str",
                **_VAL,
                "n": "int",
            },
            ("prep", "strategy", "backbone"),
            3 * len(_B) + 2 * len(_B),
            {
                "prep": ("deepseek-prepared", "backbone-matched"),
                "prep_model": _B,
                "strategy": ("mem0", "a-mem", "llm-summary"),
                "backbone": _B,
                "task": ("T3",),
                "metric": ("positive_recall",),
                "unit": ("fraction",),
            },
            frozenset({"value"}),
        ),
        TableSpec(
            4,
            "table04_cost",
            "Appendix D",
            "per-cell cost (USD), $/question, input (M) / output (K) tokens, cache hit (%)",
            {"strategy": "str", "backbone": "str", **_VAL},
            ("strategy", "backbone", "metric"),
            (len(_S) * len(_B) + 1) * 5,
            {
                "strategy": _S + ("total",),
                "backbone": _B + ("total",),
                "metric": (
                    "cost_usd",
                    "cost_per_question",
                    "input_tokens",
                    "output_tokens",
                    "cache_hit_rate",
                ),
                "unit": ("USD", "million_tokens", "thousand_tokens", "percent"),
            },
            frozenset({"value"}),
        ),
        TableSpec(
            5,
            "table05_t5_macro_f1",
            "Appendix G.1",
            "T5 macro-F1 per backbone and pooled",
            {"strategy": "str", "backbone": "str", "task": "str", **_VAL, "n": "int"},
            ("strategy", "backbone"),
            len(_S) * (len(_B) + 1),
            {
                "strategy": _S,
                "backbone": _B + ("pooled",),
                "task": ("T5",),
                "metric": ("macro_f1",),
                "unit": ("fraction",),
            },
        ),
        TableSpec(
            6,
            "table06_t8_macro_f1",
            "Appendix G.1",
            "T8 macro-F1 per backbone and pooled",
            {"strategy": "str", "backbone": "str", "task": "str", **_VAL, "n": "int"},
            ("strategy", "backbone"),
            len(_S) * (len(_B) + 1),
            {
                "strategy": _S,
                "backbone": _B + ("pooled",),
                "task": ("T8",),
                "metric": ("macro_f1",),
                "unit": ("fraction",),
            },
        ),
        TableSpec(
            7,
            "table07_power",
            "Appendix G.2",
            "per-task minimum detectable effect (pp)",
            {"task": "str", **_VAL, "n": "int", "assessment": "str"},
            ("task",),
            len(TASKS),
            {
                "task": TASKS,
                "metric": ("mde",),
                "unit": ("pp",),
                "assessment": ("well-powered", "weak", "under-powered"),
            },
        ),
        TableSpec(
            8,
            "table08_t9_parser",
            "Appendix G.3",
            "T9 abstention accuracy, strict vs lenient parser (pooled over backbones)",
            {"strategy": "str", "backbone": "str", "task": "str", "parser": "str", **_VAL},
            ("strategy", "parser"),
            len(_S) * 3,
            {
                "strategy": _S,
                "backbone": ("pooled",),
                "task": ("T9",),
                "parser": ("strict", "lenient", "delta"),
                "metric": ("accuracy", "delta_lenient_minus_strict"),
                "unit": ("fraction",),
            },
        ),
        TableSpec(
            9,
            "table09_t7_parser",
            "Appendix G.3",
            "T7 accuracy, strict vs lenient matcher (pooled over backbones)",
            {"strategy": "str", "backbone": "str", "task": "str", "parser": "str", **_VAL},
            ("strategy", "parser"),
            len(_S) * 3,
            {
                "strategy": _S,
                "backbone": ("pooled",),
                "task": ("T7",),
                "parser": ("strict", "lenient", "delta"),
                "metric": ("accuracy", "delta_lenient_minus_strict"),
                "unit": ("fraction",),
            },
        ),
        TableSpec(
            10,
            "table10_matched_prep",
            "Appendix G.5",
            "DeepSeek-prepared vs backbone-matched agentic memory (20-patient subset)",
            {"backbone": "str", "strategy": "str", "prep": "str", "prep_model": "str", **_VAL},
            ("backbone", "strategy", "metric", "prep"),
            3 * 2 * 3,
            {
                "backbone": _B[1:],
                "strategy": ("mem0", "a-mem"),
                "prep": ("deepseek-prepared", "backbone-matched"),
                "prep_model": _B,
                "metric": ("accuracy", "delta_matched_minus_deepseek"),
                "unit": ("fraction",),
            },
            frozenset({"prep", "prep_model"}),
        ),
        TableSpec(
            11,
            "table11_dense_k",
            "Appendix G.6",
            "dense-retrieval accuracy by top-K (20-patient subset)",
            {
                "strategy": "str",
                "backbone": "str",
                "k": "int",
                "task_subset": "str",
                **_VAL,
            },
            ("backbone", "k"),
            len(_B) * 3,
            {
                "strategy": ("dense-retrieval",),
                "backbone": _B,
                "k": (3, 5, 10),
                "task_subset": ("all",),
                "metric": ("accuracy",),
                "unit": ("fraction",),
            },
        ),
        TableSpec(
            12,
            "table12_summary_budget",
            "Appendix G.6",
            "llm-summary accuracy at 500 vs 1,000 tokens, all tasks and aggregation",
            {
                "strategy": "str",
                "backbone": "str",
                "budget_tokens": "int",
                "task_subset": "str",
                **_VAL,
            },
            ("backbone", "budget_tokens", "task_subset"),
            len(_B) * 4,
            {
                "strategy": ("llm-summary",),
                "backbone": _B,
                "budget_tokens": (500, 1000),
                "task_subset": ("all", "aggregation"),
                "metric": ("accuracy",),
                "unit": ("fraction",),
            },
        ),
        TableSpec(
            13,
            "table13_macro_ablation",
            "Appendix G.7",
            "macro accuracy (mean over backbones) under task-subset ablation",
            {"strategy": "str", "backbone": "str", "task_subset": "str", **_VAL},
            ("strategy", "task_subset"),
            len(_S) * 3,
            {
                "strategy": _S,
                "backbone": ("mean",),
                "task_subset": ("all", "without_T5_T8_T9", "without_T3"),
                "metric": ("macro_accuracy",),
                "unit": ("fraction",),
            },
        ),
        TableSpec(
            14,
            "table14_full_matrix",
            "Appendix I",
            "complete per-task accuracy matrix (288 cells) with n",
            {
                "task": "str",
                "strategy": "str",
                "backbone": "str",
                **_VAL,
                "n": "int",
                "subset": "bool",
            },
            ("task", "strategy", "backbone"),
            len(TASKS) * len(_S) * len(_B),
            {
                "task": TASKS,
                "strategy": _S,
                "backbone": _B,
                "metric": ("accuracy",),
                "unit": ("fraction",),
            },
        ),
    )
}
_BY_NUMBER: dict[int, TableSpec] = {spec.number: spec for spec in TABLES.values()}

# Numbers printed with a figure (not a numbered table): Figure 14 / Appendix C.2 BGE-M3
# hit rates (overall only: the per-task bars are not printed as numbers) and the per-task
# retrieval-eligible n of its caption.
HIT_TASKS: tuple[str, ...] = tuple(f"T{i}" for i in range(1, 9))
CORPUS_FIGURE_FILE = "figure13_corpus.csv"
CORPUS_DISTRIBUTIONS: tuple[str, ...] = (
    "visits_per_patient",
    "dialogue_kchars",
    "questions_per_patient",
)
CORPUS_STATISTICS: tuple[str, ...] = ("median", "mean", "max")

FIGURES: dict[str, TableSpec] = {
    "figure13_corpus": TableSpec(
        13,
        "figure13_corpus",
        "Appendix C.1 (Figure 13)",
        "visits, dialogue length (k chars) and questions per patient: median / mean / max",
        {"distribution": "str", "statistic": "str", "value": "float", "unit": "str"},
        ("distribution", "statistic"),
        len(CORPUS_DISTRIBUTIONS) * len(CORPUS_STATISTICS),
        {
            "distribution": CORPUS_DISTRIBUTIONS,
            "statistic": CORPUS_STATISTICS,
            "unit": ("visits", "thousand_characters", "questions"),
        },
        frozenset(),
        kind="Figure",
    ),
    "figure14_hit_rates": TableSpec(
        14,
        "figure14_hit_rates",
        "Appendix C.2 (Figure 14, §5.6)",
        "BGE-M3 dense-retrieval hit@k of the anchor visit; per-task eligible n",
        {"task": "str", "k": "int", **_VAL},
        ("task", "k", "metric"),
        4 + len(HIT_TASKS) + 1,
        {
            "task": HIT_TASKS + ("all",),
            "k": (1, 3, 5, 10),
            "metric": ("hit_rate", "eligible_n"),
            "unit": ("fraction", "count"),
        },
        frozenset({"k"}),
        kind="Figure",
    ),
}


def list_tables() -> pd.DataFrame:
    """The shipped published tables.

    Returns:
        One row per table: number, name, file, source, title, n_rows.
    """
    return pd.DataFrame(
        [
            {
                "number": s.number,
                "name": s.name,
                "file": s.file,
                "source": s.source,
                "title": s.title,
                "n_rows": s.n_rows,
            }
            for s in sorted(TABLES.values(), key=lambda s: s.number)
        ]
    )


def _resolve(name: str | int) -> TableSpec:
    """Accept 14, "14", "table14" or "table14_full_matrix"."""
    key = str(name).strip()
    if key in TABLES:
        return TABLES[key]
    m = re.fullmatch(r"(?:table)?0*(\d+)", key, flags=re.IGNORECASE)
    if m and int(m.group(1)) in _BY_NUMBER:
        return _BY_NUMBER[int(m.group(1))]
    known = ", ".join(TABLES)
    raise PaperTableError(f"unknown paper table {name!r}; known: {known} (or a number 1-14)")


def _bad(path: Path, msg: str) -> PaperTableError:
    return PaperTableError(f"{path}: {msg}")


def _parse_column(raw: pd.Series, col: str, kind: str, path: Path) -> pd.Series:
    """Convert one text column to its kind; name the first bad line and value on failure."""
    empty = raw.str.strip() == ""
    if kind == "str":
        return raw.str.strip().mask(empty).astype("string")
    if kind == "float":
        out = pd.to_numeric(raw.mask(empty), errors="coerce").astype("float64")
        bad = ~np.isfinite(out) & ~empty
    elif kind == "int":
        num = pd.to_numeric(raw.mask(empty), errors="coerce")
        bad = (num.isna() | (num != np.floor(num))) & ~empty
        out = num.astype("Int64") if not bad.any() else num
    elif kind == "bool":
        low = raw.str.strip().str.lower()
        bad = ~low.isin(["true", "false"]) & ~empty
        out = low.map({"true": True, "false": False})
    else:  # pragma: no cover - spec error, not input error
        raise AssertionError(f"unknown column kind {kind!r}")
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        # +2: header line, then 1-based rows.
        raise _bad(path, f"line {i + 2}: column {col!r} has {raw.iloc[i]!r}, expected {kind}")
    return out


def _validate(df_raw: pd.DataFrame, spec: TableSpec, path: Path) -> pd.DataFrame:
    cols = list(df_raw.columns)
    missing = [c for c in spec.columns if c not in cols]
    extra = [c for c in cols if c not in spec.columns]
    if missing or extra:
        raise _bad(
            path,
            f"columns do not match {spec.kind} {spec.number}: missing {missing}, unexpected {extra}",
        )
    if len(df_raw) != spec.n_rows:
        raise _bad(path, f"has {len(df_raw)} rows; {spec.kind} {spec.number} has {spec.n_rows}")
    out = pd.DataFrame(index=df_raw.index)
    for col, kind in spec.columns.items():
        series = _parse_column(df_raw[col].astype(str), col, kind, path)
        if series.isna().any() and col not in spec.nullable:
            i = int(np.flatnonzero(series.isna().to_numpy())[0])
            raise _bad(path, f"line {i + 2}: column {col!r} is empty")
        if col in spec.allowed:
            ok = series.isna() | series.isin(spec.allowed[col])
            if not ok.all():
                i = int(np.flatnonzero(~ok.to_numpy())[0])
                raise _bad(
                    path,
                    f"line {i + 2}: column {col!r} has {series.iloc[i]!r}; "
                    f"allowed: {', '.join(map(str, spec.allowed[col]))}",
                )
        out[col] = series
    dup = out.duplicated(list(spec.keys), keep=False)
    if dup.any():
        i = int(np.flatnonzero(dup.to_numpy())[0])
        key = {k: out[k].iloc[i] for k in spec.keys}
        raise _bad(path, f"line {i + 2}: duplicate row for {key}")
    for col, kind in spec.columns.items():
        if kind == "int" and not out[col].isna().any():
            out[col] = out[col].astype("int64")
        elif kind == "bool" and not out[col].isna().any():
            out[col] = out[col].astype(bool)
    return out.reset_index(drop=True)


def load_table(name: str | int, data_dir: Path | None = None) -> pd.DataFrame:
    """Load one published table, validated against its specification.

    Args:
        name: file stem ("table14_full_matrix"), "table14", or the table number.
        data_dir: folder holding the CSVs (default ``data/paper/``).

    Returns:
        The table in long format with the columns of :data:`TABLES` ``[name].columns``:
        strings as pandas "string", ``value`` float64 (NaN = a printed dash), counts int64.

    Raises:
        PaperTableError: unknown name, missing file, or malformed content (names the file,
            line, column and value).
    """
    return _load_spec(_resolve(name), data_dir)


def load_figure(name: str = "figure14_hit_rates", data_dir: Path | None = None) -> pd.DataFrame:
    """Load the numbers printed with a figure (see :data:`FIGURES`), validated like a table.

    Raises:
        PaperTableError: unknown name, missing file, or malformed content.
    """
    if name not in FIGURES:
        raise PaperTableError(f"unknown paper figure {name!r}; known: {', '.join(FIGURES)}")
    return _load_spec(FIGURES[name], data_dir)


def _load_spec(spec: TableSpec, data_dir: Path | None) -> pd.DataFrame:
    """Read one published table's or figure's CSV and validate it against ``spec``."""
    path = Path(data_dir or PAPER_DATA_DIR) / spec.file
    if not path.is_file():
        what = spec.kind.lower()
        raise PaperTableError(f"published {what} {spec.number} missing: {path} does not exist")
    try:
        raw = pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise _bad(path, f"not a readable CSV ({exc})") from None
    return _validate(raw, spec, path)


# --- consistency helpers (used by notebook 12) ------------------------------------------------


def _require(df: pd.DataFrame, cols: Iterable[str], what: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise PaperTableError(f"{what} lacks column(s) {missing}; has {list(df.columns)}")


def _uniform_unit(df: pd.DataFrame) -> str | None:
    if "unit" not in df.columns:
        return None
    units = df["unit"].dropna().unique()
    if len(units) > 1:
        raise PaperTableError(f"per-task cells mix units {sorted(map(str, units))}")
    return str(units[0]) if len(units) else None


def _order(values: Iterable[str], canonical: Sequence[str]) -> list[str]:
    seen = list(dict.fromkeys(values))
    return [v for v in canonical if v in seen] + [v for v in seen if v not in canonical]


def recompute_pooled_macro(
    per_task: pd.DataFrame,
    task_n: Mapping[str, int] | None = None,
    tasks: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Recompute Table 1's Pool., Macro and Δblind rows from per-task cells.

    Pooled = sum(acc_t * n_t) / sum(n_t) over ``tasks`` (weights :data:`TASK_N`); macro =
    unweighted mean over ``tasks``; delta_blind = macro minus the same-backbone
    no-context-blind macro (NaN when that backbone has no blind cells). Rows whose task is
    not in ``tasks`` (e.g. Table 1's own summary rows) are ignored.

    Args:
        per_task: columns strategy, backbone, task, value (+ optional unit), one row per
            (strategy, backbone, task); e.g. ``load_table(14)`` or ``load_table(1)``.
        task_n: per-task weights for pooling (default :data:`TASK_N`).
        tasks: tasks to include (default T1–T9; see :data:`TASK_SUBSETS`).

    Returns:
        Columns strategy, backbone, task ("pooled" / "macro" / "delta_blind"), metric,
        value, unit — in the input's scale (delta_blind unit "pp" for percent input).
    """
    _require(per_task, ("strategy", "backbone", "task", "value"), "per_task")
    tasks = tuple(tasks or TASKS)
    weights = dict(task_n or TASK_N)
    no_weight = [t for t in tasks if t not in weights]
    if no_weight:
        raise PaperTableError(f"no task size for {no_weight} in task_n")
    unit = _uniform_unit(per_task[per_task["task"].isin(tasks)])
    cells = per_task.loc[per_task["task"].isin(tasks), ["strategy", "backbone", "task", "value"]]
    cells = cells.astype({"strategy": str, "backbone": str, "task": str})
    values = pd.to_numeric(cells["value"], errors="coerce")
    if values.isna().any():
        row = cells[values.isna()].iloc[0]
        raise PaperTableError(
            f"per-task value missing or not numeric for ({row.strategy}, {row.backbone}, "
            f"{row.task}): {row.value!r}"
        )
    cells = cells.assign(value=values.astype(float))
    dup = cells.duplicated(["strategy", "backbone", "task"], keep=False)
    if dup.any():
        row = cells[dup].iloc[0]
        raise PaperTableError(
            f"more than one per-task cell for ({row.strategy}, {row.backbone}, {row.task})"
        )
    wide = cells.pivot(index=["strategy", "backbone"], columns="task", values="value")
    for t in tasks:
        if t not in wide.columns:
            wide[t] = np.nan
    wide = wide[list(tasks)]
    if wide.isna().any().any():
        (st, bb), t = next(
            (idx, t) for idx, row in wide.iterrows() for t in tasks if pd.isna(row[t])
        )
        raise PaperTableError(f"per-task cell missing for ({st}, {bb}, {t})")
    # The arithmetic lives in metrics.summary_rows, which takes proportions in [0, 1].
    # Pooled and macro are affine in the cell values (weights sum to 1), so map the values
    # affinely into [0, 1] and back: exact for percent, fraction or any other scale.
    lo = min(0.0, float(cells["value"].min()))
    scale = max(1.0, float(cells["value"].max()) - lo)
    try:
        rows = summary_rows(
            cells.assign(accuracy=(cells["value"] - lo) / scale),
            task_n={t: weights[t] for t in tasks},
            baseline=BLIND,
        )
    except MetricsInputError as exc:
        raise PaperTableError(str(exc)) from None
    summary = rows[["strategy", "backbone"]].assign(
        pooled=rows["pooled"] * scale + lo,
        macro=rows["macro"] * scale + lo,
        # summary_rows leaves the baseline's own Δblind empty (the paper's dash); here it is
        # the baseline minus itself.
        delta_blind=np.where(rows["strategy"] == BLIND, 0.0, rows["delta_blind"] * scale),
    )

    long = summary.melt(
        id_vars=["strategy", "backbone"],
        value_vars=list(SUMMARY_TASKS),
        var_name="task",
        value_name="value",
    )
    long["metric"] = np.where(long["task"] == "delta_blind", "delta_blind", "accuracy")
    delta_unit = "pp" if unit == "percent" else unit
    long["unit"] = np.where(long["task"] == "delta_blind", delta_unit, unit)
    long["unit"] = long["unit"].astype("string")
    order_s = _order(long["strategy"], STRATEGIES)
    order_b = _order(long["backbone"], BACKBONES)
    long = long.assign(
        _s=long["strategy"].map(order_s.index),
        _b=long["backbone"].map(order_b.index),
        _t=long["task"].map(SUMMARY_TASKS.index),
    ).sort_values(["_t", "_s", "_b"])
    cols = ["strategy", "backbone", "task", "metric", "value", "unit"]
    return long[cols].reset_index(drop=True)


def _scale_to(df: pd.DataFrame, target_unit: pd.Series) -> pd.Series:
    """Values of ``df`` expressed in ``target_unit`` (fraction <-> percent/pp)."""
    src = df["unit"].astype(str)
    dst = target_unit.astype(str)
    same = src == dst
    known = src.isin(list(UNIT_SCALE)) & dst.isin(list(UNIT_SCALE))
    if not (same | known).all():
        i = int(np.flatnonzero(~(same | known).to_numpy())[0])
        raise PaperTableError(f"cannot compare unit {src.iloc[i]!r} with {dst.iloc[i]!r}")
    factor = np.where(same, 1.0, dst.map(UNIT_SCALE).fillna(1.0) / src.map(UNIT_SCALE).fillna(1.0))
    return df["value"].astype(float) * factor


def compare_reported(
    recomputed: pd.DataFrame,
    reported: pd.DataFrame,
    tol: float,
    keys: Sequence[str] | None = None,
) -> pd.DataFrame:
    """List every printed number that differs from its recomputation by more than ``tol``.

    Rows are matched on ``keys`` (default: the columns both frames share except value,
    unit and n); only rows present in both are compared, and a reported NaN (a printed
    dash) is not a discrepancy. When both frames carry a ``unit`` column, recomputed values
    are converted to the reported unit (fraction x100 = percent / pp).

    Choose ``tol`` from the printed precision: e.g. Table 14 (3-decimal fractions) against
    Table 1 (integer percent) can differ by rounding alone by up to 0.5 + 0.05 = 0.55.

    Args:
        recomputed: frame with the key columns and value (+ unit).
        reported: frame with the key columns and value (+ unit), e.g. ``load_table(1)``.
        tol: largest difference (in the reported unit) still attributed to rounding.
        keys: matching columns (default as above).

    Returns:
        One row per discrepancy, largest first: key columns, recomputed, reported,
        diff (reported - recomputed), abs_diff, and unit when known.
    """
    if not np.isfinite(tol) or tol < 0:
        raise PaperTableError(f"tol must be a finite number >= 0, got {tol!r}")
    _require(recomputed, ("value",), "recomputed")
    _require(reported, ("value",), "reported")
    if keys is None:
        skip = {"value", "unit", "n"}
        keys = [c for c in reported.columns if c in recomputed.columns and c not in skip]
    keys = list(keys)
    if not keys:
        raise PaperTableError("no common key columns to match recomputed and reported rows")
    _require(recomputed, keys, "recomputed")
    _require(reported, keys, "reported")
    has_unit = "unit" in recomputed.columns and "unit" in reported.columns
    left = recomputed[keys + ["value"] + (["unit"] if has_unit else [])]
    right = reported[keys + ["value"] + (["unit"] if has_unit else [])]
    for what, frame in (("recomputed", left), ("reported", right)):
        dup = frame.duplicated(keys, keep=False)
        if dup.any():
            row = frame[dup].iloc[0]
            key = {k: row[k] for k in keys}
            raise PaperTableError(f"{what} has more than one row for {key}; pass keys=")
    norm = {k: str for k in keys}
    merged = left.astype(norm).merge(right.astype(norm), on=keys, suffixes=("_rec", "_rep"))
    if merged.empty:
        raise PaperTableError(f"recomputed and reported share no rows on keys {keys}")
    if has_unit:
        rec = _scale_to(
            merged.rename(columns={"value_rec": "value", "unit_rec": "unit"}), merged["unit_rep"]
        )
    else:
        rec = merged["value_rec"].astype(float)
    rep = pd.to_numeric(merged["value_rep"], errors="coerce")
    out = merged[keys].copy()
    out["recomputed"] = rec.to_numpy()
    out["reported"] = rep.to_numpy()
    out["diff"] = out["reported"] - out["recomputed"]
    out["abs_diff"] = out["diff"].abs()
    if has_unit:
        out["unit"] = merged["unit_rep"].astype("string").to_numpy()
    # Slack for binary floating point: 0.55 - 0.5 must not count as a discrepancy.
    flagged = out["reported"].notna() & (out["abs_diff"] > tol + 1e-9)
    out = out[flagged].sort_values(["abs_diff"] + keys, ascending=[False] + [True] * len(keys))
    return out.reset_index(drop=True)


# --- Fig. 13 (Appendix C.1): corpus statistics printed in the text ---------------------------


def load_corpus_figure(data_dir: Path | None = None) -> pd.DataFrame:
    """Fig. 13's statistics (Appendix C.1, n = 385 dialogues): distribution, statistic, value,
    unit — one row per (distribution, statistic), nine in all (``load_figure``'s checks).
    """
    return load_figure("figure13_corpus", data_dir)
