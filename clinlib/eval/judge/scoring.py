"""LLM-as-judge scoring of answers (MedMemoryBench §5 "Query Design": L-type queries judged
by an LLM, MCD correct only if all three criteria hold; MedMemoryBench Appendix D.1 prompts in
:mod:`clinlib.eval.judge.prompts`).

:func:`judge_predictions` asks a judge backbone, once per prediction, whether the answer
matches the question's reference answer, through the kit's LLM layer
(:class:`clinlib.eval.synthesis.calls.Calls`: the profile's response cache, the budget cap, the
credentialed-data egress guard, live or provider batch mode), and returns one verdict row per
prediction with the parsed criteria and the call's cost.

Questions carry ``gold_text`` (the reference answer) and ``judge_criteria`` (MCD:
:data:`~clinlib.eval.judge.prompts.MCD_CRITERIA`; otherwise ``["correct"]``); for questions
without them (T1–T9) :func:`gold_text_of` derives the reference from the gold answer.

Verdict parsing, two readings (like the answer parsers, Appendix G.3 of the paper):

* **strict** — the reply, code fences aside, is one JSON object with a boolean
  ``is_correct`` (MCD: and numeric ``ncr_score`` / ``crc_score`` / ``cc_score``);
* **lenient** — additionally the outermost ``{...}`` in prose, ``"is_correct": true`` written
  without braces (the seed's prompts print the format without them), or exactly one of the
  tags ``[CORRECT]`` / ``[INCORRECT]``.

A reply neither reading parses is a parse failure: recorded (``parse_failed`` /
``parse_failed_lenient``) and counted as an incorrect verdict, never dropped.

The offline judge ``lexical-judge`` (:data:`LEXICAL_JUDGE`) is a deterministic policy, not a
language model: it reads the reference and the answer out of the rendered prompt and says
correct when their SQuAD token-F1 (:func:`lexical_f1`: a text SQuAD normalises to nothing,
such as "A", keeps its plain tokens) reaches :data:`LEXICAL_THRESHOLD` (0.5, the F1 rule
MedMemoryBench applies to LoCoMo, seed fact ``mmb_f1_correct``); for MCD each criterion has
its own lexical rule (:func:`lexical_mcd_scores`: node coverage from the node list, causal
links from the reasoning pattern, chain completeness by the seed's bands). It cannot see
negation, hedging or paraphrase: the judge audit (:mod:`clinlib.analysis.judge_audit`) shows
where it fails.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from clinlib.core.config import resolve_profile
from clinlib.core.seed_facts import seed_fact
from clinlib.eval.judge.prompts import (
    GENERIC,
    JUDGE_PROMPTS,
    MCD_CRITERIA,
    MCD_THRESHOLDS,
    prompt_kind,
    render_judge_prompt,
)
from clinlib.eval.synthesis.calls import Calls
from clinlib.llm import ChatRequest, GenerationParams, get_backbone, register_policy_backbone
from clinlib.llm.types import OfflineReply
from clinlib.tasks.answers.overlap import answer_tokens
from clinlib.tasks.traps.reference import parse_pattern

LEXICAL_JUDGE = "lexical-judge"
# The token-F1 rule MedMemoryBench applies to LoCoMo (its appendix "LoCoMo"): correct if F1 >= 0.5.
LEXICAL_THRESHOLD = float(seed_fact("mmb_f1_correct").values[0])
LEXICAL_MODEL = "policy/lexical-judge"
LEXICAL_LABEL = (
    f"lexical-judge (token-F1 >= {LEXICAL_THRESHOLD:g}; deterministic policy, not an LLM)"
)
DEFAULT_CRITERIA: tuple[str, ...] = ("correct",)
JUDGE_MAX_TOKENS = 512
KEY_COLUMNS: tuple[str, ...] = ("qid", "strategy", "backbone", "setting")
JUDGE_COLUMNS: tuple[str, ...] = (
    *KEY_COLUMNS,
    "task",
    "judge_backbone",
    "prompt",
    "verdict",
    "verdict_lenient",
    "parse_failed",
    "parse_failed_lenient",
    "criteria",
    "reason",
    "judge_response",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "from_cache",
    "error",
)
CAUSAL_RE = re.compile(
    r"\b(so|therefore|thus|hence|because|since|due to|leads? to|implies|means|"
    r"contraindicat\w*|conflicts?|should not|must not)\b",
    re.IGNORECASE,
)
CAUSAL_WORDS = CAUSAL_RE.pattern
_FENCE_RE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)
_BOOL_RE = re.compile(r"[\"']?is_correct[\"']?\s*[:=]\s*(true|false)", re.IGNORECASE)
_TAG_RE = re.compile(r"\[(CORRECT|INCORRECT|PARTIALLY CORRECT)\]")
_SCORE_RE = r"[\"']?{name}[\"']?\s*[:=]\s*([01](?:\.\d+)?)"


class JudgeError(ValueError):
    """Unusable judge input (a missing column, an unknown question)."""


# --------------------------------------------------------------------------- gold text


def _as_list(value: Any) -> list:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return [value]
    return list(value) if isinstance(value, list | tuple | np.ndarray) else [value]


def gold_text_of(question: Mapping[str, Any]) -> str:
    """The reference answer: ``gold_text`` if the question has one, else the gold answer
    (an option letter followed by its option's text)."""
    text = question.get("gold_text")
    if isinstance(text, str) and text.strip():
        return text
    gold = str(question.get("gold", ""))
    options = _as_list(question.get("options"))
    if len(gold) == 1 and gold.isalpha() and options:
        i = ord(gold.upper()) - ord("A")
        if 0 <= i < len(options):
            return f"{gold.upper()}. {options[i]}"
    return gold


def criteria_of(question: Mapping[str, Any]) -> tuple[str, ...]:
    """The question's ``judge_criteria`` (default ``("correct",)``)."""
    got = [str(c) for c in _as_list(question.get("judge_criteria"))]
    return tuple(got) or DEFAULT_CRITERIA


def prompt_of(question: Mapping[str, Any]) -> str:
    """The judge prompt of a question: its ``judge_prompt`` (a key of
    :data:`~clinlib.eval.judge.prompts.JUDGE_PROMPTS`) if set, else by its task."""
    named = question.get("judge_prompt")
    if isinstance(named, str) and named:
        if named not in JUDGE_PROMPTS:
            raise JudgeError(
                f"question {question.get('qid')!r}: judge_prompt {named!r} is not "
                f"one of {', '.join(JUDGE_PROMPTS)}"
            )
        return named
    return prompt_kind(str(question.get("task", "")))


def judge_fields(question: Mapping[str, Any], response: str) -> dict[str, str]:
    """The placeholders of the judge prompt for one (question, answer)."""
    nodes = [str(n) for n in _as_list(question.get("judge_nodes"))]
    return {
        "question": str(question.get("question", "")),
        "expected_answer": gold_text_of(question),
        "explanation": str(question.get("judge_explanation", "") or ""),
        "metadata_info": str(question.get("judge_metadata", "") or ""),
        "nodes_for_validation": "Nodes for validation:" if nodes else "",
        "required_nodes_str": "\n".join(f"{i}. {n}" for i, n in enumerate(nodes, start=1)),
        "hop_count": str(question.get("judge_hops", "") or (len(nodes) or "")),
        "reasoning_pattern": str(question.get("judge_pattern", "") or ""),
        "model_output": str(response or ""),
    }


# --------------------------------------------------------------------------- parsing


def _criteria(obj: Mapping[str, Any] | None, scores: Mapping[str, float], mcd: bool) -> dict:
    if not mcd:
        return {"correct": bool(obj["is_correct"]) if obj else bool(scores["is_correct"])}
    return {c: float(scores[key]) >= bound for c, (key, bound) in MCD_THRESHOLDS.items()}


def parse_verdict_strict(reply: str | None, mcd: bool = False) -> dict | None:
    """Strict reading: ``{"is_correct": bool, "criteria": {...}, "reason": str}`` or None."""
    body = _FENCE_RE.sub("", (reply or "").strip())
    try:
        obj = json.loads(body)
    except json.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("is_correct"), bool):
        return None
    scores: dict[str, float] = {}
    if mcd:
        for key, _ in MCD_THRESHOLDS.values():
            value = obj.get(key)
            if isinstance(value, bool) or not isinstance(value, int | float):
                return None
            scores[key] = float(value)
    return _verdict(obj["is_correct"], _criteria(obj, scores, mcd), obj.get("reason", ""))


