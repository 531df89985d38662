"""event-table (App. G.8) and oracle (issue 27 §2) on a hand-built three-visit patient: the
table's exact rows, its ids, what it leaves out (unstated events, noise, injected sentences);
the oracle's evidence visits (anchors, evidence turns, injection, the dated fallback, T6);
the shared anchor matcher; both registered and selectable by name."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from clinlib.cli.common import strategy_list
from clinlib.strategies import (
    DIAGNOSTIC_STRATEGIES,
    EVALUATION_STRATEGIES,
    PAPER_STRATEGIES,
    STRATEGIES,
    StrategyError,
    context_for,
    get_strategy,
    list_strategies,
)
from clinlib.strategies.event_table import event_row, stated_event_ids
from clinlib.strategies.evidence import anchor_presence, context_ids, evidence_visits, has_tags

SID, SID_B = 9101, 9102


def _turns(sid: int = SID) -> pd.DataFrame:
    """Three visits; visit v's clinician turn states LAB-v (and visit 1 also RX-1)."""
    rows = []
    for v in range(3):
        ids = [f"LAB-{v}"] + (["RX-1"] if v == 1 else [])
        rows.append((v, 2 * v, "patient", f"Hello, visit {v}.", []))
        rows.append((v, 2 * v + 1, "clinician", f"Your Sodium was 14{v} mEq/L.", ids))
    df = pd.DataFrame(rows, columns=["visit_idx", "turn_idx", "speaker", "text", "event_ids"])
    df["text_tagged"] = [t + (f" [{', '.join(i)}]" if i else "")
                         for t, i in zip(df["text"], df["event_ids"], strict=True)]  # fmt: skip
    df["visit_date"] = [f"2150-0{v + 1}-01" for v in df["visit_idx"]]
    df.insert(0, "subject_id", sid)
    return df


def _events(sid: int = SID) -> pd.DataFrame:
    """The source events: the dialogue's four plus LAB-9, which no turn states."""
    rows = [
        dict(event_id=f"LAB-{v}", subject_id=sid, time=pd.Timestamp(f"2150-{v + 1:02d}-01 08:30"),
             kind="lab", code="50983", code_system="itemid", label="Sodium",
             value_text=f"14{v}", unit="mEq/L", ref_low=133.0, ref_high=145.0, flag=None,
             route=None)
        for v in (0, 1, 2, 9)
    ]  # fmt: skip
    rows.append(dict(event_id="RX-1", subject_id=sid, time=pd.Timestamp("2150-02-01 00:00"),
                     kind="medication", code="Lisinopril", code_system="drug", label="Lisinopril",
                     value_text="10", unit="mg", ref_low=None, ref_high=None, flag=None,
                     route="PO"))  # fmt: skip
    return pd.DataFrame(rows)


@pytest.fixture()
def events_dir(tmp_path):
    pd.concat([_events(SID), _events(SID_B)]).to_parquet(tmp_path / "events.parquet")
    return tmp_path


TABLE = """Patient events (one row per recorded event, in time order):
| date | kind | event | value | reference / flag | detail |
|---|---|---|---|---|---|
| 2150-01-01 08:30 | lab | Sodium [LAB-0] | 140 mEq/L | 133-145 | - |
| 2150-02-01 | medication | Lisinopril [RX-1] | 10 mg | - | PO |
| 2150-02-01 08:30 | lab | Sodium [LAB-1] | 141 mEq/L | 133-145 | - |
| 2150-03-01 08:30 | lab | Sodium [LAB-2] | 142 mEq/L | 133-145 | - |"""


def test_event_table_is_the_dialogues_source_events_in_time_order(events_dir):
    strat = get_strategy("event-table", events_dir=str(events_dir))
    art = strat.construct(SID, _turns())
    ctx = context_for({"qid": "q", "question": "?", "subject_ids": [SID]}, strat, {SID: art},
                      _turns())  # fmt: skip
    assert ctx == TABLE
    assert "LAB-9" not in ctx  # an event no turn states stays out (T9's absent facts)
    assert "Hello" not in ctx and "Your Sodium" not in ctx  # no dialogue
    assert art.data["n_events"] == 4 and art.prep_model == "none"
    assert strat.footprint(art)["n_items"] == 4
    assert get_strategy("event-table", with_ids=False, events_dir=str(events_dir)).construct(
        SID, _turns()
    ).data["text"] == TABLE.replace(" [LAB-0]", "").replace(" [RX-1]", "").replace(
        " [LAB-1]", ""
    ).replace(" [LAB-2]", "")


