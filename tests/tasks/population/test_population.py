"""Population questions: spec validation, the three renderings and their parser, and the
solvers on a hand-made group whose answers are known."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from clinlib.tasks.population.groups import attributes, fit_records, primary_disease
from clinlib.tasks.population.questions import score
from clinlib.tasks.population.render import RENDERINGS, parse_group, render_group
from clinlib.tasks.population.solve import Knowledge, solve
from clinlib.tasks.population.spec import SpecError, load_specs, size_of

DX = {  # (system, code, label)
    "dm": ("ICD10-CM", "E119", "Type 2 diabetes mellitus without complications"),
    "htn": ("ICD9-CM", "4019", "Unspecified essential hypertension"),
    "ckd3": ("ICD10-CM", "N183", "Chronic kidney disease, stage 3 (moderate)"),
    "cad": ("ICD9-CM", "41401", "Coronary atherosclerosis of native coronary artery"),
}


def _ev(sid, day, kind, system, code, label, value=None, unit=None, n=[0]):  # noqa: B006
    n[0] += 1
    return {"event_id": f"E{n[0]}", "subject_id": sid, "time": pd.Timestamp(f"2150-01-{day:02d}"),
            "kind": kind, "code": code, "code_system": system, "label": label,
            "value": value, "unit": unit, "source": "test"}  # fmt: skip


def _group() -> pd.DataFrame:
    rows = []
    plan = {
        1: ["dm", "dm"],
        2: ["htn", "htn", "cad"],
        3: ["ckd3", "ckd3", "htn"],
        4: ["cad", "cad"],
    }
    for sid, dxs in plan.items():
        for a in range(sid):  # patient s has s admissions
            rows.append(_ev(sid, 1 + 3 * a, "admission", "admission_type", "URGENT", "Admission"))
            rows.append(_ev(sid, 1 + 3 * a, "lab", "itemid", "50983", "Sodium", 138.0, "mEq/L"))
        for d in dxs:
            rows.append(_ev(sid, 2, "diagnosis", *DX[d]))
        if sid in (2, 3, 4):  # a shared treatment pathway
            rows.append(_ev(sid, 2, "medication", "drug", "Dupilumab", "Dupilumab", 300.0, "mg"))
            rows.append(
                _ev(sid, 2, "medication", "drug", "Secukinumab", "Secukinumab", 150.0, "mg")
            )
    return pd.DataFrame(rows)


ORDER = [("4711", 3), ("1234", 1), ("9000", 4), ("5555", 2)]


@pytest.mark.parametrize("rendering", RENDERINGS)
def test_render_round_trip(rendering):
    ev = _group()
    r = render_group(ev, ORDER, rendering)
    recs = parse_group(r.text)
    assert list(recs) == [p for p, _ in ORDER]  # print order kept
    assert sum(len(v) for v in recs.values()) == len(ev) == r.n_codes
    # the trailing stage number of a description is read as part of the concept, consistently
    kb = Knowledge.from_events(ev)
    ckd_lines = [ln for ln in recs["4711"] if kb.dx.get(ln.concept) == ("ckd",)]
    assert len(ckd_lines) == 2
    sodium = [ln.value for ln in recs["1234"] if ln.concept in ("Sodium", "labitem//50983")]
    assert sodium == [138.0]


def test_codebook_is_shared_and_shorter():
    ev = _group()
    texts = {r: render_group(ev, ORDER, r).text for r in RENDERINGS}
    assert texts["codebook"].count("(labitem//50983) Sodium") == 1
    assert "#1" in texts["codebook"] and "Sodium" not in texts["codes"]
    assert len(texts["codes"]) < len(texts["descriptions"])


def test_codebook_prefix_is_one_constant():
    """The population codebook and the dialogue strategy share data.vocab's prefix (one
    constant, in the lowest layer both use), and the rendered ids carry it."""
    from clinlib.data import vocab
    from clinlib.strategies import codebook as dialogue_codebook
    from clinlib.tasks.population import render

    assert render.ID_PREFIX == dialogue_codebook.ID_PREFIX == vocab.CODEBOOK_ID_PREFIX
    ev = _group()
    text = render_group(ev, ORDER, "codebook").text
    assert f"\n{vocab.CODEBOOK_ID_PREFIX}1: (" in text


@pytest.mark.parametrize("rendering", RENDERINGS)
def test_solvers_recover_known_answers(rendering):
    ev = _group()
    kb = Knowledge.from_events(ev)
    text = render_group(ev, ORDER, rendering).text
    assert solve("P-CLS", "", text, kb) == {
        "4711": "ckd",
        "1234": "diabetes",
        "9000": "cad",
        "5555": "hypertension",
    }
    assert solve("P-TOP", "Offer them to the 2 patients with", text, kb) == ["9000", "4711"]
    assert solve("P-SRT", "", text, kb) == ["9000", "4711", "5555", "1234"]
    assert solve("P-CLQ", "Find the k=3 patients", text, kb) == ["4711", "5555", "9000"]
    stem = "Positive training examples: 1234\nNegative training examples: 9000\nTest examples: 4711"
    assert solve("P-ICC", stem, text, kb) == {"4711": False}


def test_primary_disease_ties_follow_index_order():
    assert primary_disease({"hypertension": 2, "ckd": 2}) == "hypertension"
    assert primary_disease({"ckd": 3, "hypertension": 2}) == "ckd"
    assert primary_disease({}) is None


def test_fit_records_keeps_must_events_and_respects_budget():
    ev = _group()
    fitted = fit_records(ev, [1, 2, 3, 4], target_tokens=40, count=lambda s: len(s.split()))
    assert set(fitted[fitted["kind"] == "diagnosis"]["event_id"]) == set(
        ev[ev["kind"] == "diagnosis"]["event_id"]
    )
    assert len(fitted) < len(ev)


def test_attributes_from_records():
    ev = _group()
    cohort = pd.DataFrame({"subject_id": [1, 2, 3, 4], "disease": ["diabetes", "hypertension", "ckd", "cad"],
                           "tertile": ["low"] * 4})  # fmt: skip
    a = attributes(cohort, ev).set_index("subject_id")
    assert a.loc[3, "index_dx"] == ["ckd", "hypertension"] and a.loc[4, "n_admissions"] == 4


def test_score_schemas():
    assert score("P-CLU", [["1", "2"], ["3"]], [["1", "2"], ["3"]]) == 1.0
    assert score("P-IPW", -7.0, -7.5) == 0.5
    assert score("P-TST", True, False) == 0.0
    assert score("P-SRT", ["a", "b"], {"a": 1, "b": 2}) == -1.0
    assert score("P-CLS", {"1": "cad"}, json.loads('{"1": "cad", "2": "ckd"}')) == 0.5


def test_spec_file_loads_and_names_errors(tmp_path):
    specs = load_specs()
    assert sorted({s.task for s in specs}) == sorted(
        ["P-CLQ", "P-ICC", "P-CLU", "P-IPW", "P-OUT", "P-TST", "P-SIM", "P-TOP", "P-SRT", "P-CLS"]
    )
    assert size_of("min(12, n // 4)", 40, 0) == 10 and size_of("n - k", 10, 3) == 7
    with pytest.raises(SpecError, match="unknown name"):
        size_of("__import__('os')", 10, 0)
    with pytest.raises(SpecError, match="not an expression"):  # a model's half expression
        size_of("n -", 10, 0)
    with pytest.raises(SpecError, match="by zero"):
        size_of("n // k", 10, 0)
    bad = tmp_path / "s.toml"
    bad.write_text('[[task]]\ntask = "P-CLQ"\nname = "x"\nquestion = "q"\nsizes = [4]\n'
                   'cohort = [{ role = "a", size = "n", positive = [{ field = "age", op = "in", value = [1] }] }]\n')  # fmt: skip
    with pytest.raises(
        SpecError,
        match=r"s\.toml: task\[0\] \(P-CLQ\)\.cohort\[0\]\.positive\[0\]: unknown field 'age'",
    ):
        load_specs(bad)


def test_sizes_for_puts_the_fitting_group_size_first():
    from clinlib.tasks.population.build import TOKENS_PER_PATIENT, sizes_for

    assert sizes_for([10, 16, 30, 50], 8_000)[0] == 10
    assert sizes_for([10, 16, 30, 50], 256_000)[0] == 50  # 256000 / 5000 = 51.2
    assert sizes_for([10, 16, 30, 50], 30 * TOKENS_PER_PATIENT)[0] == 30