def _verdict(is_correct: bool, criteria: dict[str, bool], reason: Any) -> dict:
    return {
        "is_correct": bool(is_correct) and all(criteria.values()),
        "criteria": criteria,
        "reason": str(reason or ""),
    }


def parse_verdict_lenient(reply: str | None, mcd: bool = False) -> dict | None:
    """Lenient reading (module docstring); strict first."""
    strict = parse_verdict_strict(reply, mcd)
    if strict is not None:
        return strict
    text = (reply or "").strip()
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        inner = parse_verdict_strict(text[start : end + 1], mcd)
        if inner is not None:
            return inner
    flags = {m.lower() == "true" for m in _BOOL_RE.findall(text)}
    if len(flags) != 1:
        tags = set(_TAG_RE.findall(text))
        if len(tags) != 1:
            return None
        flags = {tags == {"CORRECT"}}
    scores: dict[str, float] = {}
    if mcd:
        for key, _ in MCD_THRESHOLDS.values():
            found = re.findall(_SCORE_RE.format(name=key), text)
            if len(set(found)) != 1:
                return None
            scores[key] = float(found[0])
    scores["is_correct"] = flags.pop()
    return _verdict(bool(scores["is_correct"]), _criteria(None, scores, mcd), "")


# --------------------------------------------------------------------------- lexical judge


