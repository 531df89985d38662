"""The numbers the paper's text quotes (abstract, §1, §3–§6, table captions, Appendices C–G),
checked against its published tables: a table of claims (:data:`CLAIMS`) checked by one loop
(:func:`audit_text_claims`).

Each :class:`Claim` records where the paper prints a number (``source``), what it prints
(``claimed``), how to compute ours from the published tables (``ours``, a function of the
:class:`Evidence` built once from the tables), the unit, and the tolerance the printing
precision explains. The loop turns every claim into audit rows (:func:`.audit.check_rows`);
nothing is corrected: a claim that misses its recomputation by more than ``tol`` is flagged.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from clinlib.analysis.paper import BACKBONES
from clinlib.analysis.paper_figures import recompute
from clinlib.analysis.paper_figures.cells import (
    SP2_TEXT,
    SP2_VERSIONS,
    accuracy_cube,
    cell_summary,
    need_table,
)
from clinlib.analysis.paper_figures.claim_record import Claim, Evidence, claim_rows

DS, GPT, HK, SN = BACKBONES

# --- numbers quoted in the text -------------------------------------------------------------

# §5.1: full-context pooled accuracy (pp), DeepSeek / GPT-4o-mini / Haiku / Sonnet.
TEXT_FULL_POOLED_PP: dict[str, float] = {DS: 67.2, GPT: 63.0, HK: 70.6, SN: 69.8}
# Per-task accuracy ranges quoted in the text: (source, strategy, task, backbones, low, high);
# backbones None = all four.
TEXT_TASK_RANGES: tuple[tuple, ...] = (
    ("§5.2", "full-context", "T8", None, 0.269, 0.470),
    ("§5.2", "mem0", "T8", None, 0.291, 0.373),
    ("§5.2", "a-mem", "T8", None, 0.291, 0.373),
    ("§5.2", "llm-summary", "T8", None, 0.194, 0.254),
    ("§5.2", "full-context", "T7", (DS, HK, SN), 0.942, 0.965),
    ("§5.2", "mem0", "T7", None, 0.535, 0.733),
    ("§5.2", "llm-summary", "T7", None, 0.349, 0.512),
    ("§5.5", "full-context", "T3", None, 0.869, 0.938),
    ("§5.5", "last-visit-only", "T3", None, 0.769, 0.869),
    ("§5.5", "dense-retrieval", "T3", None, 0.769, 0.869),
    ("§6", "structured-timeline", "T1", None, 0.886, 0.923),
)
# Pooled-accuracy ranges quoted in the text: (source, strategies, low, high, tol).
TEXT_POOLED_RANGES: tuple[tuple, ...] = (
    ("§5.1", ("dense-retrieval",), 0.604, 0.697, 0.0005),
    ("§5.1", ("structured-timeline",), 0.584, 0.596, 0.0005),
    ("§5.1", ("mem0", "a-mem"), 0.508, 0.559, 0.0005),
    ("§5.1", ("llm-summary", "last-visit-only"), 0.416, 0.495, 0.0005),
    ("§5.6", ("structured-timeline",), 0.58, 0.60, 0.005),
)
# §5.4: T9 abstention per backbone (DS / GPT / Hk / Sn).
TEXT_T9: dict[str, tuple[float, float, float, float]] = {
    "no-context-blind": (0.355, 0.685, 0.000, 0.204),
    "full-context": (0.701, 0.698, 0.907, 0.747),
    "last-visit-only": (0.883, 0.895, 0.994, 0.926),
}
# Table 5 caption: majority-class macro-F1 on T5.
T5_MAJORITY_F1 = 0.478
# Tables the claims read (6 is optional: its T8 macro-F1 is checked when given).
CLAIM_TABLES: tuple[int, ...] = (1, 3, 4, 5, 8, 10, 12, 14)


def _pooled_and_gap_claims() -> list[Claim]:
    """§5.1 full-context pooled and the §5.3 SP2 blind / full / gap values."""
    sp2_values = {}
    for b, (blind, full, _) in SP2_TEXT.items():
        sp2_values[f"blind × {b}"] = blind
        sp2_values[f"full-context × {b}"] = full
    sp2_gaps_pp = {b: v[2] for b, v in SP2_TEXT.items()}
    out = [
        Claim(
            "text_full_pooled_vs_table1",
            "§5.1",
            "full-context × {}",
            TEXT_FULL_POOLED_PP,
            recompute.full_pooled_pp("reported"),
            0.55,
            "percent",
            note="Table 1 Pool. (integer %)",
        ),
        Claim(
            "text_full_pooled_vs_table14",
            "§5.1",
            "full-context × {}",
            TEXT_FULL_POOLED_PP,
            recompute.full_pooled_pp("recomputed"),
            0.1,
            "percent",
            note="pooled from Table 14 (§3 sizes)",
        ),
    ]
    for version, table, tol, gap_tol in (
        (SP2_VERSIONS[1], "table1", 0.0055, 1.05),
        (SP2_VERSIONS[2], "table14", 0.001, 0.15),
    ):
        out += [
            Claim(
                f"sp2_text_vs_{table}",
                "§5.3",
                None,
                sp2_values,
                recompute.sp2_pooled(version),
                tol,
                "fraction",
                note=version,
            ),
            Claim(
                f"sp2_gap_vs_{table}",
                "§5.3",
                "gap {}",
                sp2_gaps_pp,
                recompute.sp2_gap(version),
                gap_tol,
                "pp",
                note=f"full - blind, {version}",
            ),
        ]
    out.append(
        Claim(
            "sp2_gap_arithmetic",
            "§5.3",
            "gap {}",
            sp2_gaps_pp,
            lambda ev: pd.Series({b: 100 * (v[1] - v[0]) for b, v in SP2_TEXT.items()}),
            0.1,
            "pp",
            note="text full - text blind",
        )
    )
    return out


def _range_claims() -> list[Claim]:
    """Pooled ranges (§5.1 / §5.6) against both pooled versions; per-task ranges (§5.2–§6)."""
    out = []
    for source, strategies, low, high, tol in TEXT_POOLED_RANGES:
        name = " / ".join(strategies)
        items = (f"{name} pooled low", f"{name} pooled high")
        out += [
            Claim(
                "text_pooled_range_vs_table1",
                source,
                items,
                (low, high),
                recompute.pooled_range(strategies, "reported"),
                max(tol, 0.0055),
                "fraction",
                note="Table 1 Pool.",
            ),
            Claim(
                "text_pooled_range_vs_table14",
                source,
                items,
                (low, high),
                recompute.pooled_range(strategies, "recomputed"),
                tol + 0.0005,
                "fraction",
                note="pooled from Table 14",
            ),
        ]
    for source, strategy, task, backbones, low, high in TEXT_TASK_RANGES:
        over = "all backbones" if backbones is None else "/".join(backbones)
        out.append(
            Claim(
                "text_task_range_vs_table14",
                source,
                (f"{strategy} {task} low", f"{strategy} {task} high"),
                (low, high),
                recompute.task_range(strategy, task, backbones),
                0.0005,
                "fraction",
                note=f"Table 14 {task} over {over}",
            )
        )
    return out


def _abstention_claims() -> list[Claim]:
    """§5.5's constant T3 'No'; §5.4's T9 per cell, margins, Table 8 pools; G.4's share."""
    out = [
        Claim(
            "text_t3_constant_no",
            "§5.5",
            None,
            0.5,
            recompute.upstream_t3,
            0.0005,
            "fraction",
            note="Table 14 T3 (the text: 'No' on all 600 questions in all 16 cells)",
        ),
    ]
    for strategy, values in TEXT_T9.items():
        out.append(
            Claim(
                "text_t9_vs_table14",
                "§5.4",
                f"{strategy} × " + "{}",
                dict(zip(BACKBONES, values, strict=True)),
                lambda ev, s=strategy: ev.acc(s, "T9"),
                0.0005,
                "fraction",
                note="Table 14 T9",
            )
        )
    table8_items = (
        "last-visit strict",
        "full-context strict",
        "Δ strict",
        "last-visit lenient",
        "full-context lenient",
        "Δ lenient",
    )
    return out + [
        Claim(
            "text_t9_last_visit_margin",
            "§5.4",
            ("last-visit - full T9 smallest", "last-visit - full T9 largest"),
            (5.0, 30.0),
            recompute.t9_margin,
            0.5,
            "pp",
            relation=(">=", "<="),
            note="Table 14 T9 per backbone ('by 5–30 pp')",
        ),
        Claim(
            "text_t9_pooled_vs_table8",
            "§5.4",
            table8_items,
            (0.924, 0.763, 0.161, 0.930, 0.838, 0.092),
            recompute.t9_pooled_table8,
            0.0005,
            "fraction",
            note="Table 8 (pooled over backbones)",
        ),
        # 36% fabricated values; 93% of the 36% 'other' are parser-missed abstentions.
        Claim(
            "text_g4_fabricated_share",
            "§5.4 / G.4",
            ("fabricated values among genuine over-answers",),
            54.0,
            lambda ev: 100 * 0.36 / (1 - 0.36 * 0.93),
            1.0,
            "percent",
            note="36 / (100 - 36 x 0.93)",
        ),
    ]


