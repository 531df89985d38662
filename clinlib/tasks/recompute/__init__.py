"""Independent gold recomputation for validation gate L2 (paper Appendix A: "The gold is
independently regenerated from the spec and the raw structured fields, and must equal the
candidate gold; threshold < 0.5%").

Nothing here imports the question generators or :mod:`clinlib.data.events`: the raw MIMIC-IV-shaped
hosp tables (``labevents``, ``prescriptions``, ``diagnoses_icd``, ``procedures_icd``,
``admissions``, ``d_icd_procedures``) are queried through DuckDB with this package's own SQL, and
every gold is recomputed from a question's ``meta`` JSON with this package's own arithmetic
(exact :class:`decimal.Decimal`, comparing ``|last - first|`` against ``threshold * |first|`` so
that no division is needed). The spec is :mod:`clinlib.tasks.rules` (its docstring and
constants) and the documented event-extraction rules of the kit (clinlib/data/events.py docstring),
re-implemented here in SQL:

* panel labs: an itemid of :data:`clinlib.data.vocab.LAB_PANEL`, a numeric ``valuenum``, and the
  panel's canonical unit (a blank unit is kept);
* visit attachment: a row's own ``hadm_id`` when that admission belongs to the patient; a row
  without ``hadm_id`` joins the earliest admission whose window ``[admittime - 1 day,
  dischtime]`` contains its time, else it belongs to no visit and is left out;
* one lab value per (visit, lab, calendar day): preferred itemid, then an abnormal flag, then
  the earliest ``charttime``, then the lowest ``labevent_id``;
* ``value_text`` = the reported ``value`` (trimmed), or the number at the lab's panel precision
  when MIMIC stores only the number (``value`` NULL, blank or ``'___'``);
* event ids ``LAB-<labevent_id>``, ``RX-<pharmacy_id>[-<k>]`` (order rows only, no BASE
  diluent), ``DX-<hadm_id>-<seq_num>``,
  ``PX-<hadm_id>-<seq_num>``; visits numbered by (admittime, hadm_id).

Meta keys read per task (written by the generators; a missing key is a recorded L2 failure).
Anchors are recomputed and compared where the rule fixes them (T1, T2, T4, T8, T9-lab):

* T1: subject_id, lab, date -> the single kept value of that lab on that day; gold
  ``"<value_text> <unit>"``; anchor its event id.
* T2: subject_id, lab, hadm_ids (2–5, in visit order) -> each admission's earliest kept value;
  rules.py trend label of the first and the last.
* T3: subject_id, hadm_id, lab_event_id, dx_code, dx_version -> the finding is an abnormal lab
  of that admission and the code is coded there; gold ``yes`` iff a T3 injection stating the
  finding is attached; subtype ``<Y|N>-<er|admit>`` from the raw admission_type.
* T4: subject_id, family, dx_hadm_id -> the family's first coded visit must be that admission
  (visit >= 1); evidence = the family's labs in earlier visits flagged abnormal on the family's
  side of the range (rules.T4_DIRECTION); anchors = the first stated family code row there +
  the evidence.
* T5: subject_id, hadm_id, kind (diagnosis / procedure: code, icd_version; lab: lab, lab_date,
  stated_value), statement -> ``yes`` iff an injected statement contradicts the raw record (it
  denies a coded diagnosis / procedure, or states a lab value different from the raw one);
  the natural subtype needs a non-glucose lab whose value differs at another visit.
* T6: subject_ids (A, B), subtype a_/b_/c_, lab -> distinct (version, code) diagnoses / max
  value / |last - first|, compared with SIMILAR_REL (counts: equal).
* T7: subject_id, hadm_id + the options -> exactly one option documented in that admission
  (drug ordered / procedure coded, matched as whole normalised words: drugs in the SQL drug key
  or the name's words, see :func:`drug_key_sql`); an option documented anywhere else in the
  record is an ambiguity failure.
* T8: subject_id, rx_event_id, lab -> the lab is a T8 target of the drug (longest key of
  T8_TREATMENT_TARGETS found as whole words in the SQL drug key; the order's MAIN row);
  before/after by the T8 windows; subtype = the magnitude bin.
* T9: subject_id + lab, date (lab / lab-unmeasured) or drug, hadm_id (other) -> no covered
  event states the asked fact (for drugs: any order of the same head word in the admission)
  -> gold ``insufficient information``.
* T10 (extended set): the items' raw times / admission times, see
  :mod:`clinlib.tasks.recompute.order`.
* T1R (extended set): T1's rule and the position in the visit, see
  :mod:`clinlib.tasks.recompute.t1r`.
* T7R (extended set): T7's medication rule, both twins (they share meta and options).
* T11 (extended set): the cut, the gold letter and the time-decay credits from the raw
  admission's labs, orders and procedures, see :mod:`clinlib.tasks.recompute.t11`.
"""

from __future__ import annotations

from clinlib.tasks.recompute.arithmetic import change_bin, compare_values, t8_gold, trend_gold
from clinlib.tasks.recompute.per_task import Recomputed, recompute_question
from clinlib.tasks.recompute.raw import (
    RawRecord,
    RecomputeError,
    drug_key_sql,
    drug_words_sql,
    load_raw,
)
from clinlib.tasks.registry import specs
from clinlib.tasks.spec import resolve


def __getattr__(name: str):
    # RECOMPUTERS: task -> its gate-L2 recomputation, a view of the task specs
    if name == "RECOMPUTERS":
        return {t.name: resolve(t.recompute) for t in specs() if t.recompute is not None}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "RawRecord",
    "RecomputeError",
    "Recomputed",
    "change_bin",
    "compare_values",
    "drug_key_sql",
    "drug_words_sql",
    "load_raw",
    "recompute_question",
    "t8_gold",
    "trend_gold",
]
