"""clinlib.analysis.ablations: sweep tables, paired tests and the pre/post table on hand-made
predictions whose values are worked out by hand (Wilson and McNemar checked against
statsmodels)."""

from __future__ import annotations

import pandas as pd
import pytest
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar
from statsmodels.stats.proportion import proportion_confint

from clinlib.analysis import ablations
from clinlib.analysis.stats import cluster as cs


def preds_for(label: str, task: str, correct: list[bool], setting: str = "post") -> pd.DataFrame:
    return pd.DataFrame({
        "qid": [f"{task}-q{i}" for i in range(len(correct))],
        "task": task, "strategy": label, "backbone": "reference", "prep_model": "none",
        "setting": setting, "correct": correct, "parsed": ["x"] * len(correct),
    })  # fmt: skip


@pytest.fixture()
def k_preds() -> pd.DataFrame:
    # K=3: T1 2/4, T2 1/2; K=5: T1 3/4, T2 2/2; K=10 T1 4/4, T2 2/2
    return pd.concat([
        preds_for("dense-retrieval(k=3)", "T1", [True, True, False, False]),
        preds_for("dense-retrieval(k=3)", "T2", [True, False]),
        preds_for("dense-retrieval", "T1", [True, True, True, False]),
        preds_for("dense-retrieval", "T2", [True, True]),
        preds_for("dense-retrieval(k=10)", "T1", [True, True, True, True]),
        preds_for("dense-retrieval(k=10)", "T2", [True, True]),
        preds_for("full-context", "T1", [True] * 4),  # another strategy: ignored
    ], ignore_index=True)  # fmt: skip


def test_variant_labels_default_is_the_bare_name():
    assert ablations.variant_labels("dense-retrieval", "k", (3, 5, 10)) == [
        "dense-retrieval(k=3)", "dense-retrieval", "dense-retrieval(k=10)",
    ]  # fmt: skip
    assert ablations.variant_labels("llm-summary", "budget_tokens", (500, 1000)) == [
        "llm-summary", "llm-summary(budget_tokens=1000)",
    ]  # fmt: skip


def test_sweep_table_by_hand(k_preds):
    t = ablations.sweep_table(k_preds, "dense-retrieval", "k", (3, 5, 10))
    acc = t.set_index(["task", "value"])["accuracy"]
    assert acc[("T1", 3)] == 0.5 and acc[("T2", 3)] == 0.5
    assert acc[("T1", 5)] == 0.75 and acc[("T2", 5)] == 1.0
    assert acc[("pooled", 3)] == pytest.approx(3 / 6)
    assert acc[("pooled", 5)] == pytest.approx(5 / 6)
    assert acc[("pooled", 10)] == 1.0
    row = t[(t["task"] == "pooled") & (t["value"] == 5)].iloc[0]
    lo, hi = proportion_confint(5, 6, alpha=0.05, method="wilson")
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((lo, hi))
    assert set(t["param"]) == {"k"} and "full-context" not in set(t["label"])


def test_sweep_table_post_only_with_clustered_bounds(k_preds):
    qs = pd.DataFrame({"qid": [f"T1-q{i}" for i in range(4)] + ["T2-q0", "T2-q1"],
                       "subject_ids": [[1], [1], [2], [2], [3], [1]]})  # fmt: skip
    pre = preds_for("dense-retrieval", "T1", [False] * 4, setting="pre")  # not counted
    t = ablations.sweep_table(pd.concat([k_preds, pre]), "dense-retrieval", "k", (3, 5, 10),
                              questions=qs)  # fmt: skip
    row = t[(t["task"] == "pooled") & (t["value"] == 5)].iloc[0]
    assert (row["n"], row["accuracy"]) == (6, pytest.approx(5 / 6))
    k5 = k_preds[k_preds["strategy"] == "dense-retrieval"].sort_values("qid")
    cl = cs.with_clusters(k5, qs)
    ref = cs.cluster_bootstrap_ci(cl["correct"].astype(float), cl["cluster"])
    assert (row["boot_low"], row["boot_high"]) == pytest.approx((ref.low, ref.high))
    ablations.sweep_chart(t, "k").to_dict()


