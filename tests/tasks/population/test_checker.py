"""The population checker: solved by hand on small prompts, its import boundary, and the
agreement gate failing when the checker's formula is wrong."""

from __future__ import annotations

import json

import grimp
import pytest

from clinlib.tasks.population import build, checker
from clinlib.tasks.population.render import Rendered

GOLD_SIDE = (
    "clinlib.tasks.population.questions",
    "clinlib.tasks.population.groups",
    "clinlib.tasks.population.plant",
    "clinlib.tasks.population.render",
    "clinlib.tasks.population.solve",
    "clinlib.tasks.population.build",
    "clinlib.data.vocab",
)


def _record(pid: str, days: list[tuple[str, list[str]]]) -> str:
    lines = [f"=== Patient ID: {pid} ==="]
    for day, events in days:
        lines += [f"Time: {day}", *events]
    return "\n".join(lines)


def _group(records: list[str]) -> str:
    return "\n\n".join(records)


PANEL = ["LDL 100 mg/dL", "HDL 40 mg/dL", "Triglycerides 150 mg/dL"]  # one day, a lab panel
PATH = [
    ("2100-01-02", ["Senna 1 TAB"]),
    ("2100-01-05", ["Heparin 5000 UNIT"]),
    ("2100-02-01", ["Lipase 30 IU/L"]),
]  # fmt: one ordered pathway over three days


def _clique_context(order=(0, 1, 2)) -> str:
    path3 = [(PATH[i][0], PATH[j][1]) for i, j in enumerate(order)]  # events swapped
    recs = [
        _record("1001", PATH),
        _record("1002", [("2100-01-01", ["Sodium 140 mEq/L"]), *PATH]),
        _record("1003", [*path3, ("2100-03-01", ["Sodium 139 mEq/L"])]),
        _record("1004", [("2100-01-01", [*PANEL, "Sodium 141 mEq/L"])]),
        _record("1005", [("2100-01-03", [*PANEL, "Sodium 138 mEq/L"])]),
        _record("1006", [("2100-01-04", ["Sodium 137 mEq/L"])]),
    ]
    return _group(recs)


def test_checker_finds_the_ordered_pathway_and_not_the_panel():
    stem = "Find the 3 patients who form that group."
    assert checker.check("P-CLQ", stem, _clique_context()) == ["1001", "1002", "1003"]
    # the same three concepts in another order for one carrier: no shared pathway
    assert checker.check("P-CLQ", stem, _clique_context(order=(1, 0, 2))) is None
    # the panel (LDL, HDL, triglycerides on one day, in 1004 and 1005) is not a pathway
    assert (
        checker.check("P-CLQ", "Find the 2 patients who form that group.", _clique_context())
        is None
    )


def test_checker_reads_values_and_codebook_ids():
    assert checker._split("Sodium Chloride 0.9% Flush 10 mL") == (
        "Sodium Chloride 0.9% Flush",
        10.0,
    )
    assert checker._split("Lipase 30") == ("Lipase", 30.0)
    assert checker._split("Admission (EW EMER.)") == ("Admission (EW EMER.)", None)
    text = (
        "Codebook (integer IDs assigned to medical codes):\n#1: (drug//Senna) Senna\n\n"
        + _record("1001", [("2100-01-02", ["#1 1 TAB"])])
    )
    ev = checker.read_events(text)
    assert ev[["pid", "concept", "value"]].values.tolist() == [["1001", "drug//Senna", 1.0]]


ATE_STEM = (
    "In these 5 patients, some received Empagliflozin; the outcome is the last Systolic blood "
    "pressure (loinc//96608-5) in each record. Treatment was more likely in patients with a "
    "chronic kidney disease (ckd) diagnosis. Estimate ... Answer with one number."
)


def _ate_context() -> str:
    def rec(pid, t, x, y):
        ev = (["Empagliflozin 10 mg"] if t else []) + (
            ["Chronic kidney disease, stage 3 (moderate)"] if x else ["Essential hypertension"]
        )
        return _record(
            pid, [("2100-01-01", ev), ("2100-02-01", [f"Systolic blood pressure {y} mmHg"])]
        )

    # by hand: stratum x=0 e=1/2, x=1 e=2/3; treated mean (2*10+1.5*30+1.5*34)/5 = 23.2,
    # control mean (2*20+3*40)/5 = 32, ATE = -8.8 (the unadjusted difference is 24.667 - 30 = -5.333)
    return _group(
        [
            rec("1", 1, 0, 10),
            rec("2", 0, 0, 20),
            rec("3", 1, 1, 30),
            rec("4", 1, 1, 34),
            rec("5", 0, 1, 40),
        ]
    )


def test_checker_ate_by_hand():
    assert checker.check("P-IPW", ATE_STEM, _ate_context()) == pytest.approx(-8.8)


def _question(gold: float) -> dict:
    text = _ate_context()
    return {
        "task": "P-IPW",
        "question": ATE_STEM,
        "gold": json.dumps(gold),
        "pids": ["1", "2", "3", "4", "5"],
        "subject_ids": [9001, 9002, 9003, 9004, 9005],
        "bin_tokens": 1000,
        "rendered": {r: Rendered(r, text, {}, 0) for r in ("descriptions", "codes", "codebook")},
    }


def test_agreement_gate_fails_when_the_checker_formula_is_wrong(monkeypatch):
    count = lambda s: 1000  # noqa: E731 (the length gate is not under test)
    assert build.check_question(_question(-8.8), count) is None
    naive = (
        "SELECT avg(y) FILTER (WHERE t = 1) - avg(y) FILTER (WHERE t = 0), 0.5, 0.5, 1, 1 FROM "
        "(SELECT pid, max(t) AS t, arg_max(y, seq) FILTER (WHERE y IS NOT NULL) AS y FROM u GROUP BY pid)"
    )
    monkeypatch.setattr(checker, "ATE_SQL", naive)
    gate, detail = build.check_question(_question(-8.8), count)
    assert gate == "agreement" and "-5.333" in detail


def test_the_length_gate_comes_first_and_spares_the_checker(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("the checker ran on a draw that does not fit its bin")

    monkeypatch.setattr(build, "check_many", boom)
    gate, detail = build.check_question(_question(-8.8), lambda s: 5000)  # 5x the 1000 bin
    assert gate == "length" and detail == "5000 tokens for a 1000 bin"


def test_no_import_path_from_the_checker_to_the_gold():
    graph = grimp.build_graph("clinlib")
    for mod in GOLD_SIDE:
        chain = graph.find_shortest_chain(importer="clinlib.tasks.population.checker", imported=mod)
        assert chain is None, chain
    # and the boundary test can fail: build (the gate) does reach the checker
    assert graph.find_shortest_chain(
        importer="clinlib.tasks.population.build", imported="clinlib.tasks.population.checker"
    )
