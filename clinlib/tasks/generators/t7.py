"""T7 treatment fact recall, four options (paper §3 "Task suite" T7; Appendix B.1 subtypes
medication / procedure; Appendix A L5: the T7 audit failure was a distractor substring leak;
Appendix G.3 Table 9).

Candidates: a covered medication of an encounter (one per generic drug per encounter, at most
:data:`MAX_ENCOUNTERS_PER_DRUG` encounters per patient and drug by stable hash; the drug must
belong to a therapeutic area of generators.treatments) or a covered procedure (one per
code per encounter; ICD-9 adjunct vessel/stent counts excluded; a domain of
generators.treatments). The question names the encounter by its admission date.

Options = the answer + three distractors of the same kind — the same therapeutic area for
drugs, the same domain AND ICD version for procedures — that

* appear nowhere in the patient's record (events or dialogue text, case-insensitive),
* share no head word with a drug the patient received (no "Metoprolol Succinate" when the
  record has metoprolol tartrate, no "Insulin Lispro" next to a recorded "Insulin"),
* are neither substrings nor superstrings of the answer, of each other or of any drug /
  procedure title in the patient's record.

Distractors are drawn by a stable hash of the qid and the option order is a stable hash
permutation, so both are fixed per question. A candidate without three valid distractors is
dropped (never padded). Gold = the answer's letter.

Drug names (clinlib.data.drugnames): a recorded name is classified by the whole-word class phrases
of its normalised key, and the answer option is the matched phrase in title case ("Insulin
(Regular) for Hyperkalemia" -> "Insulin", "OxyCODONE--Acetaminophen (5mg-325mg)" ->
"Acetaminophen"), never the recorded string: every option is then a generic name in the same
style, so the answer does not stand out by its spelling, and the answer's words are words of the
recorded name, which is how the L2 recompute finds it documented. The same generic spelled
several ways in one encounter ("MetFORMIN (Glucophage)", "Metformin") gives one question.
Record checks compare drugs in their normalised word form, qualifiers included; a recorded name
shorter than :data:`SHORT_NAME` (diluents "NS", "D5W") only counts as a whole word.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from clinlib.data.drugnames import drug_head, drug_key, drug_words, has_phrase
from clinlib.tasks import rules
from clinlib.tasks.answers.formats import ABSTAIN_CLAUSE
from clinlib.tasks.answers.kinds import OPTION
from clinlib.tasks.gates.leaks import option_leak
from clinlib.tasks.generators.common import (
    TaskInputs,
    make_qid,
    question_row,
    stable_hash,
    thin,
    to_frame,
)
from clinlib.tasks.generators.inputs import timestamp
from clinlib.tasks.generators.treatments import (
    PROCEDURE_POOLS,
    THERAPEUTIC_AREAS,
    display_name,
    drug_match,
    is_adjunct,
    leaks,
    procedure_domain,
)
from clinlib.tasks.recompute.per_task import gold_t7
from clinlib.tasks.source_text import as_data
from clinlib.tasks.spec import TaskSpec
from clinlib.tasks.templates import (
    T7_MEDICATION_TEMPLATES,
    T7_OPTION_LINE,
    T7_OPTIONS_HEADER,
    T7_PROCEDURE_TEMPLATES,
)

TASK = "T7"
FORMAT = "Reply with the letter of one option (A, B, C or D). " + ABSTAIN_CLAUSE
SUBTYPES = ("medication", "procedure")
MAX_ENCOUNTERS_PER_DRUG = 2
N_DISTRACTORS = len(rules.OPTION_LETTERS) - 1


def patient_treatments(inp: TaskInputs) -> dict[int, dict[str, list[str]]]:
    """Per patient: drug names as keys and as whole words (clinlib.data.drugnames: qualifiers
    dropped / kept), their head words, and procedure titles (lower)."""
    out: dict[int, dict[str, list[str]]] = {}
    for sid, recs in inp.by_subject.items():
        labels = [r["label"] for r in recs if r["kind"] == "medication" and r["label"] is not None]
        titles = [
            str(r["label"]).lower()
            for r in recs
            if r["kind"] == "procedure" and r["label"] is not None
        ]
        out[sid] = {
            "drugs": sorted({drug_key(x) for x in labels} | {drug_words(x) for x in labels}),
            "heads": sorted({h for x in labels if (h := drug_head(x))}),
            "procedures": sorted(set(titles)),
        }
    return out


def absent_from_record(
    record_text: str, record_names: list[str], record_heads: list[str]
) -> Callable[[str], bool]:
    """A (cached) test that an option text appears nowhere in one patient's record: not in
    its text, no substring relation with a recorded drug / procedure name (drugs compared in
    their clinlib.data.drugnames word form, so spacing and punctuation do not hide a match), and
    (drugs) no recorded head word."""
    cache: dict[str, bool] = {}

    def ok(cand: str) -> bool:
        if cand not in cache:
            low, words = cand.lower(), drug_words(cand)
            cache[cand] = not (
                low in record_text
                or any(_overlaps(low, words, n) for n in record_names if n)
                or (bool(record_heads) and drug_head(cand) in record_heads)
            )
        return cache[cand]

    return ok


SHORT_NAME = 4
"""A recorded name shorter than this (diluents such as "NS", "D5W") relates to an option only
as a whole word: as a plain substring it would rule out most distractors ("ns" in "insulin")."""


def _overlaps(low: str, words: str, name: str) -> bool:
    """Whether an option (lower text / drug words) and a recorded name are in a substring
    relation (see :data:`SHORT_NAME`)."""
    if len(name) < SHORT_NAME:
        return has_phrase(words, name) or has_phrase(name, words)
    return leaks(low, name) or leaks(words, name)


def choose_distractors(
    qid: str, answer: str, pool: list[str], usable: Callable[[str], bool]
) -> list[str] | None:
    """Three distractors for ``answer`` from ``pool`` in a stable per-question order: no
    substring relation with the answer or with each other, and ``usable`` (absent from the
    patient's record). None when fewer than three qualify."""
    chosen: list[str] = []
    for cand in sorted(pool, key=lambda c: stable_hash(qid, "distractor", c.lower())):
        if leaks(cand, answer) or any(leaks(cand, c) for c in chosen) or not usable(cand):
            continue
        chosen.append(cand)
        if len(chosen) == N_DISTRACTORS:
            return chosen
    return None


def order_options(qid: str, texts: list[str]) -> list[str]:
    """A stable per-question permutation of the option texts."""
    return sorted(texts, key=lambda t: stable_hash(qid, "option", t))


def options_block(options: list[str]) -> str:
    """``Options:`` followed by one ``A. text`` line per option."""
    lines = [T7_OPTIONS_HEADER]
    lines += [
        T7_OPTION_LINE.format(letter=letter, text=as_data(text))
        for letter, text in zip(rules.OPTION_LETTERS, options, strict=True)
    ]
    return "\n".join(lines)


def generate(inp: TaskInputs) -> pd.DataFrame:
    """All T7 candidates (QUESTION_COLUMNS + conflicts)."""
    treat = patient_treatments(inp)
    rows = []
    # the encounters kept per (patient, drug): a drug ordered at every stay would otherwise
    # give one near-identical question per stay
    keys = sorted(
        {
            (e["subject_id"], e["visit_idx"], m[1])
            for e in inp.records
            if e["kind"] == "medication"
            and e["status"] == "covered"
            and e["label"] is not None
            and (m := drug_match(e["label"])) is not None
        }
    )
    kept = thin(
        keys,
        key=lambda k: (k[0], k[2]),
        ident=lambda k: k[1],
        cap=MAX_ENCOUNTERS_PER_DRUG,
        salt="T7",
    )
    # encounters left out are marked as already seen
    seen: set[tuple] = {(s, v, "rx", g) for s, v, g in set(keys) - set(kept)}
    for _, recs in sorted(inp.by_visit.items()):
        for e in recs:  # in time order: the first order of a drug is its anchor
            if e["status"] != "covered" or e["label"] is None:
                continue
            if e["kind"] == "medication":
                row = _medication(inp, e, treat, seen)
            elif e["kind"] == "procedure":
                row = _procedure(inp, e, treat, seen)
            else:
                continue
            if row is not None:
                rows.append(row)
    return to_frame(rows)


def _medication(inp: TaskInputs, e: dict, treat: dict, seen: set) -> dict | None:
    m = drug_match(e["label"])
    if m is None:
        return None
    area, generic = m
    key = (e["subject_id"], e["visit_idx"], "rx", generic)
    if key in seen:
        return None
    seen.add(key)
    pool = [display_name(x) for x in THERAPEUTIC_AREAS[area] if x != generic]
    extra = {"area": area, "drug": str(e["label"])}
    return _row(inp, e, "medication", display_name(generic), pool, treat, extra)


def _procedure(inp: TaskInputs, e: dict, treat: dict, seen: set) -> dict | None:
    version = e["icd_version"]
    if version is None or is_adjunct(e["code"], version):
        return None
    domain = procedure_domain(e["code"], version, e["label"])
    key = (e["subject_id"], e["visit_idx"], "px", str(e["code"]), int(version))
    if domain is None or key in seen:
        return None
    seen.add(key)
    answer = str(e["label"])
    pool = [
        t
        for c, t in PROCEDURE_POOLS.get((domain, int(version)), {}).items()
        if c != str(e["code"]).strip().upper() and t.lower() != answer.lower()
    ]
    extra = {"domain": domain, "code": str(e["code"]), "icd_version": int(version)}
    return _row(inp, e, "procedure", answer, pool, treat, extra)


def _row(
    inp: TaskInputs, e: dict, kind: str, answer: str, pool: list[str], treat: dict, extra: dict
) -> dict | None:
    sid, v = int(e["subject_id"]), int(e["visit_idx"])
    qid = make_qid(TASK, [sid], [e["event_id"]], kind)
    checks = treat.get(("checks", sid, kind))
    if checks is None:
        t = treat.get(sid, {"drugs": [], "heads": [], "procedures": []})
        heads = t["heads"] if kind == "medication" else []
        checks = absent_from_record(
            inp.record_text.get(sid, ""), t["drugs"] + t["procedures"], heads
        )
        treat[("checks", sid, kind)] = checks
    distractors = choose_distractors(qid, answer, pool, checks)
    if distractors is None:
        return None
    options = order_options(qid, [answer, *distractors])
    gold = rules.OPTION_LETTERS[options.index(answer)]
    info = inp.visit_info[(sid, v)]
    templates = T7_MEDICATION_TEMPLATES if kind == "medication" else T7_PROCEDURE_TEMPLATES
    row = question_row(
        inp,
        task=TASK,
        subtype=kind,
        subject_ids=[sid],
        anchors=[e["event_id"]],
        templates=templates,
        fields={"date": info["date"]},
        gold=gold,
        options=options,
        suffix=options_block(options),
        meta={
            "subject_id": sid,
            "hadm_id": int(info["hadm_id"]),
            "visit_idx": v,
            "date": info["date"],
            "event_id": e["event_id"],
            "kind": kind,
            "answer": answer,
            "distractors": distractors,
            "options": options,
            "start": timestamp(e["t"]).isoformat(),
            **extra,
        },
    )
    assert row["qid"] == qid
    return row


SPEC = TaskSpec(
    name=TASK,
    title="Treatment fact recall",
    answer_format=FORMAT,
    max_tokens=80,
    answer=OPTION,
    subtypes=tuple(SUBTYPES),
    generate=generate,
    recompute=gold_t7,
    leak=option_leak,
    options="texts",
    reader_policy="clinlib.eval.readers.policies:answer_t7",
)