def _between(text: str, start: str, ends: Sequence[str]) -> str:
    i = text.find(start)
    if i < 0:
        return ""
    rest = text[i + len(start) :]
    cut = min((j for j in (rest.find(e) for e in ends) if j >= 0), default=len(rest))
    return rest[:cut].strip()


def lexical_f1(answer: str, reference: str) -> float:
    """SQuAD token-F1, except that a text whose SQuAD normalisation is empty (the reference
    "A": articles are dropped) keeps its plain lower-case tokens, and an empty reference
    matches nothing (0.0): an empty answer never scores 1 against an empty-normalised gold."""
    ref = answer_tokens(reference) or _plain_tokens(reference)
    got = answer_tokens(answer) or _plain_tokens(answer)
    if not ref or not got:
        return 0.0
    same = sum((Counter(got) & Counter(ref)).values())
    return 0.0 if not same else 2 * same / (len(got) + len(ref))


def _plain_tokens(text: str) -> list[str]:
    return re.sub(r"[^a-z0-9 ]+", " ", str(text).lower()).split()


def _recall(node: str, got: set[str]) -> float:
    want = answer_tokens(node) or _plain_tokens(node)
    return sum(t in got for t in want) / max(len(want), 1)


def chain_completeness(ncr: float, crc: float) -> float:
    """The seed's CC bands (MedMemoryBench Appendix D.1, MCD prompt): 1.0 all nodes and links; 0.7 >= 80 % of
    nodes with the links mostly right (CRC >= 0.75); 0.5 >= 60 % with CRC >= 0.5; 0.3 some
    node; 0.0 none."""
    if ncr >= 1.0 and crc >= 1.0:
        return 1.0
    if ncr >= 0.8 and crc >= 0.75:
        return 0.7
    if ncr >= 0.6 and crc >= 0.5:
        return 0.5
    return 0.3 if ncr > 0 else 0.0