def _strategy_claims() -> list[Claim]:
    """§5.2's GPT T2 lift, §6's dense-vs-full gaps, the Table 5 caption and §5.1 macro-F1."""
    beats = ("full-context", "dense-retrieval", "structured-timeline")
    compressed = ("mem0", "a-mem", "llm-summary")
    out = [
        Claim(
            "text_gpt_t2_summary_lift",
            "§5.2",
            ("llm-summary × gpt-4o-mini T2 lift",),
            -7.8,
            recompute.gpt_t2_lift,
            0.1,
            "pp",
        ),
    ]
    for version, table in (("reported", "table1"), ("recomputed", "table14")):
        out.append(
            Claim(
                f"text_dense_pooled_gap_vs_{table}",
                "§5.1 / §6",
                ("full - dense pooled smallest", "full - dense pooled largest"),
                (1.0, 4.0),
                recompute.dense_pooled_gap(version),
                0.5,
                "pp",
                relation=(">=", "<="),
                note="Table 1 Pool." if version == "reported" else "pooled from Table 14",
            )
        )
    return out + [
        Claim(
            "text_dense_task_gap",
            "§6",
            None,
            9.0,
            recompute.dense_task_gap,
            0.5,
            "pp",
            relation="<=",
        ),
        Claim(
            "text_t5_beats_majority",
            "Table 5 caption",
            "{} lowest backbone macro-F1",
            dict.fromkeys(beats, T5_MAJORITY_F1),
            recompute.t5_lowest,
            0.0,
            "fraction",
            relation=">=",
            note="'exceed the baseline on every backbone'",
        ),
        Claim(
            "text_t5_compressed_do_not",
            "Table 5 caption",
            "{} lowest backbone macro-F1",
            dict.fromkeys(compressed, T5_MAJORITY_F1),
            recompute.t5_lowest,
            0.0,
            "fraction",
            relation="<=",
            note="'the compressed strategies do not' (exceed it on every backbone)",
        ),
        Claim(
            "text_macro_f1",
            "§5.1",
            None,
            {
                "T5 full-context": 0.695,
                "T5 dense-retrieval": 0.736,
                "T5 structured-timeline": 0.656,
                "T8 structured-timeline": 0.523,
            },
            recompute.pooled_macro_f1,
            0.0005,
            "fraction",
            note="Tables 5/6 pooled",
        ),
    ]


