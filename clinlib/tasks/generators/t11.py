"""T11 long-horizon decisions, an extended task (LongMedBench's decision task, Table 4 / Table 5: "From V_n, we sample a
ground-truth event E^GT, and define the agent's contextual memory as its working context S. The
long-horizon note or event memory is also provided as a reference M"; its T3-N next action,
T3-A argument and T3-D discharge within 6 h; docs/design.md "T11"). Not part of the paper's
6,271 questions.

The cut. A visit of rank >= 1 (so that a history exists) with an admission and a discharge
event and at most T10_MAX_VISIT_EVENTS events; a CUT event: a lab or medication
(rules.T11_CUT_KINDS, minute-resolution times) strictly between admission and discharge,
classified by the dialogue stage (covered or missed). The cut time T is its minute. The
working context S = the visit's events before T (no discharge, no diagnosis: both carry the
discharge time), rewritten as the seed's contextual memory M_C — one action–feedback pair per
event, "(assistant, {a, t, p}), (user, {f, t'})", rule-based
(:func:`clinlib.tasks.generators.t10_text.contextual_memory`) — and stated in the question with
"It is now T"; S must hold at least T11_MIN_CONTEXT_EVENTS events. The memory M is the
history representation the harness adds (``history-visits(m=...)``: the m visits before the
current one, verbatim; never the current visit or a later one).

Actions (rules.T11_ACTION_KINDS) are the visit's labs (one value per lab and day, as the events
table keeps them), medication orders (start time) and procedures (their chartdate at 00:00).
An action's ARGUMENT is the lab's panel name, the order's "drug dose unit route"
(:func:`clinlib.tasks.generators.t10_text.med_text`) or the procedure's title.

* ``next_action``: options = the action kinds of the patient's whole record (``lab test``,
  ``medication order``, ``procedure``; at least two), gold = the cut event's kind;
* ``argument``: "the next action is a <kind>"; options = the cut event's argument and
  T11_ARGUMENT_OPTIONS - 1 other arguments of that kind from the patient's whole record,
  none of them an action at the cut's minute (a stable-hash pick); gold = the cut event's;
* ``discharge``: options yes / no; gold yes iff the discharge is at most T11_DISCHARGE_MIN after
  T. Each visit offers one cut within that window and one before it, when it has them.

Credits (next action, argument): an option earns the time decay
(:func:`clinlib.tasks.answers.decision.decay`) of the earliest action of the CURRENT visit
at or after T that it matches; the gold string carries them. Options are shown in a
stable-hash order. One candidate per (visit, subtype) (discharge: per answer; argument: the
first of up to three cuts, in a stable-hash order, that has enough distractors), at most
MAX_PER_PATIENT per (patient, subtype), the first in a stable-hash order of the visits.
"""

from __future__ import annotations

import hashlib
import json
import re
from fractions import Fraction

import pandas as pd

from clinlib.data.vocab import LAB_BY_KEY
from clinlib.tasks import rules
from clinlib.tasks.answers.decision import decay, decay_text, decision_gold
from clinlib.tasks.answers.formats import ABSTAIN_CLAUSE
from clinlib.tasks.answers.kinds import DECISION, AnswerKind
from clinlib.tasks.answers.order import ORDER_LETTERS
from clinlib.tasks.gates.ordering import t11_leak
from clinlib.tasks.generators.common import TaskInputs, question_row, stable_hash, to_frame
from clinlib.tasks.generators.t10_text import contextual_memory, med_text, options_block, stamp
from clinlib.tasks.recompute.t11 import recompute_t11, recompute_t11_open
from clinlib.tasks.source_text import Assembled
from clinlib.tasks.spec import TaskSpec
from clinlib.tasks.templates import T11_TEMPLATES

TASK = "T11"
# LongMedBench's decisions (T3-N, T3-A, T3-D): one option letter (next action, argument, discharge).
FORMAT = "Reply with the letter of one option only. " + ABSTAIN_CLAUSE
SUBTYPES = rules.T11_SUBTYPES
MAX_PER_PATIENT = 4
CUT_STATUSES = ("covered", "missed")
ACTION_NAMES = {"lab": "lab test", "medication": "medication order", "procedure": "procedure"}
ARGUMENT_WHAT = {"lab": "lab test", "medication": "medication (drug, dose and route)"}
_US_PER_MIN = 60_000_000
# The open-ended variant (T11O): the seed's T3-N and T3-A as free text.
OPEN_TASK = "T11O"
OPEN_SUBTYPES = ("next_action", "argument")
OPEN_FORMAT = (
    "Reply with the next action only, in a few words: its kind (lab test, medication order or "
    "procedure) or, when the kind is given, its name (a lab test's name, a drug's name). "
    + ABSTAIN_CLAUSE
)
OPEN_WHAT = {"lab": "lab test", "medication": "medication (drug name)"}
MC_LEAD = (
    "(the contextual memory: each event as an action by the care team, 'assistant', and the "
    "clinical feedback, 'user')\n"
)