def lexical_mcd_scores(answer: str, nodes: Sequence[str], links: Sequence[tuple[int, int]]):
    """(NCR, CRC, CC) of an answer, lexically: a node is covered when the answer recalls at
    least :data:`LEXICAL_THRESHOLD` of its tokens; a link is correct when both its nodes are
    covered and the answer states a causal connective (:data:`CAUSAL_WORDS`); CC by the
    seed's bands (:func:`chain_completeness`). No links given: CRC = NCR of the nodes."""
    got = set(answer_tokens(answer) or _plain_tokens(answer))
    covered = [_recall(n, got) >= LEXICAL_THRESHOLD for n in nodes]
    ncr = float(np.mean(covered)) if covered else 0.0
    causal = bool(CAUSAL_RE.search(str(answer)))
    valid = [(a, b) for a, b in links if 1 <= a <= len(nodes) and 1 <= b <= len(nodes)]
    if valid:
        crc = float(np.mean([causal and covered[a - 1] and covered[b - 1] for a, b in valid]))
    else:
        crc = ncr if causal else 0.0
    return ncr, crc, chain_completeness(ncr, crc)


def lexical_judge_policy(messages: Sequence[Mapping[str, Any]], params: Any) -> OfflineReply:
    """``lexical-judge``: token-F1 of the answer against the reference; MCD's three criteria
    each by its own lexical rule (:func:`lexical_mcd_scores`); module docstring."""
    text = next(
        (str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "user"), ""
    )
    ref = _between(text, "\nReference Answer: ", ["\nAnswer Explanation:"])
    answer = _between(text, "\nModel's Answer: ", ["\nEvaluation Criteria:", "\n---\n"])
    f1 = lexical_f1(answer, ref)
    out: dict[str, Any] = {"is_correct": f1 >= LEXICAL_THRESHOLD}
    if "\n---\n" in text:  # the MCD prompt
        nodes_text = _between(text, "Nodes for validation: ", ["\nReasoning Hops:"])
        nodes = [re.sub(r"^\d+\.\s*", "", n) for n in nodes_text.splitlines() if n.strip()]
        links = parse_pattern(_between(text, "\nReasoning Pattern: ", ["\nModel's Answer:"]))
        ncr, crc, cc = lexical_mcd_scores(answer, nodes, links)
        out |= {"ncr_score": ncr, "crc_score": crc, "cc_score": cc}
    out["reason"] = f"token-F1 {f1:.3f} vs threshold {LEXICAL_THRESHOLD} (lexical policy)"
    return OfflineReply(json.dumps(out))


def register_lexical_judge() -> Any:
    """Register :data:`LEXICAL_JUDGE` (kind "offline", price 0); idempotent."""
    return register_policy_backbone(
        LEXICAL_JUDGE, lexical_judge_policy, model=LEXICAL_MODEL, label=LEXICAL_LABEL
    )


# --------------------------------------------------------------------------- the judge


def judge_requests(
    questions: pd.DataFrame, predictions: pd.DataFrame, max_tokens: int = JUDGE_MAX_TOKENS
) -> tuple[list[ChatRequest], list[dict]]:
    """One judge request per prediction, and its row's identity (key columns, task, prompt).

    Raises:
        JudgeError: a missing column, or a prediction whose qid is not in ``questions``.
    """
    need = [*KEY_COLUMNS, "response"]
    missing = [c for c in need if c not in predictions.columns]
    if missing:
        raise JudgeError(f"predictions: missing column(s) {', '.join(missing)}")
    if "qid" not in questions.columns:
        raise JudgeError("questions: missing column qid")
    by_qid = {str(q["qid"]): q for q in questions.to_dict("records")}
    requests, rows, seen = [], [], set()
    for pred in predictions.to_dict("records"):
        q = by_qid.get(str(pred["qid"]))
        if q is None:
            raise JudgeError(f"predictions: qid {pred['qid']!r} is not in the questions")
        kind = prompt_of(q)
        text = render_judge_prompt(kind, judge_fields(q, pred.get("response") or ""))
        keys = [c for c in (*KEY_COLUMNS, "prep_model") if c in pred]
        rid = "|".join(str(pred[c]) for c in keys)
        if rid in seen:
            raise JudgeError(f"predictions: two rows for {rid!r} ({', '.join(keys)})")
        seen.add(rid)
        requests.append(
            ChatRequest(
                rid,
                [{"role": "user", "content": text}],
                GenerationParams(temperature=0.0, max_tokens=max_tokens),
            )
        )
        rows.append(
            {
                **{c: pred[c] for c in keys},
                "task": q.get("task", ""),
                "prompt": kind,
                "_mcd": "node_coverage" in criteria_of(q),
            }
        )
    return requests, rows