def _appendix_claims() -> list[Claim]:
    """Table 10 / 3 / 12 / 14 extremes quoted in §5.1, §5.5, captions and G.1."""
    return [
        Claim(
            "text_matched_prep_range",
            "§5.1 / Limitations",
            ("matched-prep Δ largest", "matched-prep Δ smallest"),
            (-0.045, -0.244),
            recompute.matched_prep_range,
            0.0005,
            "fraction",
            note="Table 10 Δ",
        ),
        Claim(
            "text_t3_best_recall",
            "§5.5",
            ("best equal-input recall (1/19)",),
            1 / 19,
            lambda ev: ev.tables[3]["value"].dropna().max(),
            0.0005,
            "fraction",
            note="Table 3 maximum",
        ),
        Claim(
            "text_table12_caption",
            "Table 12 caption",
            ("aggregation low", "aggregation high", "backbones where 1,000 tokens lowers 'all'"),
            (0.185, 0.304, 3),
            recompute.table12_caption,
            0.0005,
            "mixed",
            note="Table 12",
        ),
        Claim(
            "text_t6_best_cell",
            "G.1",
            ("best T6 cell",),
            0.609,
            lambda ev: float(ev.cube.loc[ev.cube["task"] == "T6", "accuracy"].max()),
            0.0005,
            "fraction",
            note="Table 14 T6 maximum",
        ),
    ]


