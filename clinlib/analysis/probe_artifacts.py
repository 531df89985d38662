"""What each representation kept of one injected T3 sentence (paper §5.5, Appendix H Case 1):
the sentence, the lab fact it mentions, and the finding–diagnosis relation; plus the prep
model's raw outputs and a ranking of the positives worth inspecting.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from clinlib.analysis.probe_terms import TASK, UPSTREAM_BUILT, ProbeError, require_columns
from clinlib.data.build import load
from clinlib.strategies import get_strategy, load_artifacts, question_contexts

# The injected sentence's template (clinlib.tasks T3 generator, §3 "Task suite" T3).
INJECTION_PATTERN = re.compile(
    r"^Physician noted: (?P<lab>.+?) of (?P<value>[<>]?\d[\d.]*) (?P<unit>\S+) is consistent "
    r"with (?P<problem>.+?)\.?$"
)
# A kept relation needs an attribution phrase, not just both names on one line (an A-Mem note
# lists a visit's labs and diagnoses side by side without linking them).
RELATION_WORDS = re.compile(
    r"consistent with|attribut|due to|secondary to|caused by|explained by|because of", re.I
)


def parse_injection(text: str) -> dict[str, str]:
    """Split the attribution sentence into lab, value, unit and problem.

    Raises:
        ProbeError: the sentence does not follow the T3 template.
    """
    m = INJECTION_PATTERN.match(str(text).strip())
    if not m:
        raise ProbeError(f"injection text does not follow the T3 template: {text!r}")
    return m.groupdict()


def _sentences(text: str) -> list[str]:
    # artifacts are line-oriented (bullets, notes); within a line split on sentence ends
    parts = []
    for line in str(text).splitlines():
        parts += [p for p in re.split(r"(?<=[.;])\s+", line) if p.strip()]
    return parts


def kept(text: str | None, parts: Mapping[str, str]) -> dict[str, Any]:
    """What a context / stored text holds of one injection.

    Args:
        text: the text (None = the strategy holds nothing of this kind).
        parts: :func:`parse_injection` output.

    Returns:
        sentence (the exact attribution sentence), lab_fact (a sentence with the lab's name and
        the value), problem (the problem's title anywhere), relation (one sentence naming the lab and
        the problem with an attribution phrase, :data:`RELATION_WORDS`), evidence (the first sentence with the lab fact, or "").
    """
    if text is None:
        return {
            "sentence": False,
            "lab_fact": False,
            "problem": False,
            "relation": False,
            "evidence": "",
        }
    lab, problem = parts["lab"].lower(), parts["problem"].lower()
    value = re.compile(r"(?<![\d.])" + re.escape(parts["value"]) + r"(?!\.?\d)")
    sents = _sentences(text)
    facts = [s for s in sents if lab in s.lower() and value.search(s)]
    relation = any(
        lab in s.lower() and problem in s.lower() and RELATION_WORDS.search(s) for s in sents
    )
    sentence = f"{parts['lab']} of {parts['value']} {parts['unit']} is consistent with"
    return {
        "sentence": sentence.lower() in str(text).lower(),
        "lab_fact": bool(facts),
        "problem": problem in str(text).lower(),
        "relation": relation,
        "evidence": facts[0].strip() if facts else "",
    }


def injected_excerpt(turns: pd.DataFrame, qid: str, window: int = 2) -> pd.DataFrame:
    """The injected turn with ``window`` turns either side, from an injected dialogue.

    Args:
        turns: output of :func:`clinlib.tasks.injections.injected_dialogue`.
        qid: the question whose injection to show.
        window: turns of context either side.

    Returns:
        visit_idx, turn_idx, speaker, injected, text.
    """
    require_columns(turns, ["injected_qid", "turn_idx", "subject_id", "speaker", "text"], "excerpt")
    hit = turns[turns["injected_qid"].astype(str) == qid]
    if hit.empty:
        raise ProbeError(f"injected_excerpt: no injected turn for question {qid!r}")
    sid, t = int(hit["subject_id"].iloc[0]), int(hit["turn_idx"].iloc[0])
    mine = turns[(turns["subject_id"] == sid) & turns["turn_idx"].between(t - window, t + window)]
    return mine[["visit_idx", "turn_idx", "speaker", "injected", "text"]].reset_index(drop=True)


def artifact_inspection(
    question: Mapping[str, Any],
    profile: str | None = None,
    strategies: Sequence[str] = ("full-context", *UPSTREAM_BUILT),
    prep: str = "rule-based",
    dialogues: pd.DataFrame | None = None,
    questions: pd.DataFrame | None = None,
    settings: Sequence[str] = ("post", "pre"),
) -> pd.DataFrame:
    """For one injected-positive T3 question: what each strategy's stored artifact and
    answer-time context keep of the injection, per setting (§5.5, Appendix H Case 1).

    Args:
        question: a questions.parquet row (dict) with a non-empty ``injection``.
        profile: build profile.
        strategies: strategies to inspect.
        prep: prep model of the derived strategies.
        dialogues: the profile's dialogues (loaded when None).
        questions: the question set (loaded when None; the ``pre`` build injects every T3
            positive of the patient).
        settings: the settings to inspect (an LLM prep model builds each one it is asked for).

    Returns:
        One row per (strategy, setting): where (``stored`` artifact or ``context`` at answer
        time), prep_model, prep_warnings (replies the prep model got wrong, e.g. invalid
        JSON: Mem0 then stores nothing for that visit, A-Mem the raw encounter) and the
        :func:`kept` columns.
    """
    raw = question.get("injection")
    if not isinstance(raw, str) or not raw:
        raise ProbeError(f"artifact_inspection: question {question.get('qid')!r} has no injection")
    inj = json.loads(raw)
    parts = parse_injection(inj["text"])
    turns = dialogues if dialogues is not None else load("dialogues", profile)
    qs = questions if questions is not None else load("questions", profile)
    sid = int(inj["subject_id"])
    one = pd.DataFrame([dict(question)])
    rows = []
    for name in strategies:
        strat = get_strategy(name)
        for setting in settings:
            art = load_artifacts(
                name,
                profile,
                prep,
                setting=setting,
                subjects=[sid],
                questions=qs,
                dialogues=turns,
            )[sid]
            ctx = question_contexts(one, name, profile, setting, prep, dialogues=turns)
            for where, text in (
                ("stored", strat.store_text(art)),
                ("context", ctx["context"].iloc[0]),
            ):
                if text is None:
                    continue  # raw-text strategies store nothing but the dialogue
                rows.append(
                    {
                        "strategy": name,
                        "setting": setting,
                        "where": where,
                        "prep_model": art.prep_model,
                        "prep_warnings": _warnings(art),
                        **kept(text, parts),
                    }
                )
    return pd.DataFrame(rows)


def _warnings(art: Any) -> int:
    return len(_data(art).get("warnings", []))


def _data(art: Any) -> Mapping[str, Any]:
    return art.data if isinstance(art.data, Mapping) else {}


# Where each derived strategy keeps what its prep model wrote: (list key, item text key).
PREP_ITEMS: dict[str, tuple[str, str]] = {
    "llm-summary": ("summary", ""),
    "mem0": ("memories", "text"),
    "a-mem": ("notes", "content"),
}


def prep_outputs(
    subject_id: int,
    profile: str | None = None,
    prep: str = "rule-based",
    setting: str = "pre",
    strategies: Sequence[str] = tuple(PREP_ITEMS),
    excerpt_chars: int = 240,
) -> pd.DataFrame:
    """What a prep model wrote for one patient (paper §4 "Memory prep model", Appendix G.5):
    per derived strategy the number of items (1 summary, the memories, the notes), an excerpt
    of the first, and the prep warnings (replies it could not use) with the first of them.

    Returns:
        strategy, prep_model, setting, items, first_item, prep_warnings, first_warning.
    """
    rows = []
    for name in strategies:
        if name not in PREP_ITEMS:
            raise ProbeError(f"prep_outputs: {name!r} is not one of {sorted(PREP_ITEMS)}")
        art = load_artifacts(name, profile, prep, setting=setting, subjects=[subject_id])
        data, (key, text_key) = _data(art[subject_id]), PREP_ITEMS[name]
        got = data.get(key) or []
        items = [got] if isinstance(got, str) else [str(it.get(text_key, "")) for it in got]
        warnings = [str(w) for w in data.get("warnings", [])]
        rows.append(
            {
                "strategy": name,
                "prep_model": art[subject_id].prep_model,
                "setting": setting,
                "items": len(items),
                "first_item": items[0][:excerpt_chars] if items else "",
                "prep_warnings": len(warnings),
                "first_warning": warnings[0][:excerpt_chars] if warnings else "",
            }
        )
    return pd.DataFrame(rows)


def rank_positives(
    questions: pd.DataFrame,
    profile: str | None = None,
    strategies: Sequence[str] = UPSTREAM_BUILT,
    prep: str = "rule-based",
    dialogues: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Injected T3 positives ranked by how many derived artifacts (built ``pre``, i.e. from
    the injected dialogue) keep the lab fact — the instructive case for Case 1 is one whose
    fact survives construction while the relation does not.

    Args:
        questions: the question set.
        profile: build profile.
        strategies: derived strategies to check.
        prep: prep model.
        dialogues: the profile's dialogues (loaded when None).

    Returns:
        qid, subject_id, n_lab_fact, n_relation, sorted best first (ties by qid).
    """
    require_columns(questions, ["qid", "task", "gold", "injection"], "rank_positives")
    pos = questions[(questions["task"] == TASK) & (questions["injection"].astype(str) != "")]
    pos = pos[pos["injection"].notna()]
    if pos.empty:
        raise ProbeError("rank_positives: the question set has no injected T3 positive")
    turns = dialogues if dialogues is not None else load("dialogues", profile)
    injs = {r.qid: json.loads(r.injection) for r in pos.itertuples()}
    sids = sorted({int(i["subject_id"]) for i in injs.values()})
    stored = {}
    for name in strategies:
        arts = load_artifacts(
            name,
            profile,
            prep,
            setting="pre",
            subjects=sids,
            questions=questions,
            dialogues=turns,
        )
        stored[name] = {sid: get_strategy(name).store_text(a) for sid, a in arts.items()}
    rows = []
    for qid, inj in injs.items():
        parts, sid = parse_injection(inj["text"]), int(inj["subject_id"])
        marks = [kept(stored[n][sid], parts) for n in strategies]
        rows.append(
            {
                "qid": qid,
                "subject_id": sid,
                "n_lab_fact": sum(m["lab_fact"] for m in marks),
                "n_relation": sum(m["relation"] for m in marks),
            }
        )
    out = pd.DataFrame(rows)
    return out.sort_values(["n_lab_fact", "n_relation", "qid"], ascending=[False, True, True])
