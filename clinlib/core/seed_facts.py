"""The seed facts: every number, table id or section id the kit cites from a seed paper, with
the verbatim passage it comes from, so prose cannot drift from its source.

The seeds are the four papers the kit rebuilds or borrows from (``SEEDS``: file stem -> name).
One row per cited passage (:class:`SeedFact`): each of its ``values`` occurs in ``passage``,
and the passage occurs in the seed text (``tests/core/test_seed_facts.py`` checks both).
``seed_fact("ctb_questions")`` -> :class:`SeedFact`; ``str(fact)`` is the value as printed,
``fact.cite`` value and source. Numbered sections are in :mod:`clinlib.core.seed_sections`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# seed file stem (under the seeds directory) -> the name prose uses
SEEDS: dict[str, str] = {
    "clintracebench": "ClinTraceBench",
    "medmemorybench": "MedMemoryBench",
    "longmedbench": "LongMedBench",
    "popmedqa-neopatient": "PopMedQA",
}


@dataclass(frozen=True)
class SeedFact:
    """One cited passage of a seed and the numbers the kit takes from it.

    Attributes:
        key: table key (``ctb_``/``mmb_``/``lmb_``/``pmq_`` + a slug).
        seed: file stem of the seed (a key of :data:`SEEDS`).
        where: where the seed prints it ("§3 \\"Evaluation set\\"", "Table 3 caption").
        values: the numbers as the kit prints them, each found in ``passage``; empty for a
            qualitative citation (a table id is the id's number, e.g. ``("10",)``).
        passage: the verbatim seed text (whitespace may differ).
        note: how the kit uses it, or what it is not.
    """

    key: str
    seed: str
    where: str
    values: tuple[str, ...]
    passage: str
    note: str = ""

    @property
    def value(self) -> str:
        """The value(s) as printed: one value, or several joined with " / "."""
        return " / ".join(self.values)

    @property
    def source(self) -> str:
        """Seed name and location, e.g. 'ClinTraceBench §3 "Evaluation set"'."""
        return f"{SEEDS[self.seed]} {self.where}"

    @property
    def cite(self) -> str:
        """Value and source, e.g. '6,271 (ClinTraceBench §3 "Evaluation set")'."""
        return f"{self.value} ({self.source})" if self.values else self.source

    def number(self, i: int = 0) -> float:
        """``values[i]`` as a float (commas, '%', a 'k' suffix and the unicode minus read)."""
        text = self.values[i].replace(",", "").replace("−", "-").rstrip("%")
        scale = 1000.0 if text.endswith("k") else 1.0
        return float(text.rstrip("k")) * scale

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


def _f(key: str, seed: str, where: str, values: tuple[str, ...], passage: str, note: str = ""):
    return SeedFact(key, seed, where, values, passage, note)


CTB, MMB, LMB = "clintracebench", "medmemorybench", "longmedbench"
PMQ = "popmedqa-neopatient"

# a table, laid out by hand: one fact per call, its passage on the lines under it
# fmt: off
_FACTS: tuple[SeedFact, ...] = (
    # --- ClinTraceBench: cohort, dialogues, question set (§3, Fig. 2, App. C) --------------
    _f("ctb_questions", CTB, '§3 "Evaluation set"', ("6,271",),
       "The L0–L4 + L5 pipeline yields a 6,271-question stratified set"),
    _f("ctb_scale", CTB, '§7 "Conclusion"', ("9", "385", "8", "4", "6,271", "200,672"),
       "9 tasks, 385 verified dialogues, 8 history representation strategies, 4 "
       "frontier backbones, 6,271 questions, and 200,672 predictions"),
    _f("ctb_task_sizes", CTB, '§3 "Evaluation set"',
       ("1500", "889", "600", "53", "495", "700", "400", "134", "1500"),
       "(T1 = 1500, T2 = 889, T3 = 600, T4 = 53, T5 = 495, T6 = 700, T7 = 400, T8 = "
       "134, T9 = 1500",
       "T1 … T9 in order (clinlib.tasks.rules.PAPER_COUNTS)"),
    _f("ctb_cohort_funnel", CTB, "Fig. 2", ("364,627", "400"),
       r"1. Cohort: MIMIC-IV 364{,}627\to 400"),
    _f("ctb_diseases", CTB, '§3 "Cohort"', ("100",),
       "(diabetes, hypertension, CKD, CAD; 100 each)"),
    _f("ctb_tertiles", CTB, '§3 "Cohort"', ("33/34/33",),
       "low / medium / high complexity tertiles (33/34/33)"),
    _f("ctb_inclusion", CTB, '§3 "Cohort"', ("2", "7", "5", "2", "2"),
       r"Inclusion requires \geq 2 admissions >7 days apart, \geq 5 labs, \geq 2 "
       r"prescriptions, and \geq 2 ICD codes in the index disease",
       "admissions, days apart, labs, prescriptions, index-disease codes"),
    _f("ctb_lab_panel", CTB, '§3 "Cohort"', ("18",),
       "Lab extraction uses a fixed 18-lab panel with canonical units"),
    _f("ctb_verified", CTB, "Fig. 2", ("400", "385"),
       "400 patients yielding 385 verified dialogues"),
    _f("ctb_dropped", CTB, '§3 "Cohort"', ("15", "385"),
       "15 patients fail dialogue invariants during synthesis and are dropped, "
       "yielding 385 verified dialogues"),
    _f("ctb_verifier_checks", CTB, "Fig. 2", ("10", "3", "385/400"),
       "verifier v3.2 (10 HARD + 3 SOFT); 385/400 pass"),
    _f("ctb_visits_per_patient", CTB, "App. C.1", ("10", "16.0", "93"),
       "visits per patient (median 10, mean 16.0, max 93)",
       "median / mean / max"),
    _f("ctb_dialogue_chars", CTB, "App. C.1", ("13.7k", "15.0k", "30.7k"),
       "dialogue length in thousands of characters (median 13.7 k, mean 15.0 k, max "
       "30.7 k)",
       "median / mean / max"),
    _f("ctb_questions_per_patient", CTB, "App. C.1", ("4", "4.3", "12"),
       "stratified-eval questions per patient (median 4, mean 4.3, max 12)",
       "median / mean / max"),
    _f("ctb_fig13_n", CTB, "Fig. 13 caption", ("385",),
       "Figure 13: Cohort statistics for the n=385 verified dialogues."),
    _f("ctb_t9_pool_split", CTB, "App. B.6", ("1,147", "353", "76", "24"),
       r"The T9 pool splits 1{,}147 lab-anchored vs. 353 other-anchored, an \approx "
       r"76\%/24\% ratio."),
    _f("ctb_sp2_gpt_blind", CTB, "§5.3", ("0.332",),
       "GPT-4o-mini is the outlier: highest blind (0.332), lowest full-context (0.630), "
       "narrowest lift—a pattern consistent with a hallucination floor"),
    _f("ctb_t9_blind_abstention", CTB, "§5.4", ("0.355", "0.685", "0.000", "0.204"),
       "no-context-blind: abstention 0.355 / 0.685 / 0.000 / 0.204 (DeepSeek / GPT-4o-mini / "
       "Haiku / Sonnet)",
       "DeepSeek / GPT-4o-mini / Haiku / Sonnet"),
    _f("ctb_t9_gpt_prior", CTB, "§5.4", ("0.685", "0.332"),
       "GPT-4o-mini’s anomalous blind T9 of 0.685 (vs. its pooled-blind 0.332) reflects a "
       "default abstention prior under empty context"),
    _f("ctb_t9_n", CTB, "§5.4", ("1,500",),
       "all 1,500 gold answers are “insufficient information”",
       "T9 answers per cell"),
    _f("ctb_mem0_size_r", CTB, "App. C.3", ("−0.129", "210"),
       r"Pearson r(\text{{Mem0} size},\text{{Mem0} T1 accuracy})=-0.129 on n=210 "
       "patients"),
    # --- ClinTraceBench appendix diagnostics (App. B, D, E, F, G.4, Limitations; notebook 16)
    _f("ctb_t3_4class_n", CTB, "Fig. 8 caption", ("34", "31", "43", "22"),
       "n: Y-admit 34, Y-er 31, N-admit 43, N-er 22."),
    _f("ctb_t5_families", CTB, "App. B.3", ("0.32", "0.97", "0.80", "0.07"),
       "Controlled subtypes climb from 0.32 at no-ctx to 0.97 under full-context, while the "
       r"lone natural subtype (lab non-glucose) goes the other way (0.80\rightarrow 0.07)"),
    _f("ctb_t4_n", CTB, "App. B.4", ("53",),
       "T4 scores strict set-F1 on event UIDs and is the smallest task in the suite (n=53)"),
    _f("ctb_t8_bins", CTB, "App. B.5", ("0.29", "0.65", "0.69", "0.94"),
       "large/medium bins climb from 0.29–0.65 at no-ctx to 0.69–0.94 at full-context"),
    _f("ctb_fig16_extremes", CTB, "Fig. 16 caption", ("0.0169", "0.00003", "0%", "35%"),
       r"Sonnet \times full-context is the most expensive cell ($0.0169/q); DeepSeek \times "
       "no-context blind is the cheapest ($0.00003/q). Cache-hit range: 0%–35%."),
    _f("ctb_empty_share", CTB, "App. E.1", ("0.7%", "200,672"),
       r"roughly 0.7\% of the 200,672 prediction rows still have an empty raw_response"),
    _f("ctb_parse_fail_share", CTB, "App. E.2", ("6.5%", "200,672"),
       r"About 6.5\% of the 200,672 rows fall into this bucket"),
    _f("ctb_truncation", CTB, "App. E.3", ("120", "86", "88%"),
       "T4 is the only task where the 120-token ceiling binds in a meaningful way "
       r"(86–88\% truncation on Haiku / Sonnet under the worst memory baseline)"),
    _f("ctb_hypertension_acc", CTB, "App. F.2", ("0.615",),
       "The hypertension row is consistently the weakest (mean 0.615)"),
    _f("ctb_boot_cells", CTB, "App. F.4", ("95%", "288", "100", "20260519"),
       r"the bootstrap 95% CI width for each of the 9\times 8\times 4=288 cells (100 resamples "
       "per cell, seed 20260519)"),
    _f("ctb_overanswer_makeup", CTB, "App. G.4", ("307", "36%", "28%", "36%", "93%", "54%"),
       "the strict parser scored 307 full-context responses as non-abstentions. Of these, 36% "
       "fabricated a specific value, 28% gave a bare Yes/No, and 36% fell into an “other” "
       "category—but 93% of that “other” bucket were verbose abstentions the strict parser "
       "missed. Discounting those parser misses, fabricated values account for roughly 54% of "
       "genuine over-answers"),
    _f("ctb_key_coverage", CTB, 'section "Limitations" ("Synthetic dialogues")', ("98",),
       "key labs, admissions and discharges, procedures, and diagnoses are covered at \\geq "
       "98\\%",
       "the paper does not say which labs are key; the kit's key labs are "
       "clinlib.dialogue.fields.KEY_LABS"),
    _f("ctb_empty_count", CTB, 'section "Limitations"', ("1,400", "0.7%", "200,672"),
       "Approximately 1,400 empty API responses (0.7% of 200,672"),
    _f("ctb_empty_sensitivity", CTB, 'section "Limitations"', ("+0.2", "0.5"),
       "excluding them would inflate Sonnet / Haiku full-context by at most +0.2 pp, well below "
       "all headline contrasts, and the sensitivity appendix confirms that every SP1–SP4 "
       r"contrast holds (\Delta<0.5 pp) under either policy"),
    _f("ctb_dense_k", CTB, '§4 "Retrieval"', ("5",),
       "BGE-M3 chunk embeddings per patient, top-K{=}5"),
    # --- ClinTraceBench: evaluation, SP4 probe, costs (§4–§5, tables' captions) -----------
    _f("ctb_cells", CTB, "Fig. 2", ("8", "4", "32", "200,672"),
       r"8\times 4=32 cells, 200,672 predictions",
       "strategies × backbones = cells"),
    _f("ctb_spend", CTB, "§1", ("6,271", "32", "200,672", "527.85"),
       "on a fixed 6,271-question set: 32 cells, 200,672 predictions, $527.85"),
    _f("ctb_pooled_order", CTB, "§5.1", ("58.4", "59.6", "50.8", "55.9", "41.6", "49.5"),
       "structured-timeline sits third (58.4–59.6) and is strikingly "
       r"backbone-invariant (\pm 0.6 pp). Mem0 and A-Mem cluster at 50.8–55.9; "
       "llm-summary and last-visit-only trail at 41.6–49.5.",
       "pooled accuracy (%) over the four LLM backbones"),
    _f("ctb_length_degradation", CTB, 'section "Limitations"', ("−13", "−14"),
       "Long-context degradation is uniform across backbones (-13 to -14 pp from "
       "shortest to longest quartile), but length and disease severity remain "
       "entangled.",
       "names no strategy"),
    _f("ctb_t3_subset", CTB, "§5.5", ("20", "47", "19", "28"),
       "On a stratified 20-patient subset of the cohort—47 T3 questions, 19 "
       "injected-positive and 28 negative"),
    _f("ctb_t3_recall", CTB, "abstract", ("0", "5.3"),
       "Mem0, A-Mem and llm-summary still recover only 0–5.3% of the injected "
       "positives"),
    _f("ctb_t3_best_recall", CTB, "§5.5", ("1/19", "5.3", "0/19"),
       r"at best 1/19 (5.3\%) for Mem0 and A-Mem, and 0/19 for every llm-summary cell"),
    _f("ctb_t3_post_retained", CTB, "§5.5", ("0.869", "0.938", "0.769", "0.869"),
       "leaves full-context (0.869–0.938), last-visit-only and dense-retrieval "
       "(0.769–0.869) intact",
       "T3 accuracy after injection, LLM backbones"),
    _f("ctb_t3_constant_no", CTB, "§5.5", ("600", "16", "0.500"),
       "all four upstream-built strategies answer “No” on all 600 T3 questions in all "
       "16 cells, giving exactly 0.500"),
    _f("ctb_constant_no_flag", CTB, "Fig. 5 caption", ("575/600",),
       r"red triangles flag cells with pred=no \geq 575/600"),
    _f("ctb_frontier", CTB, "Fig. 6 caption", ("11/32",),
       "Dashed curve: Pareto frontier (11/32)."),
    _f("ctb_haiku_sonnet", CTB, "abstract", ("25.76", "106.21"),
       "Haiku dominates Sonnet under full-context ($25.76 vs. $106.21)"),
    _f("ctb_table1_bins", CTB, "Table 1 caption", ("30", "45", "60", "70"),
       "30–45 45–60 60–70"),
    _f("ctb_table_matched_prep", CTB, "Table 10 (App. G.5)", ("10",),
       "Table 10: Overall accuracy with DeepSeek-V3–prepared versus backbone-matched "
       "agentic memory on the stratified 20-patient subset.",
       "matched-vs-fixed prep"),
    _f("ctb_table_summary_budget", CTB, "Table 12 (App. G.6)", ("12", "500", "1,000"),
       "Table 12: llm-summary accuracy at a 500- versus 1,000-token budget",
       "the summary budget"),
    _f("ctb_table_t3_probe", CTB, "Table 3 (§5.5)", ("3", "19", "20"),
       "Table 3: SP4 equal-input preservation probe: positive-class recall on the 19 "
       "injected-positive T3 instances (stratified 20-patient subset)"),
    _f("ctb_table_full_matrix", CTB, "Table 14 (App. I)", ("14", "32", "6,271"),
       "Table 14: Complete per-task accuracy across all 32 (history representation "
       "strategy, backbone) cells, on the 6,271-question strati"),
    # --- ClinTraceBench: the L5 audit (App. A; clinlib.tasks.audit) ---------------------
    _f("ctb_l5_sample", CTB, 'App. A "L5 — Human spot-check"',
       ("370", "30", "4", "50", "5", "366", "98.92%"),
       "A stratified sample of 370 questions (30/task low-risk \\times 4 + 50/task high-risk "
       "\\times 5) was hand-audited by the authors; 366/370 = 98.92% agreement",
       "quotas and agreement of clinlib.tasks.audit"),
    _f("ctb_l5_fails", CTB, 'App. A "L5 — Human spot-check"', ("7/9", "2%", "6%", "10%"),
       "7/9 tasks scored 0% FAIL; T7 = 2% (distractor substring leak), T9 = 6% (Secondary-pool "
       "textual templating). Both below the 10% fix threshold.",
       "T7 and T9 print as 1/50 and 3/50 only (clinlib.tasks.audit.paper_quota_solutions)"),
    # --- MedMemoryBench (§4 construction, §5 protocol, appendix "Results Across Multiple
    #     Random Seeds") -------------------------------------------------------------------
    _f("mmb_corpus", MMB, '§4 "Statistics"', ("20", "100", "6", "10"),
       "MedMemoryBench contains 20 chronic-disease patients, each with approximately "
       "100 physician–patient sessions of 6–10 turns",
       "patients, sessions per patient, turns"),
    _f("mmb_mixed_sessions", MMB, '§4 "Statistics"', ("200",),
       "The Mixed setting further appends roughly 200 additional sessions per patient",
       "with mmb_corpus's ~100 real sessions: Mixed ≈ 2 noise sessions per real one"),
    _f("mmb_relatives", MMB, '§4 "Noise Augmentation"', ("2", "4"),
       "Each patient is associated with 2–4 virtual family members who have "
       "independent health profiles"),
    _f("mmb_delta", MMB, '§5 "Evaluation Protocol"', ("10",),
       r"We evaluate every $\Delta$ sessions, with $\Delta =10$"),
    _f("mmb_seeds", MMB, 'appendix "Results Across Multiple Random Seeds"',
       ("42", "123", "456", "789", "2024"),
       "we repeat the experiments with five random seeds: 42, 123, 456, 789, and 2024"),
    _f("mmb_friedman", MMB, 'appendix "Results Across Multiple Random Seeds"',
       ("42.47", "9", "39.20"),
       r"${\chi }_F^2=42.47$ with 9 degrees of freedom under the Efficient setting "
       r"($p\approx 2.70\times 10^{-6}$), and ${\chi }_F^2=39.20$",
       "Efficient, df, Mixed"),
    _f("mmb_cv", MMB, 'appendix "Results Across Multiple Random Seeds"', ("6", "9"),
       "All evaluated methods have CV below 6% in the Efficient setting and below 9% "
       "in the Mixed setting"),
    _f("mmb_table_seeds", MMB, "Tables 12–13", ("12", "13"),
       "Tables 12 and 13 report the response accuracy of each of the ten evaluated "
       "methods for every seed"),
    _f("mmb_table_hallucination", MMB, "Table 3", ("3",),
       "Table 3: Response quality and safety metrics."),
    _f("mmb_safe_rate", MMB, 'appendix Table 14 "Results and implications"', ("60", "87", "68.97"),
       "Letta correctly answers 60 of the 87 safety-critical queries, achieving an overall "
       "safe rate of 68.97%",
       "correct, total, safe rate % (one method, five patients)"),
    _f("mmb_safe_rate_categories", MMB, 'appendix Table 14 "Results and implications"',
       ("58.3", "62.5", "66.7", "70.6", "78.6", "87.5"),
       "Personalized-constraint omissions yield the lowest safe rate (58.3%), followed by "
       "incorrect medication recommendations (62.5%) and missed contraindications (66.7%). "
       "These results highlight difficulties in consistently applying patient-specific "
       "information to safety-sensitive responses. Delayed emergency responses and unsafe OTC "
       "medication use attain safe rates of 70.6% and 78.6%, respectively, indicating that "
       "failures also occur beyond prescription-related decisions. Improper dosage adjustments "
       "achieve the highest safe rate (87.5%)",
       "per risk category in the order of clinlib.analysis.safety.SEED_CATEGORY_ORDER"),
    _f("mmb_f1_correct", MMB, 'appendix "LoCoMo"', ("0.5",),
       r"we use F1 score to measure the overlap between model responses and reference "
       r"answers. A response is counted as correct when F1 $\ge 0.5$",
       "the threshold of clinlib.eval.judge.scoring's lexical-judge"),
    _f("mmb_safe_dosage_n", MMB, 'appendix Table 14 "Results and implications"', ("8",), "Improper dosage adjustments achieve the highest safe rate (87.5%), although this category contains only eight queries", "the one category count the seed's text states (87 in all)"),
    # --- LongMedBench ("event retrieval" Table 2, "temporal reasoning" Table 3) ------------
    _f("lmb_cohort", LMB, "data", ("15", "355", "6,999", "19.72"),
       r"Filtering for patients with $\geq 15$ hospitalizations yields 355 patients and "
       "6,999 visits. With an average of 19.72 visits per patient"),
    _f("lmb_windows", LMB, '"event retrieval"', ("3", "5", "7", "1", "2", "3"),
       r"comparing window sizes $\{3,5,7\}$ (i.e., $m\in\{1,2,3\}$ in "
       r"$\mathcal{M}_{E}$)"),
    _f("lmb_explicit_decay", LMB, "Table 2", ("0.882", "0.423", "0.570"),
       "dropping from 0.882 to 0.423 in explicit retrieval, with low Lab-F scores "
       r"($\leq$0.570)"),
    _f("lmb_mem0_explicit", LMB, "Table 2", ("0.993", "0.983", "0.331"),
       "while Mem0 achieves near-optimal results in explicit Lab-T (0.993) and "
       "Medication (0.983), its relative performance (Overall 0.331) remains inferior",
       "0.993 is explicit *lab* (Lab-T), 0.983 medication; imaging is named as a "
       "weakness"),
    _f("lmb_mem0_imaging", LMB, "Table 2", (),
       "agents struggle to generate precise queries for imaging reports even with "
       "few-shot prompting"),
    _f("lmb_tau_cloze", LMB, "Table 3", ("0.925", "0.046", "0.969", "0.316"),
       "top models achieve near-perfect performance (gpt-5-mini: 0.925), while weaker "
       "models struggle (qwen-turbo: 0.046). Enabling thinking mode substantially "
       "boosts reasoning (deepseek-v3.2-thinking: 0.969 vs. deepseek-v3.2: 0.316)"),
    _f("lmb_tau_visit_sorting", LMB, "Table 3", ("0.423",),
       "performance drops sharply (best: deepseek-v3.2-thinking 0.423)",
       "the seed's best Visit Sorting score"),
    _f("lmb_tau_joint_sorting", LMB, "Table 3", ("0.330",),
       "Performance declines to 0.330",
       "the seed's best Joint Sorting score"),
    # --- LongMedBench "Task 3" decisions (T11), its cohort and Fig. 3(a) ---------------------
    _f("lmb_decision_decay", LMB, '"Task 3" decisions', ("3", "3", "3", "6", "24", "24"),
       "Next Action Prediction (T3-N) requires the agent to predict $a_{i}^{GT}$, Argument "
       "Prediction (T3-A) evaluates inference for $p_{i}^{GT}$, and Discharge Decision (T3-D) "
       "queries if the patient can be discharged within $6$h. For two prediction tasks, as "
       "shown in Figure 2, a time-decay scoring mechanism is applied to recognize actions "
       r"$\mathcal{E}_{24h}$, events that occur within $24h$ after $t_{i}^{GT}$.",
       "T3-N / T3-A / T3-D (the kit's T11 subtypes), the discharge window in hours, the "
       "credit horizon in hours; the decay's form is in Figure 2, not in the text: the kit's "
       "is linear (clinlib.tasks.answers.decision)"),
    _f("lmb_decision_memory", LMB, "Table 4", ("4",),
       "As shown in Table 4, structured event memory outperforms note memory in most models "
       "in decision making.",
       "qualitative: event memory beats note memory for decisions"),
    _f("lmb_decision_length", LMB, "Table 5", ("5",),
       "As shown in Table 5, although the difference is subtle, close to that under full "
       "memory conditions, increasing the context length makes the agent perform worse.",
       "qualitative: more injected history, slightly worse decisions"),
    _f("lmb_decision_not_history", LMB, "conclusion", (),
       "decision quality is not strongly correlated with the amount of retrieved historical "
       "information, while the agent performance depends more on the model’s clinical "
       "reasoning capacity within the immediate context"),
    _f("lmb_cohort_rule", LMB, "data", ("15", "355", "6,999", "19.72", "18.00", "5.72"),
       "we retain only abnormal lab results and patients with complete admission/discharge "
       r"records. Filtering for patients with $\geq 15$ hospitalizations yields 355 patients "
       "and 6,999 visits. With an average of 19.72 visits per patient (median=18.00, SD=5.72)",
       "the cohort option clinlib.data.long_cohort reproduces (rule, not the MIMIC counts)"),
    _f("lmb_visit_events", LMB, "data", ("44.91", "25.00", "70.32"),
       r"each visit $\mathcal{V}_{i}$ contains 44.91 medical events (median=25.00, SD=70.32)"),
    _f("lmb_fig3a_options", LMB, "Fig. 3(a)", ("3",),
       "regradless of the option numbers (the length of the event stream), as illustrated in "
       "Figure 3(a)",
       "the seed's spelling; qualitative: cloze tau does not fall with the number of items"),
    _f("lmb_labf", LMB, "Table 2", ("2",),
       "Results in Table 2 report Lab-T (recall) and Lab-F (rejection) to assess "
       "hallucination impact.",
       "Lab-F = the kit's T1F rejection questions"),
    # --- PopMedQA / neopatient: the verbose context problem (§2, Fig. 1, App. B-C) ----------
    _f("pmq_group_size", PMQ, '§2 "PopMedQA: Verbosity in Medical Records"', ("10", "50"),
       "PopMedQA consists of questions about groups (of size between 10 and 50) of "
       "longitudinal patient records"),
    _f("pmq_tokens_per_code", PMQ, '§2 "PopMedQA: Verbosity in Medical Records"',
       ("8", "20"),
       "When a typical code is conveyed as text, it uses between 8 and 20 tokens",
       "the seed's tokens per code as text; the kit measures its own (App. B M / codes)"),
    _f("pmq_length_bins", PMQ, '§2 "PopMedQA: Verbosity in Medical Records"',
       ("64K", "128K", "256K"),
       "This makes most of PopMedQA’s questions approximately 64K, 128K, or 256K tokens in "
       "length, when represented as text",
       "the seed's length bins; clinlib.tasks.population.questions.SEED_BINS"),
    _f("pmq_corpus", PMQ, '§2 "PopMedQA: Verbosity in Medical Records"', ("25", "14M"),
       "These records are drawn from over 25 thousand synthetic patients generated "
       "specifically for the benchmark. These records comprise over 14M medically-coded "
       "events"),
    _f("pmq_fig1_axes", PMQ, "Fig. 1 (statistics of all questions)",
       ("100K", "400K", "5K", "25K", "1K"),
       "100K200K300K400K Token Counts(as Text) 5K10K15K20K25K Total Patient Events "
       "1015202530 Number of Patients 1K2K3K4K5K Number of Unique Codes",
       "Fig. 1's histogram axes (tokens as text up to ~400K, events up to ~25K, 10-30 "
       "patients, up to ~5K unique codes per question); the bars' heights are not printed"),
    _f("pmq_nine_tasks", PMQ, '§2 "PopMedQA: Verbosity in Medical Records"', ("nine",),
       "Each question poses one of nine computational tasks",
       "the prose says nine; App. C's scoring table lists ten rows (the kit builds all ten)"),
)
# fmt: on

SEED_FACTS: dict[str, SeedFact] = {f.key: f for f in _FACTS}
assert len(SEED_FACTS) == len(_FACTS), "duplicate seed-fact key"


def seed_fact(key: str) -> SeedFact:
    """The fact under ``key``; a KeyError names the nearest keys."""
    try:
        return SEED_FACTS[key]
    except KeyError:
        near = [k for k in SEED_FACTS if k.split("_")[0] == key.split("_")[0]]
        raise KeyError(f"no seed fact {key!r}; {key.split('_')[0]}_ keys: {near}") from None


def facts_of(seed: str) -> Mapping[str, SeedFact]:
    """The facts of one seed (file stem), by key."""
    return {k: f for k, f in SEED_FACTS.items() if f.seed == seed}
