"""The dialogue length budget: what a clinician says in the time a visit gets (paper Appendix
C.1, Fig. 13: dialogue length median 13.7k, mean 15.0k, max 30.7k characters over records of
median 10, mean 16.0, max 93 visits).

A record of ``n`` visits gets ``B(n) = BUDGET_AT_REF * (n / REF_VISITS) ** BUDGET_EXPONENT``
characters of rendered dialogue (headers and speaker prefixes included). The constants are
fitted to Fig. 13: ``B(10)`` is the paper's median length (a median record lands near the
median dialogue) and the exponent 1/3 is the largest simple one that keeps the longest record
under the paper's maximum: ``B(93) = 13,700 * 9.3 ** (1/3) = 28,810 <= 30,700`` (an exponent
of 0.366 would reach it exactly). The budget grows sublinearly: a long record gets less time
per visit, as in a clinic.

The budget is split over visits by max-min fairness on what each visit would say in full
(:func:`fair_shares`): a visit that needs less than an equal share keeps everything and its
leftover goes to the others; visits are fitted in time order and what one leaves unused (or
overruns) carries to the next. Inside a visit, facts are told in priority order
(:func:`priority`; tier 0 — never left out — also holds a contraindication conflict's drug and
lab (clinlib.data.contraindications.conflict_event_ids), a diagnosis of a condition coded
for the first time and the few (at most :data:`FIRST_ABNORMAL`) abnormal values that
foreshadowed it in earlier visits (clinlib.dialogue.templates.FORESHADOWS; T4's anchors and evidence); in tier 1 each lab's first abnormal
value comes before its second, and so on; otherwise a seeded hash orders a tier) until the
share is used; the rest is left unstated and recorded as ``missed`` with a ``budget:`` reason
(clinlib.dialogue.fitting), joining the T9 pool.
Facts travel in groups that are told or left out together, so a missed fact is never half-told:
every lab of one name on one day, every order of one drug in one visit, every row of one
diagnosis / procedure code in one visit.
"""

from __future__ import annotations

from collections.abc import Mapping

REF_VISITS = 10  # the paper's median visits per patient (Fig. 13A)
BUDGET_AT_REF = 13_700  # the paper's median dialogue length in characters (Fig. 13B)
BUDGET_EXPONENT = 1 / 3
# A visit whose bare facts (no lab, no drug) already take more than this share of its budget
# drops the small talk (symptom sentence, greeting, worries, closing) before any fact.
TERSE_SHARE = 0.5
BUDGET_REASON = "budget: over the visit's time budget"
# The first abnormal values of each lab and direction in a record are news a clinician tells
# first (and the earlier evidence of a later diagnosis, the T4 anchors, lies among them).
FIRST_ABNORMAL = 4

# Priority tiers, lower told first (tier 0 is never left out).
TIER_NAMES: dict[int, str] = {
    0: "admission, discharge, principal or newly coded diagnosis, foreshadowing finding, "
    "contraindication conflict",
    1: "procedure, index-disease diagnosis, or one of a lab's first abnormal values",
    2: "key lab: abnormal, admission-day, or the record's first / last value",
    3: "disease drug",
    4: "other diagnosis",
    5: "key lab on the last lab day, or abnormal non-key lab",
    6: "non-key lab on the admission lab day",
    7: "background drug or routine lab",
}


def budget_chars(n_visits: int) -> int:
    """Characters a record of ``n_visits`` visits may take (module docstring)."""
    if n_visits <= 0:
        return 0
    return round(BUDGET_AT_REF * (n_visits / REF_VISITS) ** BUDGET_EXPONENT)


def fair_shares(need: Mapping[int, float], total: float) -> dict[int, float]:
    """Max-min fair split of ``total`` over visits that each ``need`` some amount.

    Visits in ascending need (ties by key) each take ``min(need, equal share of what is
    left)``, so a visit needing less than its share keeps all it needs and the rest is shared
    by the visits needing more.
    """
    out: dict[int, float] = {}
    left = float(total)
    order = sorted(need, key=lambda v: (need[v], v))
    for i, v in enumerate(order):
        out[v] = min(float(need[v]), left / (len(order) - i))
        left -= out[v]
    return out


def priority(
    kind: str,
    *,
    key_lab: bool = False,
    abnormal: bool = False,
    first_day: bool = False,
    last_day: bool = False,
    record_end: bool = False,
    disease: bool = False,
    principal: bool = False,
    first_abnormal: bool = False,
    foreshadow: bool = False,
    new_condition: bool = False,
    safety: bool = False,
) -> int:
    """Tier (see :data:`TIER_NAMES`) of a group of facts.

    Args:
        kind: the events' kind.
        key_lab: a lab of clinlib.dialogue.fields.KEY_LABS.
        abnormal: a lab outside its range or flagged.
        first_day / last_day: a lab on its visit's first / last lab day.
        record_end: a lab that is the patient's first or last value of that lab (T2 / T6
            anchors rest on these).
        disease: a diagnosis of an index disease or symptom group; a drug that treats one.
        principal: the visit's first diagnosis.
        first_abnormal: a lab among the record's first :data:`FIRST_ABNORMAL` abnormal values
            of that lab in that direction.
        foreshadow: one of the few (at most :data:`FIRST_ABNORMAL`) abnormal values that point
            to a condition first coded in a later visit (clinlib.dialogue.templates.FORESHADOWS).
        new_condition: a diagnosis of a condition coded for the first time in the record.
        safety: the drug or the lab of a contraindication conflict (a drug given while the lab
            state contraindicated it).
    """
    if kind in ("admission", "discharge") or principal or foreshadow or new_condition or safety:
        return 0
    if kind == "diagnosis":
        return 1 if disease else 4
    if kind == "procedure":  # few, and what was done is told early
        return 1
    if kind == "medication":
        return 3 if disease else 7
    if first_abnormal:
        return 1
    if key_lab and (abnormal or first_day or record_end):
        return 2
    if (key_lab and last_day) or abnormal:
        return 5
    if first_day or record_end:
        return 6
    return 7