def test_event_table_ignores_noise_and_injected_turns(events_dir):
    turns = _turns()
    extra = pd.DataFrame([
        dict(subject_id=SID, visit_idx=1, turn_idx=100, speaker="clinician",
             text="Physician noted: Sodium is consistent with X.", event_ids=[],
             text_tagged="Physician noted: Sodium is consistent with X.", visit_date="2150-02-01"),
        dict(subject_id=SID, visit_idx=1, turn_idx=101, speaker="clinician", text="Walk daily.",
             event_ids=["NOISE-GH-walk-1"], text_tagged="Walk daily.", visit_date="2150-02-01"),
    ])  # fmt: skip
    strat = get_strategy("event-table", events_dir=str(events_dir))
    plain = strat.construct(SID, turns).data["text"]
    assert strat.construct(SID, pd.concat([turns, extra])).data["text"] == plain
    assert stated_event_ids(pd.concat([turns, extra])) == ["LAB-0", "LAB-1", "RX-1", "LAB-2"]


def test_event_table_refuses_ids_missing_from_the_events_table(events_dir, tmp_path_factory):
    turns = _turns()
    turns.loc[1, "event_ids"] = ["LAB-404"]
    with pytest.raises(StrategyError, match=r"LAB-404.*events\.parquet"):
        get_strategy("event-table", events_dir=str(events_dir)).construct(SID, turns)
    empty = tmp_path_factory.mktemp("none")
    with pytest.raises(StrategyError, match="events.parquet not found"):
        get_strategy("event-table", events_dir=str(empty)).construct(SID, _turns())


def test_event_row_formats_admissions_and_diagnoses():
    adm = dict(event_id="ADM-5", time=pd.Timestamp("2150-01-01 09:24"), kind="admission",
               code="EW EMER.", label="Admission")  # fmt: skip
    dx = dict(event_id="DX-5-1", time=pd.Timestamp("2150-01-03"), kind="diagnosis",
              code="I10", code_system="ICD10-CM", label="Essential (primary) hypertension")  # fmt: skip
    assert (
        event_row(adm) == "| 2150-01-01 09:24 | admission | Admission [ADM-5] | - | - | EW EMER. |"
    )
    assert event_row(dx, with_ids=False) == (
        "| 2150-01-03 | diagnosis | Essential (primary) hypertension | - | - | ICD10-CM I10 |"
    )


def _oracle_ctx(q: dict, turns: pd.DataFrame) -> str:
    strat = get_strategy("oracle")
    sids = q["subject_ids"]
    groups = {s: turns[turns["subject_id"] == s] for s in sids}
    arts = {s: strat.construct(s, g) for s, g in groups.items()}
    return context_for(q, strat, arts, groups)


def _visits_shown(ctx: str) -> list[int]:
    return [int(line.split()[1]) for line in ctx.splitlines() if line.startswith("Visit ")]


def test_oracle_shows_only_the_evidence_visits():
    q = {"qid": "q", "question": "?", "subject_ids": [SID], "anchor_event_ids": ["RX-1"]}
    ctx = _oracle_ctx(q, _turns())
    assert _visits_shown(ctx) == [2]  # 1-based header of visit_idx 1
    assert "[LAB-1, RX-1]" in ctx and "LAB-0" not in ctx and "LAB-2" not in ctx
    q2 = {**q, "anchor_event_ids": ["LAB-0"], "evidence_turns": [f"{SID}:5"]}
    assert _visits_shown(_oracle_ctx(q2, _turns())) == [1, 3]


def test_oracle_includes_the_injection_visit_and_falls_back_to_the_dated_visit():
    inj = json.dumps({"subject_id": SID, "visit_idx": 2, "text": "Physician noted: X."})
    q = {"qid": "q", "question": "?", "subject_ids": [SID], "anchor_event_ids": ["LAB-0"],
         "injection": inj}  # fmt: skip
    assert _visits_shown(_oracle_ctx(q, _turns())) == [1, 3]
    t9 = {"qid": "q", "question": "?", "subject_ids": [SID], "anchor_event_ids": ["LAB-9"],
          "evidence_turns": [], "meta": json.dumps({"visit_idx": 1})}  # fmt: skip
    assert _visits_shown(_oracle_ctx(t9, _turns())) == [2]
    assert _oracle_ctx({**t9, "meta": "{}"}, _turns()) == ""


