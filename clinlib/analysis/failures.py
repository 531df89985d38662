"""Failure explorer: filter predictions, open one, and see why it failed — the question, gold,
raw response, parsed answer, the exact context the model saw with the anchor event ids
highlighted (or marked absent from that representation), the same question under the other
strategies, and the paired "flips" (right under one strategy, wrong under another). Implements
the paper's failure analysis (§5 "Where do representations fail", the compression-loss
discussion behind Table 2 / Fig. 3, and the McNemar pairing of §3).

Three front ends share the same pure renderers (as :mod:`clinlib.dialogue.viewer` does):

- :func:`failure_explorer` — an ipywidgets explorer for JupyterLab;
- :func:`show_failure_explorer` — that explorer plus a static HTML rendering in the same
  output, so a notebook run headless (nbmake) still shows a readable failure;
- ``notebooks/apps/failure_explorer.py`` — the same explorer as a marimo app.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import altair as alt
import pandas as pd

from clinlib.analysis.stats import pairwise_mcnemar
from clinlib.core.pages import PAGE_SIZE, clip_context, page_count, page_of
from clinlib.dialogue.viewer import ViewerDisplay, kind_of

FILTER_COLUMNS: tuple[str, ...] = ("task", "subtype", "strategy", "backbone", "setting")
OUTCOMES: tuple[str, ...] = ("any", "correct", "incorrect", "parse-failed")
REQUIRED_COLUMNS: tuple[str, ...] = (
    "qid", "task", "subtype", "strategy", "backbone", "setting", "response", "parsed",
    "correct", "parse_failed",
)  # fmt: skip
FLIP_COLUMNS: tuple[str, ...] = (
    "qid", "task", "subtype", "backbone", "setting", "good", "bad", "parsed_good",
    "parsed_bad", "response_bad",
)  # fmt: skip
STATIC_ENV = "CLINTRACE_STATIC_VIEWER"
# Bracketed id groups as every id-carrying representation writes them: "[LAB-1, RX-2-3]".
TAG_RE = re.compile(r"\[((?:[A-Z]+-[\d-]+)(?:\s*,\s*[A-Z]+-[\d-]+)*)\]")
ANCHOR_COLOR = "#d62728"
NO_ANCHOR_TEXT = (
    "This question has no anchor event: the fact is absent from the record by construction, "
    "so the correct answer is an abstention."
)
ABSENT_TEXT = (
    "Anchor event(s) {ids} are ABSENT from this representation: the model could not have "
    "read the answer here."
)
PRESENT_TEXT = "Anchor event(s) {ids} present in this representation ({n} mention(s))."
NO_CONTEXT_TEXT = "Empty context (this strategy shows the model no history)."
_CSS = (
    "<style>.ct-fx{font-family:DejaVu Sans,sans-serif;font-size:13px;line-height:1.45}"
    ".ct-fx pre{white-space:pre-wrap;max-height:420px;overflow:auto;background:#fafafa;"
    "border:1px solid #ddd;padding:6px;font-size:12px}.ct-fx table{border-collapse:collapse}"
    ".ct-fx td,.ct-fx th{border:1px solid #ddd;padding:2px 6px;font-size:12px}"
    ".ct-anchor{background:#d6272833;border-bottom:2px solid #d62728;font-weight:bold}"
    ".ct-ok{color:#2ca02c}.ct-bad{color:#d62728}</style>"
)


class FailureExplorerError(ValueError):
    """Predictions / questions given to the failure explorer are unusable (names the column
    or value)."""


# -- filtering and flips ---------------------------------------------------------------------


def _require(df: pd.DataFrame, cols: Iterable[str], what: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise FailureExplorerError(f"{what} lacks column(s) {missing}; has {list(df.columns)}")


def _as_list(value: Any) -> list:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    try:
        return [v for v in value if v is not None]
    except TypeError:
        return [value]


def filter_predictions(
    preds: pd.DataFrame,
    task: str | Sequence[str] | None = None,
    subtype: str | Sequence[str] | None = None,
    strategy: str | Sequence[str] | None = None,
    backbone: str | Sequence[str] | None = None,
    setting: str | Sequence[str] | None = None,
    outcome: str = "any",
) -> pd.DataFrame:
    """Predictions matching every given filter.

    Args:
        preds: predictions (``runner.load_predictions``).
        task, subtype, strategy, backbone, setting: one value or several (None = all).
        outcome: ``any``, ``correct``, ``incorrect`` or ``parse-failed``.

    Returns:
        The matching rows (index reset), ordered by task, qid, strategy, backbone, setting.

    Raises:
        FailureExplorerError: a missing column, an unknown outcome, or a filter value that
            never occurs in its column.
    """
    _require(preds, REQUIRED_COLUMNS, "predictions")
    if outcome not in OUTCOMES:
        raise FailureExplorerError(f"outcome {outcome!r} not one of {OUTCOMES}")
    mask = pd.Series(True, index=preds.index)
    given = dict(task=task, subtype=subtype, strategy=strategy, backbone=backbone,
                 setting=setting)  # fmt: skip
    for col, value in given.items():
        wanted = _as_list(value)
        if not wanted:
            continue
        known = set(preds[col].dropna().astype(str))
        unknown = [v for v in wanted if str(v) not in known]
        if unknown:
            raise FailureExplorerError(
                f"{col} value(s) {unknown} do not occur in the predictions; known: {sorted(known)}"
            )
        mask &= preds[col].astype(str).isin([str(v) for v in wanted]).fillna(False)
    correct = preds["correct"].fillna(False).astype(bool)
    if outcome == "correct":
        mask &= correct
    elif outcome == "incorrect":
        mask &= ~correct
    elif outcome == "parse-failed":
        mask &= preds["parse_failed"].fillna(False).astype(bool)
    out = preds[mask.astype(bool)]
    return out.sort_values(["task", "qid", "strategy", "backbone", "setting"]).reset_index(
        drop=True
    )


def missing_predictions(
    preds: pd.DataFrame,
    questions: pd.DataFrame,
    strategies: Sequence[str],
    backbones: Sequence[str],
    settings: Sequence[str],
) -> int:
    """How many (qid, strategy, backbone, setting) predictions are still missing — a cheap
    check so a notebook only calls ``runner.run`` (which rebuilds every context before it
    skips done keys) when there is work to do."""
    from clinlib.eval.runner import setting_questions

    _require(preds, ("qid", "strategy", "backbone", "setting"), "predictions")
    done = set(zip(preds["qid"], preds["strategy"], preds["backbone"], preds["setting"],
                   strict=True))  # fmt: skip
    want = {
        (q, s, b, st)
        for st in settings
        for q in setting_questions(questions, st)["qid"]
        for s in strategies
        for b in backbones
    }
    return len(want - done)


def _without_errors(preds: pd.DataFrame) -> pd.DataFrame:
    # A transport error is not a reasoning failure: it must not count as a flip.
    if "error" not in preds.columns:
        return preds
    err = preds["error"]
    return preds[err.isna() | (err.astype(str) == "")]


def flips(
    preds: pd.DataFrame,
    good: str = "full-context",
    bad: str = "mem0",
    *,
    include_errors: bool = False,
) -> pd.DataFrame:
    """Paired flips: questions answered correctly under ``good`` and wrongly under ``bad``,
    same backbone and setting (the ``b`` cell of the paper's McNemar table, §3).

    Args:
        preds: predictions.
        good: the strategy that got it right.
        bad: the strategy that got it wrong.
        include_errors: count rows with a transport error (default: dropped).

    Returns:
        One row per flip: :data:`FLIP_COLUMNS`, ordered by task and qid.

    Raises:
        FailureExplorerError: a missing column, an unknown strategy, or a strategy with more
            than one row per (qid, backbone, setting) (filter ``prep_model`` first).
    """
    _require(preds, REQUIRED_COLUMNS, "predictions")
    known = set(preds["strategy"].dropna().astype(str))
    for name in (good, bad):
        if name not in known:
            raise FailureExplorerError(
                f"strategy {name!r} does not occur in the predictions; known: {sorted(known)}"
            )
    p = preds if include_errors else _without_errors(preds)
    key = ["qid", "backbone", "setting"]
    sides = {}
    for role, name in (("good", good), ("bad", bad)):
        side = p[p["strategy"] == name]
        dup = side.duplicated(key, keep=False)
        if dup.any():
            row = side.loc[dup, key].iloc[0].to_dict()
            raise FailureExplorerError(
                f"strategy {name!r} has several rows for {row} (different prep_model?); "
                "filter the predictions to one prep_model first"
            )
        sides[role] = side
    g = sides["good"][[*key, "task", "subtype", "parsed", "correct"]]
    b = sides["bad"][[*key, "parsed", "response", "correct"]]
    m = g.merge(b, on=key, suffixes=("_good", "_bad"))
    m = m[m["correct_good"].fillna(False).astype(bool) & ~m["correct_bad"].fillna(False)
          .astype(bool)]  # fmt: skip
    out = m.rename(columns={"response": "response_bad"}).assign(good=good, bad=bad)
    return out[list(FLIP_COLUMNS)].sort_values(["task", "qid"]).reset_index(drop=True)


def only_flip_rows(rows: pd.DataFrame, flipped: pd.DataFrame, bad: str = "mem0") -> pd.DataFrame:
    """The rows of ``rows`` that are the ``bad`` side of a flip in ``flipped`` (same qid,
    backbone and setting), order kept, index reset."""
    key = ["qid", "backbone", "setting"]
    if rows.empty or flipped.empty:
        return rows.iloc[:0].reset_index(drop=True)
    hit = (
        pd.MultiIndex.from_frame(rows[key].astype(str)).isin(
            pd.MultiIndex.from_frame(flipped[key].astype(str))
        )
        & (rows["strategy"] == bad).to_numpy()
    )
    return rows[hit].reset_index(drop=True)


def flip_table(
    preds: pd.DataFrame,
    strategies: Sequence[str] | None = None,
    *,
    include_errors: bool = False,
) -> pd.DataFrame:
    """Flips for every ordered strategy pair, per backbone and setting, with the pair's
    McNemar test (via :func:`clinlib.analysis.stats.pairwise_mcnemar`).

    Args:
        preds: predictions (one prep_model per strategy).
        strategies: strategies to pair (default: all present).
        include_errors: count rows with a transport error.

    Returns:
        One row per (backbone, setting, good, bad): n (paired questions), flips (good right,
        bad wrong), reverse (bad right, good wrong), p_value, p_adj (Holm within the
        backbone × setting family).
    """
    _require(preds, REQUIRED_COLUMNS, "predictions")
    p = preds if include_errors else _without_errors(preds)
    if strategies is not None:
        p = p[p["strategy"].isin(list(strategies))]
    cols = ["backbone", "setting", "good", "bad", "n", "flips", "reverse", "p_value", "p_adj"]
    rows = []
    for (bb, st), grp in p.groupby(["backbone", "setting"], sort=True):
        names = sorted(grp["strategy"].unique())
        if len(names) < 2:
            continue
        pairs = [(a, b) for a in names for b in names if a < b]
        try:
            res = pairwise_mcnemar(grp, cell=("strategy",), pairs=pairs)
        except ValueError as exc:
            raise FailureExplorerError(f"backbone {bb!r}, setting {st!r}: {exc}") from None
        for r in res.to_dict("records"):
            a, b = r["strategy_a"], r["strategy_b"]
            common = dict(backbone=bb, setting=st, n=r["n"], p_value=r["p_value"],
                          p_adj=r["p_adj"])  # fmt: skip
            rows.append({**common, "good": a, "bad": b, "flips": r["b"], "reverse": r["c"]})
            rows.append({**common, "good": b, "bad": a, "flips": r["c"], "reverse": r["b"]})
    return pd.DataFrame(rows, columns=cols)


def flips_chart(table: pd.DataFrame, backbone: str | None = None, setting: str = "post"):
    """Heat map of flips per ordered strategy pair (rows: right under, columns: wrong under).

    Args:
        table: :func:`flip_table` output.
        backbone: the backbone to draw (default: the first).
        setting: the setting to draw.
    """
    t = table[table["setting"] == setting]
    if t.empty:
        raise FailureExplorerError(f"flip table has no rows for setting {setting!r}")
    bb = backbone if backbone is not None else sorted(t["backbone"].unique())[0]
    t = t[t["backbone"] == bb]
    if t.empty:
        raise FailureExplorerError(f"flip table has no rows for backbone {bb!r}")
    order = sorted(set(t["good"]) | set(t["bad"]))
    base = alt.Chart(t).encode(
        x=alt.X("bad:N", sort=order, title="wrong under"),
        y=alt.Y("good:N", sort=order, title="right under"),
    )
    rect = base.mark_rect().encode(
        color=alt.Color("flips:Q", scale=alt.Scale(scheme="reds"), title="flips"),
        tooltip=["good", "bad", "n", "flips", "reverse", alt.Tooltip("p_adj:Q", format=".3g")],
    )
    text = base.mark_text(fontSize=10).encode(text="flips:Q")
    return (rect + text).properties(
        width=300, height=300, title=f"Paired flips · {bb} · setting {setting}"
    )


# -- one prediction: context, anchors, side by side ------------------------------------------


def anchor_ids(question: Mapping[str, Any]) -> list[str]:
    """The question's anchor event ids (empty for abstention questions)."""
    return [str(a) for a in _as_list(question.get("anchor_event_ids"))]


def anchor_presence(context: str, anchors: Sequence[str]) -> dict[str, int]:
    """How many ``[EVENT-ID]`` tag groups of ``context`` mention each anchor id.

    Returns:
        ``{anchor_id: count}`` (0 = absent from this representation).
    """
    counts = dict.fromkeys(anchors, 0)
    for m in TAG_RE.finditer(context or ""):
        for eid in (s.strip() for s in m.group(1).split(",")):
            if eid in counts:
                counts[eid] += 1
    return counts


def anchor_message(context: str, anchors: Sequence[str]) -> str:
    """One sentence saying whether the anchors are present in the context."""
    if not anchors:
        return NO_ANCHOR_TEXT
    found = anchor_presence(context, anchors)
    absent = [a for a, n in found.items() if n == 0]
    if absent:
        return ABSENT_TEXT.format(ids=", ".join(absent))
    return PRESENT_TEXT.format(ids=", ".join(anchors), n=sum(found.values()))


def highlight_context(context: str, anchors: Sequence[str]) -> str:
    """The context as escaped HTML (``<pre>``) with tag groups naming an anchor highlighted,
    and the sentence/line that carries it marked.

    Returns:
        HTML; anchor tags are wrapped in ``<mark class="ct-anchor">``.
    """
    if not context:
        return f"<p><i>{NO_CONTEXT_TEXT}</i></p>"
    wanted = set(anchors)
    parts: list[str] = []
    pos = 0
    for m in TAG_RE.finditer(context):
        ids = [s.strip() for s in m.group(1).split(",")]
        parts.append(html.escape(context[pos : m.start()]))
        if wanted.intersection(ids):
            inner = ", ".join(
                f'<b style="color:{ANCHOR_COLOR}">{html.escape(i)}</b>'
                if i in wanted
                else html.escape(i)
                for i in ids
            )
            parts.append(f'<mark class="ct-anchor" id="anchor">[{inner}]</mark>')
        else:
            parts.append(f'<span style="color:#888">{html.escape(m.group(0))}</span>')
        pos = m.end()
    parts.append(html.escape(context[pos:]))
    return f"<pre>{''.join(parts)}</pre>"


def evidence_turns_html(question: Mapping[str, Any], dialogues: pd.DataFrame | None) -> str:
    """The dialogue turn(s) that carry the answer (``evidence_turns`` = ``"sid:turn_idx"``)."""
    refs = [str(r) for r in _as_list(question.get("evidence_turns"))]
    if not refs:
        return "<p><i>No evidence turn (the fact is not stated in the dialogue).</i></p>"
    if dialogues is None or dialogues.empty:
        return f"<p>Evidence turn(s): {html.escape(', '.join(refs))}</p>"
    out = []
    for ref in refs:
        sid, _, turn = ref.partition(":")
        try:
            row = dialogues[(dialogues["subject_id"] == int(sid))
                            & (dialogues["turn_idx"] == int(turn))]  # fmt: skip
        except ValueError:
            raise FailureExplorerError(
                f"question {question.get('qid')}: evidence turn {ref!r} is not 'subject:turn'"
            ) from None
        if row.empty:
            out.append(f"<li>{html.escape(ref)}: turn not in dialogues.parquet</li>")
            continue
        r = row.iloc[0]
        text = str(r["text_tagged"] if "text_tagged" in row.columns else r["text"])
        out.append(
            f"<li>patient {html.escape(sid)}, visit {int(r['visit_idx']) + 1}, turn {turn} "
            f"({html.escape(str(r['speaker']))}): "
            f"{highlight_context(text, anchor_ids(question))}</li>"
        )
    return f"<ul>{''.join(out)}</ul>"


def _mark(ok: Any) -> str:
    if pd.isna(ok):
        return "—"
    return '<b class="ct-ok">✔</b>' if bool(ok) else '<b class="ct-bad">✘</b>'


def prediction_html(
    pred: Mapping[str, Any],
    question: Mapping[str, Any],
    context: str | None,
    dialogues: pd.DataFrame | None = None,
) -> str:
    """One prediction as HTML: question, gold, raw response, parsed answer, verdict, where the
    answer lives in the dialogue, and the exact context with anchors highlighted.

    Args:
        pred: one predictions row.
        question: its questions.parquet row.
        context: the context the model saw (None = not rebuilt).
        dialogues: dialogues.parquet rows, to quote the evidence turn.
    """
    anchors = anchor_ids(question)
    opts = _as_list(question.get("options"))
    opt_html = "<br>options: " + html.escape(" | ".join(str(o) for o in opts)) if len(opts) else ""
    err = pred.get("error")
    err_html = (
        f"<br><b class='ct-bad'>transport error:</b> {html.escape(str(err))}"
        if err is not None and not pd.isna(err) and str(err)
        else ""
    )
    head = (
        f"<h4>{html.escape(str(pred['qid']))} · {html.escape(str(pred['task']))}/"
        f"{html.escape(str(pred['subtype']))} · {html.escape(str(pred['strategy']))} · "
        f"{html.escape(str(pred['backbone']))} · setting {html.escape(str(pred['setting']))}"
        f"</h4>"
    )
    table = (
        "<table>"
        f"<tr><th>question</th><td>{html.escape(str(question.get('question', '')))}"
        f"{opt_html}</td></tr>"
        f"<tr><th>gold</th><td>{html.escape(str(question.get('gold', '')))}</td></tr>"
        f"<tr><th>raw response</th><td><code>{html.escape(str(pred['response']))}</code>"
        f"{err_html}</td></tr>"
        f"<tr><th>parsed</th><td>{html.escape(str(pred['parsed']))}"
        f"{' <b class=ct-bad>(parse failed)</b>' if pred.get('parse_failed') else ''}</td></tr>"
        f"<tr><th>correct</th><td>{_mark(pred['correct'])}</td></tr>"
        f"<tr><th>anchors</th><td>{html.escape(', '.join(anchors) or '(none)')}</td></tr>"
        "</table>"
    )
    parts = [_CSS, '<div class="ct-fx">', head, table, "<h5>Where the answer is in the "
             "dialogue</h5>", evidence_turns_html(question, dialogues)]  # fmt: skip
    if context is not None:
        msg = anchor_message(context, anchors)
        cls = "ct-bad" if msg.startswith("Anchor event(s)") and "ABSENT" in msg else "ct-ok"
        shown, elided = clip_context(context, anchors)
        clipped = f"; {elided:,} far from the anchors not shown" if elided else ""
        parts += [
            f"<h5>The exact context the model saw ({len(context):,} characters{clipped})</h5>",
            f'<p class="{cls}">{html.escape(msg)}</p>',
            highlight_context(shown, anchors),
        ]
    parts.append("</div>")
    return "\n".join(parts)


ContextFn = Callable[[pd.DataFrame, str, str], pd.DataFrame]


def context_fn_for(profile: str | None = None, dialogues: pd.DataFrame | None = None) -> ContextFn:
    """``fn(questions_subset, strategy, setting) -> contexts`` rebuilding contexts with
    :func:`clinlib.strategies.question_contexts` (from the profile's construction cache)."""
    from clinlib.strategies import question_contexts

    # Memoised: the explorer re-renders the same question under every strategy on each pick.
    memo: dict[tuple, pd.DataFrame] = {}

    def fn(questions: pd.DataFrame, strategy: str, setting: str) -> pd.DataFrame:
        key = (tuple(questions["qid"]), strategy, setting)
        if key not in memo:
            memo[key] = question_contexts(
                questions, strategy, profile, setting, dialogues=dialogues
            )
        return memo[key]

    return fn


def question_row(questions: pd.DataFrame, qid: str) -> dict[str, Any]:
    """The questions.parquet row of ``qid`` as a dict.

    Raises:
        FailureExplorerError: ``qid`` is not in ``questions``.
    """
    _require(questions, ("qid", "task", "question", "gold"), "questions")
    row = questions[questions["qid"] == qid]
    if row.empty:
        raise FailureExplorerError(f"qid {qid!r} is not in questions.parquet")
    return row.iloc[0].to_dict()


def context_of(
    questions: pd.DataFrame, qid: str, strategy: str, setting: str, context_fn: ContextFn
) -> str:
    """The context ``strategy`` gave question ``qid`` in ``setting``."""
    sub = questions[questions["qid"] == qid]
    if sub.empty:
        raise FailureExplorerError(f"qid {qid!r} is not in questions.parquet")
    ctx = context_fn(sub, strategy, setting)
    return str(ctx["context"].iloc[0]) if len(ctx) else ""


def anchors_in_context(
    rows: pd.DataFrame, questions: pd.DataFrame, strategy: str, context_fn: ContextFn
) -> pd.Series:
    """For each (qid, setting) row, whether every anchor of its question appears in the
    context ``strategy`` gives it (contexts rebuilt once per setting, not per row).

    Returns:
        Boolean Series aligned with ``rows`` (True for questions without anchors).
    """
    _require(rows, ("qid", "setting"), "rows")
    out = pd.Series(True, index=rows.index, dtype=bool)
    for setting, grp in rows.groupby("setting"):
        sub = questions[questions["qid"].isin(set(grp["qid"]))]
        missing = sorted(set(grp["qid"]) - set(sub["qid"]))
        if missing:
            raise FailureExplorerError(f"qid(s) {missing[:5]} are not in questions.parquet")
        ctx = dict(zip(*context_fn(sub, strategy, str(setting))[["qid", "context"]].T.values,
                       strict=True))  # fmt: skip
        anchors = {q["qid"]: anchor_ids(q) for q in sub.to_dict("records")}
        for i, qid in zip(grp.index, grp["qid"], strict=True):
            found = anchor_presence(str(ctx.get(qid, "")), anchors[qid])
            out[i] = all(found.values())
    return out


def side_by_side(
    preds: pd.DataFrame,
    questions: pd.DataFrame,
    qid: str,
    backbone: str,
    setting: str,
    context_fn: ContextFn | None = None,
) -> pd.DataFrame:
    """The same question under every strategy (same backbone and setting).

    Args:
        preds, questions: predictions and questions.
        qid, backbone, setting: the question and cell.
        context_fn: rebuilds contexts; when given, adds ``anchors_present`` (k of n anchors
            found in the context) and ``context_chars``.

    Returns:
        One row per strategy: strategy, prep_model, parsed, correct, parse_failed,
        context_tokens[, context_chars, anchors_present].
    """
    _require(preds, REQUIRED_COLUMNS, "predictions")
    rows = preds[(preds["qid"] == qid) & (preds["backbone"] == backbone)
                 & (preds["setting"] == setting)]  # fmt: skip
    cols = [c for c in ("strategy", "prep_model", "parsed", "correct", "parse_failed",
                        "context_tokens") if c in rows.columns]  # fmt: skip
    out = rows[cols].sort_values("strategy").reset_index(drop=True)
    if context_fn is not None and len(out):
        anchors = anchor_ids(question_row(questions, qid))
        chars, present = [], []
        for s in out["strategy"]:
            ctx = context_of(questions, qid, str(s), setting, context_fn)
            found = anchor_presence(ctx, anchors)
            chars.append(len(ctx))
            present.append(f"{sum(1 for n in found.values() if n)}/{len(anchors)}")
        out = out.assign(context_chars=chars, anchors_present=present)
    return out


def side_by_side_html(
    table: pd.DataFrame,
    contexts: Mapping[str, str] | None = None,
    anchors: Sequence[str] = (),
    highlight: str | None = None,
) -> str:
    """:func:`side_by_side` as an HTML table, optionally followed by each strategy's context
    in collapsible blocks (anchors highlighted)."""
    if table.empty:
        return "<p>No other strategies for this question.</p>"
    head = "".join(f"<th>{html.escape(c)}</th>" for c in table.columns)
    body = []
    for r in table.to_dict("records"):
        style = ' style="background:#ffffcc"' if r.get("strategy") == highlight else ""
        cells = "".join(
            f"<td>{_mark(v) if k in ('correct', 'parse_failed') else html.escape(str(v))}</td>"
            for k, v in r.items()
        )
        body.append(f"<tr{style}>{cells}</tr>")
    out = [_CSS, '<div class="ct-fx"><table>', f"<tr>{head}</tr>", *body, "</table>"]
    for name, ctx in (contexts or {}).items():
        msg = html.escape(anchor_message(ctx, anchors))
        out.append(
            f"<details><summary>{html.escape(name)} — {len(ctx):,} chars — {msg}</summary>"
            f"{highlight_context(ctx, anchors)}</details>"
        )
    out.append("</div>")
    return "\n".join(out)


def options_of(preds: pd.DataFrame, col: str) -> list[str]:
    """Sorted distinct values of a filter column."""
    return sorted(str(v) for v in preds[col].dropna().unique())


def prediction_label(row: Mapping[str, Any]) -> str:
    """A picker label for one prediction."""
    mark = "✔" if row["correct"] else ("⚠" if row["parse_failed"] else "✘")
    return (f"{mark} {row['qid']} · {row['strategy']} · {row['backbone']} · {row['setting']} · "
            f"{str(row['parsed'])[:40]}")  # fmt: skip


def explain(
    preds: pd.DataFrame,
    questions: pd.DataFrame,
    index: int,
    context_fn: ContextFn | None = None,
    dialogues: pd.DataFrame | None = None,
    others: bool = True,
) -> str:
    """Full HTML for row ``index`` of ``preds``: the prediction card and, when ``others``,
    the same question under the other strategies side by side."""
    pred = preds.iloc[index].to_dict()
    q = question_row(questions, str(pred["qid"]))
    ctx = (
        None
        if context_fn is None
        else context_of(
            questions, str(pred["qid"]), str(pred["strategy"]), str(pred["setting"]), context_fn
        )  # fmt: skip
    )
    out = prediction_html(pred, q, ctx, dialogues)
    if others:
        tab = side_by_side(preds_all(preds), questions, str(pred["qid"]), str(pred["backbone"]),
                           str(pred["setting"]), context_fn)  # fmt: skip
        out += "<h5>Same question, other strategies</h5>" + side_by_side_html(
            tab, highlight=str(pred["strategy"])
        )
    return out


def preds_all(preds: pd.DataFrame) -> pd.DataFrame:
    """The unfiltered predictions a filtered frame came from (``attrs['all']``), else itself."""
    return preds.attrs.get("all", preds)


def with_source(filtered: pd.DataFrame, source: pd.DataFrame) -> pd.DataFrame:
    """Attach the unfiltered predictions so :func:`explain` can show the other strategies."""
    out = filtered.copy()
    out.attrs["all"] = source
    return out


# -- front ends -------------------------------------------------------------------------------


def static_view(
    preds: pd.DataFrame,
    questions: pd.DataFrame,
    context_fn: ContextFn | None = None,
    dialogues: pd.DataFrame | None = None,
    good: str = "full-context",
    bad: str = "mem0",
) -> str:
    """The headless rendering: counts per outcome, then the first ``good``→``bad`` flip (or
    the first incorrect prediction) explained."""
    if preds.empty:
        return "<p>No predictions to explore.</p>"
    names = set(preds["strategy"])
    fl = flips(preds, good, bad) if {good, bad} <= names else pd.DataFrame()
    counts = (
        preds.assign(correct=preds["correct"].fillna(False).astype(bool))
        .groupby("strategy")
        .agg(n=("qid", "size"), correct=("correct", "sum"), parse_failed=("parse_failed", "sum"))
        .reset_index()
    )
    parts = [f"<h4>Failure explorer (static view): {len(preds)} predictions, "
             f"{len(fl)} {good}→{bad} flips</h4>",
             counts.to_html(index=False)]  # fmt: skip
    if len(fl):
        f0 = fl.iloc[0]
        pick = preds[(preds["qid"] == f0["qid"]) & (preds["strategy"] == bad)
                     & (preds["backbone"] == f0["backbone"])
                     & (preds["setting"] == f0["setting"])]  # fmt: skip
    else:
        pick = preds[~preds["correct"].fillna(False).astype(bool)]
    if len(pick):
        one = with_source(pick.iloc[:1].reset_index(drop=True), preds)
        parts.append(explain(one, questions, 0, context_fn, dialogues))
    return "\n".join(parts)


def failure_explorer(
    preds: pd.DataFrame,
    questions: pd.DataFrame,
    context_fn: ContextFn | None = None,
    dialogues: pd.DataFrame | None = None,
    good: str = "full-context",
    bad: str = "mem0",
):
    """An ipywidgets explorer: filters, a prediction picker, the explained prediction and the
    other strategies side by side; a "flips only" toggle restricts to ``good``→``bad`` flips.

    Returns:
        ``ipywidgets.VBox`` with a ``controls`` dict (task, subtype, strategy, backbone,
        setting, outcome, flips, page, pick, count, body); the picker lists one page of
        :data:`clinlib.core.pages.PAGE_SIZE` matches.
    """
    import ipywidgets as W

    _require(preds, REQUIRED_COLUMNS, "predictions")
    dd = {
        col: W.Dropdown(
            options=[("(all)", "")] + [(v, v) for v in options_of(preds, col)],
            value="",
            description=col,
        )  # fmt: skip
        for col in FILTER_COLUMNS
    }
    outcome = W.Dropdown(options=list(OUTCOMES), value="incorrect", description="outcome")
    only_flips = W.Checkbox(value=False, description=f"only {good}→{bad} flips")
    pick = W.Dropdown(description="prediction", layout=W.Layout(width="80%"))
    # The picker holds one page of rows: 111,658 options would be megabytes of widget state.
    page = W.BoundedIntText(value=1, min=1, max=1, description="page", layout=W.Layout(width="15%"))
    count = W.HTML()
    body = W.HTML()
    state: dict[str, Any] = {"rows": preds.iloc[:0]}

    def _filter(_=None) -> None:
        rows = filter_predictions(preds, outcome=outcome.value,
                                  **{c: (w.value or None) for c, w in dd.items()})  # fmt: skip
        if only_flips.value and {good, bad} <= set(preds["strategy"]):
            rows = only_flip_rows(rows, flips(preds, good, bad), bad)
        state["rows"] = with_source(rows, preds)
        n_pages = page_count(len(rows))
        count.value = (f"<b>{len(rows)}</b> of {len(preds)} predictions match "
                       f"({n_pages} page(s) of {PAGE_SIZE})")  # fmt: skip
        if page.value != 1:
            page.value = 1  # observed: refills the picker
        else:
            _fill()
        page.max = n_pages

    def _fill(_=None) -> None:
        rows = page_of(state["rows"], page.value - 1)
        first = (page.value - 1) * PAGE_SIZE
        pick.options = [(prediction_label(r), first + i)
                        for i, r in enumerate(rows.to_dict("records"))]  # fmt: skip
        pick.value = first if len(rows) else None
        _show()

    def _show(_=None) -> None:
        if pick.value is None or not len(state["rows"]):
            body.value = "<p>No prediction matches these filters.</p>"
            return
        try:
            body.value = explain(state["rows"], questions, int(pick.value), context_fn, dialogues)
        except ValueError as exc:  # show a bad artifact in the pane, not a traceback
            body.value = f"<p class='ct-bad'>{html.escape(str(exc))}</p>"

    for w in [*dd.values(), outcome, only_flips]:
        w.observe(_filter, names="value")
    pick.observe(_show, names="value")
    page.observe(_fill, names="value")
    row1 = W.HBox([dd["task"], dd["subtype"], dd["strategy"]])
    row2 = W.HBox([dd["backbone"], dd["setting"], outcome, only_flips])
    box = W.VBox([row1, row2, count, W.HBox([page, pick]), body])
    box.controls = {**dd, "outcome": outcome, "flips": only_flips, "pick": pick,  # type: ignore
                    "page": page, "count": count, "body": body}  # fmt: skip
    _filter()
    return box


def show_failure_explorer(
    preds: pd.DataFrame,
    questions: pd.DataFrame,
    context_fn: ContextFn | None = None,
    dialogues: pd.DataFrame | None = None,
    static: bool | None = None,
) -> ViewerDisplay:
    """The notebook entry point: the widget explorer plus its static fallback.

    Args:
        preds, questions, dialogues: the artifacts.
        context_fn: rebuilds contexts (see :func:`context_fn_for`).
        static: only the static HTML (default: $CLINTRACE_STATIC_VIEWER is set).
    """
    static = bool(os.environ.get(STATIC_ENV)) if static is None else static
    html_ = static_view(preds, questions, context_fn, dialogues)
    widget = None if static else failure_explorer(preds, questions, context_fn, dialogues)
    return ViewerDisplay(widget, html_)


def kind_counts(flipped: pd.DataFrame, questions: pd.DataFrame) -> pd.DataFrame:
    """Flips per anchor event kind (lab, medication, ...; ``none`` for abstention questions).

    Returns:
        Columns kind, n (descending).
    """
    q = questions.set_index("qid")["anchor_event_ids"]
    kinds = []
    for qid in flipped["qid"]:
        ids = _as_list(q.get(qid))
        kinds.append(kind_of(str(ids[0])) if len(ids) else "none")
    out = pd.Series(kinds, dtype=object).value_counts().rename_axis("kind").reset_index(name="n")
    return out