def test_sweep_table_names_a_missing_variant(k_preds):
    with pytest.raises(ablations.AblationInputError, match=r"dense-retrieval\(k=20\)"):
        ablations.sweep_table(k_preds, "dense-retrieval", "k", (3, 20))


def test_paired_tests_by_hand(k_preds):
    labels = ablations.variant_labels("dense-retrieval", "k", (3, 5, 10))
    res = ablations.paired_tests(k_preds, labels, "reference")
    # K=3 vs K=5: T1-q2 and T2-q1 wrong at 3, right at 5 -> b=0, c=2
    first = res.iloc[0]
    assert (first["strategy_a"], first["strategy_b"], first["n"]) == (labels[0], labels[1], 6)
    assert (first["b"], first["c"]) == (0, 2)
    assert first["p_value"] == pytest.approx(sm_mcnemar([[3, 0], [2, 1]], exact=True).pvalue)
    second = res.iloc[1]
    assert (second["b"], second["c"]) == (0, 1)
    assert second["p_adj"] >= second["p_value"]


def test_paired_tests_clustered_and_post_only(k_preds):
    labels = ablations.variant_labels("dense-retrieval", "k", (3, 5, 10))
    pre = preds_for("dense-retrieval", "T1", [False] * 4, setting="pre")  # ignored: not post
    qs = pd.DataFrame({"qid": [f"T1-q{i}" for i in range(4)] + ["T2-q0", "T2-q1"],
                       "subject_ids": [[1], [1], [2], [2], [3], [1]]})  # fmt: skip
    res = ablations.paired_tests(pd.concat([k_preds, pre]), labels, "reference", questions=qs)
    first = res.iloc[0]
    # K=3 -> K=5 gains T1-q2 (patient 2) and T2-q1 (patient 1): two discordant patients in the
    # same direction, exact sign flip p = 2 / 2^2 = 0.5.
    assert (first["b"], first["c"], first["n"]) == (0, 2, 6)
    assert (first["n_clusters"], first["clusters_discordant"]) == (3, 2)
    assert first["p_cluster"] == pytest.approx(0.5)


def test_clustered_sweep_orders_variants_and_matches_wilson(k_preds):
    labels = ablations.variant_labels("dense-retrieval", "k", (3, 5, 10))
    qs = pd.DataFrame({"qid": [f"T1-q{i}" for i in range(4)] + ["T2-q0", "T2-q1"],
                       "subject_ids": [[1], [1], [2], [2], [3], [1]]})  # fmt: skip
    out = ablations.clustered_sweep(k_preds, labels, qs)
    assert out["label"].tolist() == labels
    k3 = out.iloc[0]
    assert (k3["n"], k3["n_clusters"], k3["accuracy"]) == (6, 3, pytest.approx(0.5))
    assert (k3["wilson_low"], k3["wilson_high"]) == pytest.approx(
        proportion_confint(3, 6, method="wilson")
    )
    with pytest.raises(ablations.AblationInputError, match=r"dense-retrieval\(k=20\)"):
        ablations.clustered_sweep(k_preds, [*labels, "dense-retrieval(k=20)"], qs)


def test_setting_table_by_hand():
    qs = pd.DataFrame({"qid": [f"T3-q{i}" for i in range(4)],
                       "gold": ["yes", "yes", "no", "no"]})  # fmt: skip
    preds = pd.concat([
        preds_for("mem0", "T3", [True, False, True, True], "pre"),  # recall 1/2
        preds_for("mem0", "T3", [False, False, True, True], "post"),  # recall 0/2
    ], ignore_index=True)  # fmt: skip
    t = ablations.setting_table(preds, qs).iloc[0]
    assert (t["acc_pre"], t["acc_post"]) == (0.75, 0.5)
    assert (t["recall_pre"], t["recall_post"], t["recall_drop"]) == (0.5, 0.0, 0.5)
    with pytest.raises(ablations.AblationInputError, match="both 'pre' and 'post'"):
        ablations.setting_table(preds[preds["setting"] == "post"], qs)