def test_oracle_gives_each_t6_patient_its_own_evidence():
    turns = pd.concat([_turns(SID), _turns(SID_B)], ignore_index=True)
    q = {"qid": "q", "question": "?", "subject_ids": [SID, SID_B],
         "anchor_event_ids": ["LAB-2"], "evidence_turns": [f"{SID}:1", f"{SID_B}:3"]}  # fmt: skip
    ctx = _oracle_ctx(q, turns)
    a, b = ctx.split("Patient B:")
    assert _visits_shown(a) == [1, 3] and _visits_shown(b) == [2, 3]


def test_the_shared_matcher_counts_tag_groups():
    ctx = "x [LAB-1, RX-2-3] y [LAB-1] z LAB-7 [note]"
    assert context_ids(ctx) == ["LAB-1", "RX-2-3", "LAB-1"]
    assert anchor_presence(ctx, ["LAB-1", "RX-2-3", "LAB-7"]) == {"LAB-1": 2, "RX-2-3": 1,
                                                                   "LAB-7": 0}  # fmt: skip
    assert has_tags(ctx) and not has_tags("LAB-7 without brackets") and not has_tags("")
    q = {"anchor_event_ids": ["RX-1"], "evidence_turns": [f"{SID_B}:0", "bad"]}
    assert evidence_visits(q, SID, _turns()) == {1}


def test_registered_and_selectable_from_the_command_line():
    assert {"event-table", "oracle"} <= set(STRATEGIES)
    assert EVALUATION_STRATEGIES == PAPER_STRATEGIES + DIAGNOSTIC_STRATEGIES
    rows = {r["name"]: r for r in list_strategies()}
    assert rows["oracle"]["diagnostic"] and not rows["oracle"]["paper"]
    assert "events_dir" not in rows["event-table"]["defaults"]
    assert strategy_list("evaluation") == list(EVALUATION_STRATEGIES)
    assert strategy_list("paper,oracle,bm25") == [*PAPER_STRATEGIES, "oracle", "bm25"]
    assert strategy_list("event-table") == ["event-table"]
    assert get_strategy("event-table").label() == "event-table"


def test_runnable_from_the_command_line(tmp_path, monkeypatch):
    """`clintrace run --strategies event-table,oracle` on a tiny hand-built profile: both
    cells answered by the offline reader, their prompts token-counted (the cost views)."""
    from typer.testing import CliRunner

    from clinlib.cli import app
    from clinlib.core import config
    from clinlib.eval.harness import runner
    from tests import strategy_fixtures as sf

    monkeypatch.setattr(config, "BUILD_DIR", tmp_path)
    d = tmp_path / "tiny"
    d.mkdir()
    events = sf.events_7001()
    turns = sf.dialogue(events)
    turns.to_parquet(d / "dialogues.parquet", index=False)
    events.to_parquet(d / "events.parquet", index=False)
    lab = events[(events["kind"] == "lab") & (events["label"] == "Creatinine")].iloc[0]
    q = {"qid": "T1-a", "task": "T1", "subtype": "abnormal", "subject_ids": [7001],
         "question": f"Report the patient's Creatinine result from {lab['time']:%Y-%m-%d}. "
                     "Reply with the value and its unit only (for example: 1.3 mg/dL).",
         "gold": f"{lab['value_text']} {lab['unit']}", "options": [],
         "anchor_event_ids": [lab["event_id"]], "evidence_turns": [], "disease": "diabetes",
         "tertile": "low", "template_id": 0, "injection": "", "meta": "{}"}  # fmt: skip
    pd.DataFrame([q]).to_parquet(d / "questions.parquet", index=False)
    (d / "source.json").write_text(json.dumps({"kind": "synthetic", "credentialed": False}))
    res = CliRunner().invoke(app, ["run", "--profile", "tiny", "--strategies",
                                   "event-table,oracle", "--backbones", "reference"])  # fmt: skip
    assert res.exit_code == 0, res.output
    preds = runner.load_predictions("tiny").set_index("strategy")
    assert sorted(preds.index) == ["event-table", "oracle"]
    assert (preds["input_tokens"] > 0).all()
    assert bool(preds.loc["oracle", "correct"])  # the evidence visit holds the value