def argument(r: dict) -> str | None:
    """The argument of an action record (module docstring); None for a non-action."""
    if r["kind"] == "lab":
        lab = LAB_BY_KEY.get(str(r["lab_key"]))
        return lab.label if lab is not None else None
    if r["kind"] == "medication":
        return med_text(r) or None
    if r["kind"] == "procedure":
        return str(r["label"]).strip() if r["label"] is not None else None
    return None


def credits_after(recs: list[dict], t_cut: int, match) -> Fraction:
    """The decay credit of the earliest action in ``recs`` at or after ``t_cut`` for which
    ``match(record)`` holds (0 when none lies within the horizon)."""
    deltas = [
        Fraction(r["t"] - t_cut, _US_PER_MIN)
        for r in recs
        if r["kind"] in rules.T11_ACTION_KINDS and r["t"] >= t_cut and match(r)
    ]
    return decay(min(deltas)) if deltas else Fraction(0)


def _shown(values: list[str], salt: str) -> list[str]:
    return sorted(values, key=lambda x: stable_hash(salt, x))


def context_records(recs: list[dict], t_cut: int) -> list[dict]:
    """The events the contextual memory M_C states: the visit's before the cut, without the
    discharge and the diagnoses (both carry the discharge time)."""
    return [r for r in recs if r["t"] < t_cut and r["kind"] not in ("discharge", "diagnosis")]


def working_context(recs: list[dict], cut: dict) -> dict:
    """The fields every T11 / T11O question states before its own: the contextual memory M_C
    of the events before the cut (``stream``) and the cut time (``now``)."""
    return {
        "stream": Assembled(MC_LEAD + contextual_memory(context_records(recs, cut["t"]))),
        "now": stamp(cut),
    }


def _decision_row(
    inp: TaskInputs,
    task: str,
    subtype: str,
    cut: dict,
    recs: list[dict],
    fields: dict,
    options: list[str] | None = None,
    **kw,
) -> dict:
    """One T11 / T11O question row: the working context, then ``fields``; ``kw`` goes to
    :func:`question_row` (gold, meta, T11O's format). With ``options`` (T11), the options
    block follows the stem and the qid keys on the content as well."""
    stated = {**working_context(recs, cut), **fields}
    if options is not None:
        content = json.dumps(
            [options, stated, kw["meta"], T11_TEMPLATES[subtype], FORMAT],
            sort_keys=True,
            default=str,
        )
        kw |= {
            "options": options,
            "suffix": options_block(options),
            "extra_key": [hashlib.sha1(content.encode()).hexdigest()[:12]],
        }
    return question_row(
        inp,
        task=task,
        subtype=subtype,
        subject_ids=[cut["subject_id"]],
        anchors=[cut["event_id"]],
        templates=T11_TEMPLATES[subtype],
        fields=stated,
        **kw,
    )


def _row(
    inp: TaskInputs,
    subtype: str,
    cut: dict,
    recs: list[dict],
    options: list[str],
    letter: str,
    credits: dict[str, Fraction],
    fields: dict,
    meta: dict,
) -> dict:
    gold = decision_gold(letter, credits)
    return _decision_row(inp, TASK, subtype, cut, recs, fields, options, gold=gold, meta=meta)


def _meta(cut: dict, recs: list[dict], n_prior: int, **extra) -> dict:
    return {
        "subject_id": int(cut["subject_id"]),
        "hadm_id": int(cut["hadm_id"]),
        "visit_idx": int(cut["visit_idx"]),
        "cut_event_id": cut["event_id"],
        "cut_time": stamp(cut),
        "n_prior_visits": int(n_prior),
        **extra,
    }


