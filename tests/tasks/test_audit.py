"""L5 human audit (paper Appendix A): risk classes derived from the paper's arithmetic, the
stratified sample's sizes against it, the sheet round trip, scoring a hand-filled sheet, and
``clintrace audit`` on the quick profile (bad input: exit 2 and one line)."""

from __future__ import annotations

import pandas as pd
import pytest
from typer.testing import CliRunner

from clinlib.tasks import audit

# The paper's evaluation set (§3 "Evaluation set"): T1 = 1500, ..., T4 = 53, ..., T9 = 1500.
PAPER_TASK_N = {"T1": 1500, "T2": 889, "T3": 600, "T4": 53, "T5": 495, "T6": 700, "T7": 400,
                "T8": 134, "T9": 1500}  # fmt: skip


def _many(n_per_task: int) -> pd.DataFrame:
    rows = []
    for t in range(1, 10):
        for i in range(n_per_task):
            rows.append(
                {
                    "qid": f"T{t}-{i:04d}",
                    "task": f"T{t}",
                    "subtype": f"s{i % 3}",
                    "subject_ids": [i],
                    "question": f"q {i}",
                    "gold": "yes",
                    "options": [],
                    "anchor_event_ids": [f"LAB-{i}"],
                    "evidence_turns": [],
                    "disease": ("diabetes", "ckd")[i % 2],
                    "tertile": "low",
                    "template_id": 0,
                    "injection": "",
                    "meta": "{}",
                }
            )
    return pd.DataFrame(rows)


def test_audit_sample_sizes_and_strata():
    s = audit.sample_audit(_many(60), seed=0)
    assert len(s) == 370  # 30 x 4 low-risk + 50 x 5 high-risk, as in the paper
    counts = s["task"].value_counts()
    assert all(counts[t] == 50 for t in audit.HIGH_RISK_TASKS)
    assert all(counts[t] == 30 for t in audit.LOW_RISK_TASKS)
    # 6 (subtype, disease) strata of 10 questions each: round-robin gives 5 each for T1 (30)
    t1 = s[s["task"] == "T1"]
    assert t1.groupby(["subtype", "disease"]).size().tolist() == [5] * 6
    assert s.equals(audit.sample_audit(_many(60), seed=0))  # deterministic
    assert not s.equals(audit.sample_audit(_many(60), seed=1))
    small = audit.sample_audit(_many(7))
    assert len(small) == 63  # fewer questions than the quota: all of them


def test_audit_round_trip_and_agreement(tmp_path):
    path = tmp_path / "audit.csv"
    sheet = audit.export_audit_sheet(_many(60), path, seed=0)
    assert list(sheet.columns) == list(audit.AUDIT_COLUMNS)
    assert path.exists() and not list(tmp_path.glob(".*tmp*"))
    filled = pd.read_csv(path, dtype=str, keep_default_na=False)
    filled["auditor_verdict"] = "agree"
    # the paper's outcome: 4 disagreements of 370 (T9 3 of 50, T7 1 of 50)
    bad = list(filled.index[filled["task"] == "T9"][:3]) + list(
        filled.index[filled["task"] == "T7"][:1]
    )
    filled.loc[bad, "auditor_verdict"] = " Disagree "
    filled.to_csv(path, index=False)
    back = audit.import_audit_sheet(path)
    agree = audit.audit_agreement(back).set_index("task")
    assert agree.loc["all", "n"] == 370 and agree.loc["all", "n_agree"] == 366
    assert agree.loc["all", "agreement"] == pytest.approx(366 / 370)
    assert round(100 * agree.loc["all", "agreement"], 2) == 98.92
    assert agree.loc["T9", "fail_rate"] == pytest.approx(3 / 50)
    assert agree.loc["T7", "fail_rate"] == pytest.approx(1 / 50)
    # as Appendix A prints them: T7 = 2%, T9 = 6%, the other seven 0%
    printed = (100 * agree["fail_rate"]).round().astype(int).to_dict()
    assert printed == {"T1": 0, "T2": 0, "T3": 0, "T4": 0, "T5": 0, "T6": 0, "T7": 2, "T8": 0,
                       "T9": 6, "all": 1}  # fmt: skip
    assert agree["below_fix_threshold"].all()


def test_audit_import_rejects_malformed_verdicts(tmp_path):
    path = tmp_path / "audit.csv"
    audit.export_audit_sheet(_many(3), path)
    filled = pd.read_csv(path, dtype=str, keep_default_na=False)
    filled["auditor_verdict"] = "agree"
    filled.loc[4, "auditor_verdict"] = "agreed"
    filled.to_csv(path, index=False)
    with pytest.raises(audit.AuditSheetError, match=r"line 6 \(qid T2-\d+\): auditor_verdict"):
        audit.import_audit_sheet(path)
    filled.loc[4, "auditor_verdict"] = ""
    filled.to_csv(path, index=False)
    with pytest.raises(audit.AuditSheetError, match="line 6"):
        audit.import_audit_sheet(path)
    ok = audit.import_audit_sheet(path, allow_blank=True)
    assert audit.audit_agreement(ok).set_index("task").loc["all", "n"] == 26
    with pytest.raises(audit.AuditSheetError, match="no such audit sheet"):
        audit.import_audit_sheet(tmp_path / "missing.csv")


