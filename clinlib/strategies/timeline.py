"""structured-timeline: one compact table row per encounter (paper §4 "Compression.
structured-timeline (per-encounter table)"; §5.6: it "never reaches the frontier despite
competitive accuracy — the structured tokens fail to compress enough").

Each row holds the encounter's dates, admission type and discharge location, its labs with
values, units and flags (grouped by day), medications with dose, unit and route, diagnoses with
ICD codes and procedures with codes and dates — the structured fields, without the narrative.
Built once per patient from the dialogue text by the prep model: the rule-based reader
(:mod:`clinlib.strategies.facts`) or an LLM asked, visit by visit, for the same fields as JSON
(:data:`VISIT_EXTRACTION_PROMPT`). Derived: a sentence injected after construction is absent,
and a free-text clinical assertion (the T3 attribution) has no column, so the timeline drops
it even when it was present at construction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from clinlib.dialogue.render import render_visit
from clinlib.strategies.base import Artifact, StoredTextStrategy, visit_order
from clinlib.strategies.facts import Fact, facts_of
from clinlib.strategies.prep import PrepError, PrepRequest, count_text_tokens, parse_json_reply

TIMELINE_TITLE = "Structured timeline (one row per encounter; H/L = above/below range, A = flagged)"
TABLE_HEADER = "| # | encounter | labs | medications | diagnoses | procedures |"
TABLE_RULE = "|---|---|---|---|---|---|"
FLAG_MARK = {"high": "H", "low": "L", "abnormal": "A"}

VISIT_EXTRACTION_PROMPT = """You convert one hospital encounter of a patient-clinician \
dialogue into structured data for a per-encounter timeline.
Copy every value, unit, date, code, drug name and route exactly as written. Keep the bracketed \
event ids (e.g. [LAB-123]) of each item in its "ids" list. Do not add anything that is not \
stated. Dates are YYYY-MM-DD.
Return only JSON of this form:
{"admission": {"date": "", "type": "", "ids": []},
 "discharge": {"date": "", "location": "", "ids": []},
 "labs": [{"name": "", "value": "", "unit": "", "date": "", "flag": "high|low|abnormal|", "ids": []}],
 "medications": [{"name": "", "dose": "", "unit": "", "route": "", "date": "", "ids": []}],
 "diagnoses": [{"code": "", "title": "", "date": "", "ids": []}],
 "procedures": [{"code": "", "title": "", "date": "", "ids": []}]}"""
VISIT_EXTRACTION_USER = "Encounter:\n{visit}"


def _cell(text: str) -> str:
    return text.replace("|", "/").replace("\n", " ")


def _ids(f: Fact, with_ids: bool) -> str:
    return f" [{', '.join(f.ids)}]" if with_ids and f.ids else ""


def rows_from_facts(facts: Sequence[Fact], visits: Sequence[int]) -> list[dict[str, Any]]:
    """Timeline rows (one per visit, JSON types) from facts."""
    by_visit: dict[int, list[Fact]] = {int(v): [] for v in visits}
    for f in facts:
        by_visit.setdefault(int(f.visit_idx), []).append(f)
    rows = []
    for number, v in enumerate(sorted(by_visit), start=1):
        fs = by_visit[v]
        rows.append(
            {
                "visit_idx": v,
                "number": number,
                "facts": [f.to_dict() for f in fs if f.kind not in ("symptom", "negation")],
            }
        )
    return rows


def render_row(row: Mapping[str, Any], with_ids: bool) -> str:
    """One table row of the timeline."""
    fs = [Fact.from_dict(d) for d in row["facts"]]
    kinds: dict[str, list[Fact]] = {}
    for f in fs:
        kinds.setdefault(f.kind, []).append(f)
    adm = kinds.get("admission", [])
    dis = kinds.get("discharge", [])
    start = adm[0].date if adm else ""
    end = dis[-1].date if dis else ""
    enc = " to ".join(d for d in (start, end) if d) or "date not stated"
    if adm:
        enc += f"; {adm[0].name}" + _ids(adm[0], with_ids)
    if dis:
        enc += f"; discharged{' to ' + dis[-1].name if dis[-1].name else ''}" + _ids(
            dis[-1], with_ids
        )
    labs_by_day: dict[str, list[str]] = {}
    for f in kinds.get("lab", []):
        mark = f" {FLAG_MARK[f.flag]}" if f.flag in FLAG_MARK else ""
        labs_by_day.setdefault(f.date, []).append(
            f"{f.name} {f.value} {f.unit}{mark}" + _ids(f, with_ids)
        )
    labs = "; ".join(
        f"{d}: " + ", ".join(items) if d else ", ".join(items) for d, items in labs_by_day.items()
    )
    meds = "; ".join(
        f"{f.name} {f.value} {f.unit}{' ' + f.route if f.route else ''}"
        f"{' (' + f.date + ')' if f.date else ''}" + _ids(f, with_ids)
        for f in kinds.get("medication", [])
    )
    dxs = "; ".join(f"{f.name} ({f.code})" + _ids(f, with_ids) for f in kinds.get("diagnosis", []))
    pxs = "; ".join(
        f"{f.name} ({f.code}{', ' + f.date if f.date else ''})" + _ids(f, with_ids)
        for f in kinds.get("procedure", [])
    )
    cells = [str(row["number"]), enc, labs or "-", meds or "-", dxs or "-", pxs or "-"]
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def render_timeline(rows: Sequence[Mapping[str, Any]], with_ids: bool) -> str:
    """The whole table, with its title and header."""
    return "\n".join(
        [TIMELINE_TITLE, TABLE_HEADER, TABLE_RULE, *(render_row(r, with_ids) for r in rows)]
    )


def _s(value: Any) -> str:
    return "" if value is None else str(value).strip()


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def facts_from_extraction(reply: Mapping[str, Any], visit_idx: int) -> list[Fact]:
    """Facts from one visit's :data:`VISIT_EXTRACTION_PROMPT` JSON reply (malformed items are
    skipped: an LLM's extraction is taken as it comes)."""
    out: list[Fact] = []
    base = {"visit_idx": int(visit_idx), "turn_idx": -1}

    def ids(d: Mapping[str, Any]) -> tuple[str, ...]:
        return tuple(_s(i) for i in _list(d.get("ids")) if _s(i))

    adm = reply.get("admission")
    if isinstance(adm, Mapping) and (_s(adm.get("date")) or _s(adm.get("type"))):
        out.append(
            Fact(
                kind="admission",
                date=_s(adm.get("date")),
                name=_s(adm.get("type")),
                ids=ids(adm),
                **base,
            )
        )
    for d in _list(reply.get("labs")):
        if isinstance(d, Mapping) and _s(d.get("name")) and _s(d.get("value")):
            flag = _s(d.get("flag")).lower()
            out.append(
                Fact(
                    kind="lab",
                    date=_s(d.get("date")),
                    name=_s(d.get("name")),
                    value=_s(d.get("value")),
                    unit=_s(d.get("unit")),
                    flag=flag if flag in FLAG_MARK else "",
                    ids=ids(d),
                    **base,
                )
            )
    for d in _list(reply.get("medications")):
        if isinstance(d, Mapping) and _s(d.get("name")):
            out.append(
                Fact(
                    kind="medication",
                    date=_s(d.get("date")),
                    name=_s(d.get("name")),
                    value=_s(d.get("dose")),
                    unit=_s(d.get("unit")),
                    route=_s(d.get("route")),
                    ids=ids(d),
                    **base,
                )
            )
    for kind, key in (("diagnosis", "diagnoses"), ("procedure", "procedures")):
        for d in _list(reply.get(key)):
            if isinstance(d, Mapping) and (_s(d.get("code")) or _s(d.get("title"))):
                out.append(
                    Fact(
                        kind=kind,
                        date=_s(d.get("date")),
                        name=_s(d.get("title")),
                        code=_s(d.get("code")),
                        ids=ids(d),
                        **base,
                    )
                )
    dis = reply.get("discharge")
    if isinstance(dis, Mapping) and (_s(dis.get("date")) or _s(dis.get("location"))):
        out.append(
            Fact(
                kind="discharge",
                date=_s(dis.get("date")),
                name=_s(dis.get("location")),
                ids=ids(dis),
                **base,
            )
        )
    return out