def _next_action(inp, cut, recs, kinds, n_prior) -> dict | None:
    names = [ACTION_NAMES[k] for k in kinds]
    if len(names) < 2:
        return None
    shown = _shown(names, f"T11-N|{cut['event_id']}")
    by_name = {ACTION_NAMES[k]: k for k in kinds}
    credits = {
        ORDER_LETTERS[i]: credits_after(recs, cut["t"], lambda r, k=by_name[n]: r["kind"] == k)
        for i, n in enumerate(shown)
    }
    letter = ORDER_LETTERS[shown.index(ACTION_NAMES[cut["kind"]])]
    meta = _meta(cut, recs, n_prior, kind=cut["kind"], options=[by_name[n] for n in shown])
    return _row(inp, "next_action", cut, recs, shown, letter, credits, {}, meta)


def _argument(inp, cut, recs, pool, n_prior) -> dict | None:
    if cut["kind"] not in ARGUMENT_WHAT:
        return None
    gold_arg = argument(cut)
    at_cut = {argument(r) for r in recs if r["t"] == cut["t"] and r["kind"] == cut["kind"]}
    others = sorted({a for a in pool.get(cut["kind"], ()) if a not in at_cut and a})
    others.sort(key=lambda a: stable_hash("T11-A-pick", cut["event_id"], a))
    if gold_arg is None or len(others) < rules.T11_ARGUMENT_OPTIONS - 1:
        return None
    shown = _shown(
        [gold_arg, *others[: rules.T11_ARGUMENT_OPTIONS - 1]], f"T11-A|{cut['event_id']}"
    )
    credits = {
        ORDER_LETTERS[i]: credits_after(
            recs, cut["t"], lambda r, a=a: r["kind"] == cut["kind"] and argument(r) == a
        )
        for i, a in enumerate(shown)
    }
    meta = _meta(cut, recs, n_prior, kind=cut["kind"])
    fields = {"action": ACTION_NAMES[cut["kind"]], "what": ARGUMENT_WHAT[cut["kind"]]}
    return _row(
        inp,
        "argument",
        cut,
        recs,
        shown,
        ORDER_LETTERS[shown.index(gold_arg)],
        credits,
        fields,
        meta,
    )


def _discharge(inp, cut, recs, dis, n_prior) -> dict:
    left = Fraction(dis["t"] - cut["t"], _US_PER_MIN)
    letter = "A" if left <= rules.T11_DISCHARGE_MIN else "B"
    meta = _meta(cut, recs, n_prior, discharge_event_id=dis["event_id"], discharge_time=stamp(dis))
    return _row(inp, "discharge", cut, recs, ["yes", "no"], letter, {}, {}, meta)


def open_argument(r: dict) -> str | None:
    """The argument an open answer names (T11O): a lab's panel name, a drug's recorded name
    (no dose or route), a procedure's title; ``|`` and ``=`` (the gold's separators) dropped."""
    if r["kind"] == "lab":
        text = argument(r)
    elif r["kind"] in ("medication", "procedure"):
        text = str(r["label"]).strip() if r["label"] is not None else None
    else:
        return None
    return " ".join(text.replace("|", " ").replace("=", " ").split()) if text else None


def _open_row(inp: TaskInputs, subtype: str, cut: dict, recs: list[dict], n_prior: int):
    """One T11O question: the T11 stem without options; gold = the ground truth's text and
    every other entry credited by the time decay (:func:`open_score`)."""
    if subtype == "next_action":
        truth = ACTION_NAMES[cut["kind"]]
        credits = {
            ACTION_NAMES[k]: credits_after(recs, cut["t"], lambda r, k=k: r["kind"] == k)
            for k in rules.T11_ACTION_KINDS
        }
        fields: dict = {}
    else:
        truth = open_argument(cut)
        if truth is None or cut["kind"] not in ARGUMENT_WHAT:
            return None
        later = {
            a
            for r in recs
            if r["kind"] == cut["kind"] and r["t"] >= cut["t"] and (a := open_argument(r))
        }
        credits = {
            a: credits_after(
                recs, cut["t"], lambda r, a=a: r["kind"] == cut["kind"] and open_argument(r) == a
            )
            for a in later
        }
        fields = {"action": ACTION_NAMES[cut["kind"]], "what": OPEN_WHAT[cut["kind"]]}
    extra = [f"{e}={decay_text(c)}" for e, c in sorted(credits.items()) if e != truth]
    gold = "|".join([truth, *[x for x in extra if not x.endswith("=0.0000")]])
    meta = _meta(cut, recs, n_prior, kind=cut["kind"], variant="open")
    return _decision_row(
        inp, OPEN_TASK, subtype, cut, recs, fields, gold=gold, meta=meta, fmt=OPEN_FORMAT
    )