def _paper_sized() -> pd.DataFrame:
    frames = []
    for task, n in PAPER_TASK_N.items():
        q = _many(1)
        q = q[q["task"] == task]
        frames.append(pd.concat([q] * n, ignore_index=True).assign(
            qid=[f"{task}-{i:05d}" for i in range(n)], subtype=[f"s{i % 3}" for i in range(n)],
            disease=[("diabetes", "ckd", "cad", "hf")[i % 4] for i in range(n)]))  # fmt: skip
    return pd.concat(frames, ignore_index=True)


def test_risk_classes_follow_from_the_papers_arithmetic():
    sol = audit.paper_quota_solutions()
    hit = sol[sol["matches"]].set_index("task")
    # by hand: 1/50 = 2.0% (1/30 = 3.3% -> 3%), 3/50 = 6.0% (2/30 = 6.7% -> 7%, 1/30 -> 3%)
    assert hit.loc["T7", "quota"] == 50 and hit.loc["T7", "disagreements"] == 1
    assert hit.loc["T9", "quota"] == 50 and hit.loc["T9", "disagreements"] == 3
    assert len(hit) == 2 and sol.loc[sol["matches"], "total_ok"].all()
    assert 1 + 3 == 370 - 366
    assert set(sol.loc[~sol["matches"], "quota"]) == {30}
    assert {"T7", "T9"} <= set(audit.HIGH_RISK_TASKS)
    assert len(audit.HIGH_RISK_TASKS) == 5 and len(audit.LOW_RISK_TASKS) == 4
    assert sorted(audit.HIGH_RISK_TASKS + audit.LOW_RISK_TASKS) == sorted(PAPER_TASK_N)
    paper = audit.paper_l5_table().set_index("task")
    assert paper.loc["all", "n"] == 30 * 4 + 50 * 5 == 370
    assert paper.loc["all", "n_disagree"] == 4
    assert round(100 * paper.loc["all", "agreement"], 2) == 98.92
    assert paper.loc["T7", "agreement"] == pytest.approx(49 / 50)
    assert paper.loc["T9", "agreement"] == pytest.approx(47 / 50)


def test_sample_of_the_papers_set_has_the_papers_sizes():
    s = audit.sample_audit(_paper_sized(), seed=0)
    counts = s["task"].value_counts().to_dict()
    assert counts == {"T1": 30, "T2": 50, "T3": 30, "T4": 50, "T5": 30, "T6": 30, "T7": 50,
                      "T8": 50, "T9": 50}  # fmt: skip
    assert len(s) == 370
    t7 = s[s["task"] == "T7"]  # 3 subtypes x 4 diseases = 12 strata: 50 = 12 x 4 + 2
    assert sorted(t7.groupby(["subtype", "disease"]).size().tolist()) == [4] * 10 + [5] * 2


def test_profile_sheet_builds_and_scores_a_hand_filled_copy(quick_in_tmp_build, tmp_path):
    sheet, path = audit.build_audit_sheet("quick", seed=0)
    assert path == quick_in_tmp_build / "quick" / "audit" / audit.SHEET_NAME and path.exists()
    qs = pd.read_parquet(quick_in_tmp_build / "quick" / "questions.parquet")
    for task, n in qs["task"].value_counts().items():
        assert (sheet["task"] == task).sum() == min(n, audit.QUOTA[task])
    assert sheet["evidence"].str.len().gt(0).all()
    summary = audit.sheet_summary(sheet, qs).set_index("task")
    assert (summary["sampled"] == summary[["quota", "available"]].min(axis=1)).all()
    assert summary.loc["T7", "risk"] == "high" and summary.loc["T6", "quota"] == 30
    filled = pd.read_csv(path, dtype=str, keep_default_na=False)
    filled["auditor_verdict"] = "agree"
    t9 = filled.index[filled["task"] == "T9"]
    filled.loc[t9[:2], "auditor_verdict"] = "disagree"
    out_path = tmp_path / "filled.csv"
    filled.to_csv(out_path, index=False)
    table = audit.score_audit_sheet(out_path, "quick").set_index("task")
    n9 = len(t9)
    assert table.loc["T9", "n_disagree"] == 2
    assert table.loc["T9", "agreement"] == pytest.approx((n9 - 2) / n9)
    assert table.loc["all", "agreement"] == pytest.approx((len(filled) - 2) / len(filled))
    assert table.loc["T9", "paper_n_disagree"] == 3 and table.loc["all", "paper_n"] == 370
    filled.loc[0, "gold"] = "not the gold"
    filled.to_csv(out_path, index=False)
    with pytest.raises(audit.AuditSheetError, match=r"line 2 \(qid .+\): gold 'not the gold'"):
        audit.score_audit_sheet(out_path, "quick")


def test_cli_audit_builds_and_refuses_bad_sheets_in_one_line(quick_in_tmp_build, tmp_path):
    from clinlib.cli import app

    res = CliRunner().invoke(app, ["audit", "--profile", "quick"])
    assert res.exit_code == 0, res.output
    assert "questions to audit" in res.output
    path = quick_in_tmp_build / "quick" / "audit" / audit.SHEET_NAME
    filled = pd.read_csv(path, dtype=str, keep_default_na=False)
    filled["auditor_verdict"] = "agree"
    filled.loc[1, "auditor_verdict"] = "maybe"
    bad = tmp_path / "bad.csv"
    filled.to_csv(bad, index=False)
    res = CliRunner().invoke(app, ["audit", "--profile", "quick", "--score", str(bad)])
    assert res.exit_code == 2
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and "line 3" in lines[0] and "'maybe'" in lines[0]
    assert "Traceback" not in res.output