def _cost_and_count_claims() -> list[Claim]:
    """Costs (abstract, §1, §4, §5.6, §6, Fig. 16) vs Table 4; counts and CI half-widths (§3)."""
    where = "abstract / §1 / §5.6 / §6 / captions"
    return [
        # Dollar figures to the cent; the Total may differ from the cell sum by 32 half-cents.
        Claim(
            "text_cost_vs_table4",
            where,
            (
                "full-context × claude-sonnet-4.6 (abstract, §5.6, §6: $106.21)",
                "full-context × claude-haiku-4.5 ($25.76)",
                "total spend (§1: $527.85) vs Table 4 Total",
            ),
            (106.21, 25.76, 527.85),
            recompute.quoted_costs,
            0.005,
            "USD",
            note=("Table 4", "Table 4", "Table 4 Total"),
        ),
        Claim(
            "text_cost_vs_table4",
            where,
            ("Table 4 Total ($527.87) vs sum of cells",),
            recompute.table4_total_cost,
            lambda ev: recompute.table4(ev, "cost_usd").sum(),
            32 * 0.005,
            "USD",
            note="sum of the 32 cells (rounding allows ±0.16)",
        ),
        Claim(
            "text_cost_vs_table4",
            where,
            (
                "cheapest cell $/q (Fig. 16: DeepSeek × blind $0.00003)",
                "most expensive cell $/q (Fig. 16: Sonnet × full $0.0169)",
            ),
            (0.00003, 0.0169),
            recompute.cost_per_question_extremes,
            (0.000005, 0.00005),
            "USD",
        ),
        # 32 cells x (0.05 M input rounding x 35% + 0.05% rate rounding x 45 M)
        Claim(
            "text_cache_tokens",
            "§4",
            ("cache-read tokens (90.7 M)",),
            90.7,
            recompute.cached_tokens,
            1.3,
            "million_tokens",
            note="Σ input x cache-hit % over Table 4 cells (rounding allows ~±1.3 M)",
        ),
        Claim(
            "text_counts",
            "abstract / C.2",
            ("predictions (200,672)", "retrieval-eligible questions (C.2 text: 1,177)"),
            (200_672, 1_177),
            recompute.counts,
            0.0,
            "count",
            note=("32 cells x 6,271", "Σ T1–T8 sizes = Fig. 14 caption's and §5.6's 4,771"),
        ),
        Claim(
            "text_wilson_half_width",
            "§3",
            ("pooled ±0.6 pp", "T1/T9 ±1.3 pp", "T4 ±9 pp"),
            (0.6, 1.3, 9.0),
            recompute.wilson_half_widths,
            (0.05, 0.05, 0.5),
            "pp",
            note="Wilson 95% at p = 0.5 with n = 4 backbones x task size (the reading under "
            "which the pooled and T1/T9 figures hold; one cell of 53 gives ±13 pp)",
        ),
    ]


CLAIMS: tuple[Claim, ...] = (
    *_pooled_and_gap_claims(),
    *_range_claims(),
    *_abstention_claims(),
    *_strategy_claims(),
    *_appendix_claims(),
    *_cost_and_count_claims(),
)


def audit_text_claims(
    tables: Mapping[int, pd.DataFrame], summary: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Every claim of :data:`CLAIMS` against the tables. Needs :data:`CLAIM_TABLES` (Table 6
    optional).

    Args:
        tables: the published tables.
        summary: :func:`.cells.cell_summary` output, reused when given.

    Returns:
        Audit rows; ``source`` names the section, ``note`` what the recomputation uses.
    """
    for n in CLAIM_TABLES:
        need_table(tables, n, ("value",))
    summary = cell_summary(tables) if summary is None else summary
    ev = Evidence(tables, accuracy_cube(tables), summary)
    return pd.concat([claim_rows(c, ev) for c in CLAIMS], ignore_index=True)