def _cuts(recs: list[dict]) -> tuple[list[dict], dict | None]:
    adm = next((r for r in recs if r["kind"] == "admission"), None)
    dis = next((r for r in recs if r["kind"] == "discharge"), None)
    if adm is None or dis is None or len(recs) > rules.T10_MAX_VISIT_EVENTS:
        return [], None
    ok = [
        r
        for r in recs
        if r["kind"] in rules.T11_CUT_KINDS
        and adm["t"] < r["t"] < dis["t"]
        and r["status"] in CUT_STATUSES
        and len(context_records(recs, r["t"])) >= rules.T11_MIN_CONTEXT_EVENTS
    ]
    return ok, dis


def _open_visit_rows(inp: TaskInputs, sid: int, v: int, n_prior: int, kinds, pool) -> dict:
    """T11O's rows of one visit: the cuts T11's next action and argument use, asked open."""
    recs = inp.by_visit[(sid, v)]
    cuts, _dis = _cuts(recs)
    out: dict[str, list[dict]] = {s: [] for s in OPEN_SUBTYPES}
    if not cuts:
        return out
    salt = f"{sid}|{v}"
    pick = sorted(cuts, key=lambda r: stable_hash("T11-cut", salt, r["event_id"]))
    out["next_action"] += (
        [r] if (r := _open_row(inp, "next_action", pick[0], recs, n_prior)) else []
    )
    for cut in sorted(cuts, key=lambda r: stable_hash("T11-A", salt, r["event_id"]))[:3]:
        row = _open_row(inp, "argument", cut, recs, n_prior)
        if row:
            out["argument"].append(row)
            break
    return out


def _visit_rows(inp: TaskInputs, sid: int, v: int, n_prior: int, kinds, pool) -> dict:
    recs = inp.by_visit[(sid, v)]
    cuts, dis = _cuts(recs)
    out: dict[str, list[dict]] = {s: [] for s in SUBTYPES}
    if not cuts:
        return out
    salt = f"{sid}|{v}"
    pick = sorted(cuts, key=lambda r: stable_hash("T11-cut", salt, r["event_id"]))
    row = _next_action(inp, pick[0], recs, kinds, n_prior)
    out["next_action"] += [row] if row else []
    for cut in sorted(cuts, key=lambda r: stable_hash("T11-A", salt, r["event_id"]))[:3]:
        row = _argument(inp, cut, recs, pool, n_prior)
        if row:
            out["argument"].append(row)
            break
    near = [r for r in cuts if dis["t"] - r["t"] <= rules.T11_DISCHARGE_MIN * _US_PER_MIN]
    far = [r for r in cuts if dis["t"] - r["t"] > rules.T11_DISCHARGE_MIN * _US_PER_MIN]
    for group in (near, far):
        if group:
            cut = min(group, key=lambda r: stable_hash("T11-D", salt, r["event_id"]))
            out["discharge"].append(_discharge(inp, cut, recs, dis, n_prior))
    return out


def generate(inp: TaskInputs) -> pd.DataFrame:
    """All T11 candidates (QUESTION_COLUMNS + conflicts), sorted by qid."""
    return _generate(inp, _visit_rows, SUBTYPES)


def generate_open(inp: TaskInputs) -> pd.DataFrame:
    """All T11O candidates (QUESTION_COLUMNS + conflicts), sorted by qid."""
    return _generate(inp, _open_visit_rows, OPEN_SUBTYPES)


def _generate(inp: TaskInputs, visit_rows, subtypes) -> pd.DataFrame:
    visits: dict[int, list[int]] = {}
    for s, v in inp.visit_info:
        visits.setdefault(s, []).append(v)
    rows: list[dict] = []
    for sid in sorted(visits):
        own = inp.by_subject[sid]
        kinds = [k for k in rules.T11_ACTION_KINDS if any(r["kind"] == k for r in own)]
        pool: dict[str, set[str]] = {}
        for r in own:
            a = argument(r)
            if a:
                pool.setdefault(r["kind"], set()).add(a)
        order = sorted(visits[sid])
        per: dict[str, list[dict]] = {s: [] for s in subtypes}
        for v in sorted(order[1:], key=lambda v: stable_hash("T11-visit", sid, v)):
            for s, found in visit_rows(inp, sid, v, order.index(v), kinds, pool).items():
                per[s] += found[: max(0, MAX_PER_PATIENT - len(per[s]))]
        rows += [r for found in per.values() for r in found]
    return to_frame(rows)