def llm_visit_facts(
    prep: Any, tag: str, subject_id: int, turns: pd.DataFrame
) -> tuple[list[Fact], list[str]]:
    """Every visit's facts extracted by an LLM prep model (one request per visit, batched).

    Returns:
        (facts, warnings) — a visit whose reply is not JSON contributes no fact and a warning.
    """
    visits = [(int(v), g) for v, g in turns.groupby("visit_idx", sort=True)]
    requests = [
        PrepRequest(
            f"{tag}|{subject_id}|v{v}|extract",
            [
                {"role": "system", "content": VISIT_EXTRACTION_PROMPT},
                {
                    "role": "user",
                    "content": VISIT_EXTRACTION_USER.format(
                        visit=render_visit(g, with_ids=True, header=True)
                    ),
                },
            ],
            max_tokens=4096,
        )
        for v, g in visits
    ]
    facts: list[Fact] = []
    warnings: list[str] = []
    for (v, _), reply in zip(visits, prep.complete(requests), strict=True):
        try:
            parsed = parse_json_reply(reply, f"visit {v} extraction")
        except PrepError as exc:
            warnings.append(str(exc))
            continue
        if isinstance(parsed, Mapping):
            facts.extend(facts_from_extraction(parsed, v))
        else:
            warnings.append(f"visit {v} extraction: expected a JSON object")
    return facts, warnings


class StructuredTimeline(StoredTextStrategy):
    """A per-encounter table of the structured fields (derived; built by the prep model)."""

    name = "structured-timeline"
    query_dependent = False
    family = "compression"
    derived = True
    uses_prep = True
    defaults = {"with_ids": True}
    construction_keys = ("with_ids",)

    def build(self, subject_id: int, turns: pd.DataFrame, prep: Any) -> dict:
        warnings: list[str] = []
        if getattr(prep, "is_llm", False):
            facts, warnings = llm_visit_facts(prep, self.name, subject_id, turns)
        else:
            facts = facts_of(turns)
        rows = rows_from_facts(facts, visit_order(turns))
        text = render_timeline(rows, bool(self.params["with_ids"]))
        return {"rows": rows, "text": text, "warnings": warnings}

    def footprint(self, artifact: Artifact) -> dict[str, Any]:
        rows = artifact.data.get("rows", [])
        return {
            "n_items": len(rows),
            "item": "rows",
            "n_facts": sum(len(r["facts"]) for r in rows),
            "store_tokens": count_text_tokens(str(artifact.data.get("text", ""))),
        }