def test_construction_reuse_reads_build_all_output():
    builds = pd.DataFrame({
        "strategy": ["llm-summary", "llm-summary"],
        "label": ["llm-summary", "llm-summary(budget_tokens=1000)"],
        "n_dialogues": [48, 48], "built": [0, 48], "cached": [48, 0], "seconds": [0.1, 2.0],
    })  # fmt: skip
    out = ablations.construction_reuse(builds)
    assert out["parameters"].tolist() == ["defaults", {"budget_tokens": 1000}]
    assert out["reused"].tolist() == [48, 0] and out["built"].tolist() == [0, 48]
    with pytest.raises(ablations.AblationInputError):
        ablations.construction_reuse(builds.drop(columns="cached"))


def _toy_cohort() -> pd.DataFrame:
    rows = [(i, "A", "low") for i in range(1, 4)] + [(i, "A", "high") for i in range(4, 7)]
    rows += [(i, "B", "low") for i in (7, 8)] + [(i, "B", "high") for i in (9, 10)]
    return pd.DataFrame(rows, columns=["subject_id", "disease", "tertile"])


def test_stratified_subset_allocates_by_hand():
    """n=5 over A (6 patients) and B (4): shares 3 and 2; within A the 1.5 / 1.5 tie goes to
    the tertile sorted first ('high'), within B one each."""
    cohort = _toy_cohort()
    picked = ablations.stratified_subset(cohort, n=5, seed=3)
    cells = cohort[cohort["subject_id"].isin(picked)].groupby(["disease", "tertile"]).size()
    assert cells.to_dict() == {("A", "high"): 2, ("A", "low"): 1, ("B", "high"): 1,
                               ("B", "low"): 1}  # fmt: skip
    assert picked == sorted(picked) and len(set(picked)) == 5
    assert ablations.stratified_subset(cohort, n=5, seed=3) == picked  # seeded
    draws = {tuple(ablations.stratified_subset(cohort, n=5, seed=s)) for s in range(20)}
    assert len(draws) > 1  # the seed matters
    assert ablations.stratified_subset(cohort, n=50) == list(range(1, 11))


def test_stratified_subset_and_subset_questions_errors_and_filtering():
    with pytest.raises(ablations.AblationInputError, match="tertile"):
        ablations.stratified_subset(_toy_cohort().drop(columns="tertile"))
    with pytest.raises(ablations.AblationInputError, match="positive"):
        ablations.stratified_subset(_toy_cohort(), n=0)
    qs = pd.DataFrame({"qid": ["a", "b", "c"], "subject_ids": [[1], [1, 9], [2]]})
    assert ablations.subset_questions(qs, [1, 2])["qid"].tolist() == ["a", "c"]
    assert ablations.subset_questions(qs, None) is qs


def test_encoder_hits_per_encoder_through_the_construction_cache(tmp_path, monkeypatch):
    """Both encoders' hit@k on the ablation questions, via the profile's cache, agree with
    the in-memory comparison of clinlib.strategies.encoder_eval."""
    import clinlib.core.config
    from clinlib.strategies.encoder_eval import dense_hits
    from tests import strategy_fixtures as F

    monkeypatch.setattr(clinlib.core.config, "BUILD_DIR", tmp_path)
    turns = F.dialogue(F.events_7001())
    qs = pd.DataFrame([
        {"qid": "a", "task": "T1", "subject_ids": [7001], "anchor_event_ids": ["LAB-22"],
         "evidence_turns": [], "question": "What was the patient's Troponin T on 2150-03-02?"},
        {"qid": "b", "task": "T2", "subject_ids": [7001], "anchor_event_ids": ["LAB-51"],
         "evidence_turns": [], "question": "How did hemoglobin change?"},
    ])  # fmt: skip
    got = ablations.encoder_hits(qs, "enc-test", dialogues=turns)
    assert got["encoder"].unique().tolist() == list(ablations.ENCODERS)
    assert got["label"].tolist()[-1] == "dense-retrieval(embedding_model='all-MiniLM-L6-v2')"
    assert (tmp_path / "enc-test" / "constructions" / "dense-retrieval").is_dir()
    for model in ablations.ENCODERS:
        overall = got[(got["encoder"] == model) & (got["task"] == "overall")].iloc[0]
        ref = dense_hits(qs, {7001: turns}, model, tmp_path / "ref")
        assert overall["n"] == 2 and overall["hit@1"] == ref["hit@1"].mean()
        assert overall["hit@3"] == ref["hit@3"].mean()