SPEC = TaskSpec(
    name=TASK,
    title="Long-horizon decisions (extended set)",
    answer_format=FORMAT,
    max_tokens=60,
    answer=DECISION,
    family="extended",
    subtypes=tuple(SUBTYPES),
    generate=generate,
    recompute=recompute_t11,
    leak=t11_leak,
    counts={"paper": 900, "quick": 24},
    select="clinlib.tasks.decisions:select_t11",
    cut=True,
    options="items",
    anchor_status=("covered", "missed"),
)
# --- the open-ended variant (T11O): next action and argument as free text ------------------
# LongMedBench asks T3-N / T3-A open-ended and credits "actions E_24h, events that occur within
# 24h after t_GT" by time decay (its Figure 2). Gold (canonical): the ground-truth text, then
# every other credited entry as ``|<text>=<credit>``: ``"Potassium|Sodium=0.9583"``. An entry is
# an action kind (``lab test``, ``medication order``, ``procedure``) or an argument (a lab's
# panel name, a drug's recorded name, a procedure's title).
KIND_WORDS = {
    "lab test": ("lab", "labs", "lab test", "laboratory", "blood test", "blood draw"),
    "medication order": ("medication", "medications", "drug", "prescription", "medication order"),
    "procedure": ("procedure", "procedures"),
}
_OPEN_GOLD_RE = re.compile(r"[^|=]+(?:\|[^|=]+=(?:0|1)\.\d{4})*")


def words(text: object) -> str:
    """Lower-case alphanumeric words of a text, single-spaced."""
    return " ".join(re.sub(r"[^0-9a-z]+", " ", str(text).lower()).split())


def split_open_gold(gold: str) -> dict[str, float]:
    """entry text -> credit of an open gold (the first entry = 1)."""
    first, *rest = gold.split("|")
    out = {first.strip(): 1.0}
    for part in rest:
        text, value = part.rsplit("=", 1)
        out[text.strip()] = float(value)
    return out


def open_gold_problem(gold: object, options: list[str] | None = None) -> str | None:
    """Why ``gold`` is not a canonical open T11 gold (None when it is)."""
    if not isinstance(gold, str) or not _OPEN_GOLD_RE.fullmatch(gold):
        return "not '<text>' followed by '|<text>=<credit>' parts"
    if any(float(v) > 1 for v in split_open_gold(gold).values()):
        return "a credit above 1"
    return None


def _kind_of(answer: str) -> str | None:
    """The one action kind an answer names (None: none or several)."""
    w = f" {words(answer)} "
    named = {k for k, syn in KIND_WORDS.items() if any(f" {s} " in w for s in syn)}
    return named.pop() if len(named) == 1 else None


def open_score(parsed: str | None, gold: str) -> float:
    """The credit of an open answer: a next action is the one kind it names; an argument
    matches the LONGEST entry whose words begin it (``Heparin 5000 UNIT SC`` matches
    ``Heparin``; ``Potassium`` does not match ``Potassium Chloride``); 0 otherwise."""
    if parsed is None:
        return 0.0
    credits = split_open_gold(gold)
    if set(credits) <= set(KIND_WORDS):
        kind = _kind_of(parsed)
        return credits.get(kind, 0.0) if kind else 0.0
    w = words(parsed)
    hits = [e for e in credits if words(e) and (w == words(e) or w.startswith(words(e) + " "))]
    return credits[max(hits, key=lambda e: len(words(e)))] if hits else 0.0


def _open_read(text: str, options: list[str] | None = None) -> str | None:
    line = next((x.strip() for x in str(text).splitlines() if x.strip()), "")
    line = re.sub(r"^(?:answer|the next action is|next action)\s*[:\-]?\s*", "", line, flags=re.I)
    line = line.strip(" .;:\"'")
    return line or None


OPEN_DECISION = AnswerKind(
    "text",
    _open_read,
    _open_read,
    open_gold_problem,
    lambda parsed, gold: open_score(parsed, gold) >= 1.0,
    grade=open_score,
)


OPEN_SPEC = TaskSpec(
    name=OPEN_TASK,
    title="Long-horizon decisions, open-ended next action and argument (extended set)",
    answer_format=OPEN_FORMAT,
    max_tokens=40,
    answer=OPEN_DECISION,
    family="extended",
    subtypes=OPEN_SUBTYPES,
    generate=generate_open,
    recompute=recompute_t11_open,
    leak=t11_leak,
    counts={"paper": 600, "quick": 16},
    cut=True,
    anchor_status=("covered", "missed"),
)
SPECS = (SPEC, OPEN_SPEC)
