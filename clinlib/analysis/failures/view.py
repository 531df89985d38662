"""One opened failure (paper §5.7 "Illustrative failure modes"): the question, gold, raw
response and parsed answer, the evidence turn, the exact context the model saw with the anchor
event ids highlighted (or marked absent from that representation), and the same question under
the other strategies side by side."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from clinlib.analysis.failures.common import (
    ABSENT_TEXT,
    ANCHOR_COLOR,
    CSS,
    NO_ANCHOR_TEXT,
    NO_CONTEXT_TEXT,
    PRESENT_TEXT,
    REQUIRED_COLUMNS,
    TAG_RE,
    ContextFn,
    FailureExplorerError,
    as_list,
    require_columns,
    verdict_mark,
)
from clinlib.core.pages import clip_context
from clinlib.eval.harness.outcomes import failure_class
from clinlib.strategies import question_contexts
from clinlib.strategies.evidence import anchor_ids, anchor_presence
from clinlib.strategies.memory_protocol import MemoryServiceError
from clinlib.strategies.registry import is_kit_strategy


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
    refs = [str(r) for r in as_list(question.get("evidence_turns"))]
    if not refs:
        return "<p><i>No evidence turn (the fact is not stated in the dialogue).</i></p>"
    if dialogues is None or dialogues.empty:
        return f"<p>Evidence turn(s): {html.escape(', '.join(refs))}</p>"
    out = []
    for ref in refs:
        sid, _, turn = ref.partition(":")
        try:
            row = dialogues[
                (dialogues["subject_id"] == int(sid)) & (dialogues["turn_idx"] == int(turn))
            ]
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
    opts = as_list(question.get("options"))
    opt_html = "<br>options: " + html.escape(" | ".join(str(o) for o in opts)) if len(opts) else ""
    err = pred.get("error")
    err_html = (
        f"<br><b class='ct-bad'>{html.escape(failure_class(pred.get('error_kind'), err))}:</b> "
        f"{html.escape(str(err))}"
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
        f"<tr><th>correct</th><td>{verdict_mark(pred['correct'])}</td></tr>"
        f"<tr><th>anchors</th><td>{html.escape(', '.join(anchors) or '(none)')}</td></tr>"
        "</table>"
    )
    parts = [
        CSS,
        '<div class="ct-fx">',
        head,
        table,
        "<h5>Where the answer is in the dialogue</h5>",
        evidence_turns_html(question, dialogues),
    ]
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


def context_fn_for(profile: str | None = None, dialogues: pd.DataFrame | None = None) -> ContextFn:
    """``fn(questions_subset, strategy, setting) -> contexts`` rebuilding contexts with
    :func:`clinlib.strategies.question_contexts` (from the profile's construction cache)."""
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
    require_columns(questions, ("qid", "task", "question", "gold"), "questions")
    row = questions[questions["qid"] == qid]
    if row.empty:
        raise FailureExplorerError(f"qid {qid!r} is not in questions.parquet")
    return row.iloc[0].to_dict()


def context_of(
    questions: pd.DataFrame, qid: str, strategy: str, setting: str, context_fn: ContextFn
) -> str | None:
    """The context ``strategy`` gave question ``qid`` in ``setting``; None when ``strategy`` is
    not one of the kit's (an outside prediction's own memory, ``clintrace score``): the kit
    cannot rebuild what that system showed its model."""
    sub = questions[questions["qid"] == qid]
    if sub.empty:
        raise FailureExplorerError(f"qid {qid!r} is not in questions.parquet")
    if not is_kit_strategy(strategy):
        return None
    try:
        ctx = context_fn(sub, strategy, setting)
    except MemoryServiceError:  # an outside memory's read not in its read log, service down
        return None

    return str(ctx["context"].iloc[0]) if len(ctx) else ""


def anchors_in_context(
    rows: pd.DataFrame, questions: pd.DataFrame, strategy: str, context_fn: ContextFn
) -> pd.Series:
    """For each (qid, setting) row, whether every anchor of its question appears in the
    context ``strategy`` gives it (contexts rebuilt once per setting, not per row).

    Returns:
        Boolean Series aligned with ``rows`` (True for questions without anchors).
    """
    require_columns(rows, ("qid", "setting"), "rows")
    out = pd.Series(True, index=rows.index, dtype=bool)
    for setting, grp in rows.groupby("setting"):
        sub = questions[questions["qid"].isin(set(grp["qid"]))]
        missing = sorted(set(grp["qid"]) - set(sub["qid"]))
        if missing:
            raise FailureExplorerError(f"qid(s) {missing[:5]} are not in questions.parquet")
        ctx = dict(
            zip(*context_fn(sub, strategy, str(setting))[["qid", "context"]].T.values, strict=True)
        )
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
    require_columns(preds, REQUIRED_COLUMNS, "predictions")
    rows = preds[
        (preds["qid"] == qid) & (preds["backbone"] == backbone) & (preds["setting"] == setting)
    ]
    cols = [
        c
        for c in ("strategy", "prep_model", "parsed", "correct", "parse_failed", "context_tokens")
        if c in rows.columns
    ]
    out = rows[cols].sort_values("strategy").reset_index(drop=True)
    if context_fn is not None and len(out):
        anchors = anchor_ids(question_row(questions, qid))
        chars, present = [], []
        for s in out["strategy"]:
            ctx = context_of(questions, qid, str(s), setting, context_fn)
            if ctx is None:  # an outside system's context: not known here
                chars.append(None)
                present.append("n/a")
                continue
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
            f"<td>{verdict_mark(v) if k in ('correct', 'parse_failed') else html.escape(str(v))}</td>"
            for k, v in r.items()
        )
        body.append(f"<tr{style}>{cells}</tr>")
    out = [CSS, '<div class="ct-fx"><table>', f"<tr>{head}</tr>", *body, "</table>"]
    for name, ctx in (contexts or {}).items():
        msg = html.escape(anchor_message(ctx, anchors))
        out.append(
            f"<details><summary>{html.escape(name)} — {len(ctx):,} chars — {msg}</summary>"
            f"{highlight_context(ctx, anchors)}</details>"
        )
    out.append("</div>")
    return "\n".join(out)


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
        )
    )
    out = prediction_html(pred, q, ctx, dialogues)
    if others:
        tab = side_by_side(
            preds_all(preds),
            questions,
            str(pred["qid"]),
            str(pred["backbone"]),
            str(pred["setting"]),
            context_fn,
        )
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
