"""Full code descriptions for the descriptions rendering (PopMedQA §2: "When a typical code is
conveyed as text, it uses between 8 and 20 tokens"; Fig. 7 left: "Cefazolin - Cefazolin Sodium,
manufactured by ...", "Partial Intestinal Obstruction (K56600) - This con...").

The kit's event labels are short (``Sodium``, ``Heparin``: about 5 tokens per code as text under
cl100k_base). A code's full description is composed here from the build's own vocabulary tables
(``raw/hosp``: ``d_labitems`` fluid and category, ``d_icd_*`` long titles, the prescriptions'
product strength, form and route), one string per concept (``system//code``), so every event of
a concept prints the same text and no two concepts share one:

- lab: ``Sodium, Blood, Chemistry (lab item 50983)``;
- medication: ``Heparin 5000 Units / mL Vial, route SC (drug order)``;
- diagnosis / procedure: ``Unspecified essential hypertension (ICD-9-CM 4019)``;
- admission / discharge: ``Hospital admission, type URGENT (admission type)``.

Every description ends in ``)``, so a value printed after it is never read as part of it.
Deviation from Fig. 7, named: the seed's figure cuts each description at 50 characters; the kit
prints it whole, because its composed descriptions are already near the seed's 8-20 tokens per
code and cutting them would put the rendering back below that range (measured in notebook 17).
A concept the tables do not know (a planted event, another source) keeps its label.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

SYSTEM_NAMES: dict[str, str] = {
    "ICD9-CM": "ICD-9-CM",
    "ICD10-CM": "ICD-10-CM",
    "ICD9-PCS": "ICD-9-PCS",
    "ICD10-PCS": "ICD-10-PCS",
}


def _read(raw: Path, table: str, cols: list[str]) -> pd.DataFrame:
    path = raw / f"{table}.csv.gz"
    if not path.exists():
        return pd.DataFrame(columns=cols)
    return pd.read_csv(path, usecols=cols, dtype=str)


def _drug_forms(raw: Path) -> dict[str, str]:
    """drug -> its commonest ``prod_strength, route R`` in the prescriptions."""
    rx = _read(raw, "prescriptions", ["drug", "prod_strength", "route"]).fillna("")
    if rx.empty:
        return {}
    rx["drug"] = rx["drug"].str.split().str.join(" ")
    top = rx.groupby(["drug", "prod_strength", "route"]).size().reset_index(name="n")
    top = top.sort_values(
        ["drug", "n", "prod_strength", "route"], ascending=[True, False, True, True]
    )
    top = top.drop_duplicates("drug")
    return {
        d: ", ".join(x for x in (s.strip(), f"route {r.strip()}" if r.strip() else "") if x)
        for d, s, r in zip(top["drug"], top["prod_strength"], top["route"], strict=True)
    }


def _lab_parts(raw: Path) -> dict[str, str]:
    lab = _read(raw, "d_labitems", ["itemid", "label", "fluid", "category"]).fillna("")
    return {
        str(i): ", ".join(x for x in (f.strip(), c.strip()) if x)
        for i, f, c in zip(lab["itemid"], lab["fluid"], lab["category"], strict=True)
    }


def full_description(kind: str, system: str, code: str, label: str, extra: str = "") -> str:
    """One concept's full description (the module's forms); ``extra``: the lab's fluid and
    category or the drug's strength and route."""
    label, extra = str(label).strip(), str(extra).strip()
    head = f"{label}, {extra}" if extra else label
    if kind == "lab":
        return f"{head} (lab item {code})"
    if kind == "medication":
        return f"{head} (drug order)"
    if kind in ("diagnosis", "procedure"):
        return f"{label} ({SYSTEM_NAMES.get(str(system), str(system))} {code})"
    if kind == "admission":
        return f"Hospital admission, type {code} (admission type)"
    if kind == "discharge":
        return f"Hospital discharge, to {code} (discharge location)"
    return label


def describe_events(events: pd.DataFrame, raw: Path) -> pd.DataFrame:
    """``events`` with ``label`` replaced by each concept's full description (see module doc);
    ``raw``: the build's ``raw/hosp`` folder. Events of other kinds or sources keep theirs."""
    labs, drugs = _lab_parts(raw), _drug_forms(raw)
    concepts = events[["kind", "code_system", "code", "label"]].drop_duplicates(
        ["kind", "code_system", "code"]
    )
    table: dict[tuple[str, str, str], str] = {}
    for kind, system, code, label in concepts.itertuples(index=False):
        extra = labs.get(str(code), "") if kind == "lab" else ""
        if kind == "medication":
            extra = drugs.get(str(label), "")
        table[(kind, str(system), str(code))] = full_description(kind, system, code, label, extra)
    keys = zip(
        events["kind"], events["code_system"].astype(str), events["code"].astype(str), strict=True
    )
    return events.assign(label=[table[k] for k in keys])