def judge_predictions(
    questions: pd.DataFrame,
    predictions: pd.DataFrame,
    judge_backbone: str = LEXICAL_JUDGE,
    *,
    profile: str | None = None,
    calls: Calls | None = None,
    max_tokens: int = JUDGE_MAX_TOKENS,
) -> pd.DataFrame:
    """Judge every prediction with ``judge_backbone``.

    Args:
        questions: the questions (qid, task, question, gold / gold_text, options,
            judge_criteria, ...).
        predictions: qid, strategy, backbone, setting, response (the predictions store's rows).
        judge_backbone: any registered backbone name; :data:`LEXICAL_JUDGE` offline.
        profile: whose response cache the calls use when ``calls`` is not given (default:
            the active profile).
        calls: a configured :class:`~clinlib.eval.synthesis.calls.Calls` (budget, mode, egress).
        max_tokens: the judge's output cap.

    Returns:
        One row per prediction: :data:`JUDGE_COLUMNS` (``verdict`` strict, parse failures
        False; ``criteria`` a dict of bools).

    Raises:
        JudgeError: unusable input; BudgetStop: the budget stopped the calls (answers so far
            are cached).
    """
    if judge_backbone == LEXICAL_JUDGE:
        register_lexical_judge()
    calls = calls or Calls(resolve_profile(profile))
    bb = get_backbone(judge_backbone, calls.config)  # a --config backbone judges too
    requests, rows = judge_requests(questions, predictions, max_tokens)
    results = calls.send(bb, requests) if requests else {}
    out = []
    for req, row in zip(requests, rows, strict=True):
        res = results[req.request_id]
        mcd = row.pop("_mcd")
        strict = parse_verdict_strict(res.response, mcd)
        lenient = parse_verdict_lenient(res.response, mcd)
        empty = dict.fromkeys(MCD_CRITERIA if mcd else DEFAULT_CRITERIA)
        out.append(
            {
                **row,
                "judge_backbone": judge_backbone,
                "verdict": bool(strict and strict["is_correct"]),
                "verdict_lenient": bool(lenient and lenient["is_correct"]),
                "parse_failed": strict is None,
                "parse_failed_lenient": lenient is None,
                "criteria": (lenient or {}).get("criteria", empty),
                "reason": (lenient or {}).get("reason", ""),
                "judge_response": res.response,
                "input_tokens": res.input_tokens,
                "output_tokens": res.output_tokens,
                "cost_usd": res.cost_usd,
                "from_cache": res.from_cache,
                "error": res.error,
            }
        )
    extra = ["prep_model"] if "prep_model" in predictions.columns else []
    return pd.DataFrame(out, columns=[*JUDGE_COLUMNS, *extra])


__all__ = [
    "GENERIC",
    "JUDGE_COLUMNS",
    "LEXICAL_JUDGE",
    "LEXICAL_THRESHOLD",
    "JudgeError",
    "criteria_of",
    "gold_text_of",
    "judge_predictions",
    "judge_requests",
    "lexical_judge_policy",
    "parse_verdict_lenient",
    "parse_verdict_strict",
    "prompt_of",
    "register_lexical_judge",
]
