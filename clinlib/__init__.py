"""ClinTrace Kit's public API: everything the numbered notebooks and apps use, in one place.

Notebooks write ``import clinlib as ct`` (or ``from clinlib import load, runner``) and never
reach into the stage packages. The map from notebook to helper is in the README; the packages,
one per pipeline stage, are::

    core      paths, profiles, atomic artifacts, stage guards, figure style
    data      sources (synthetic, MIMIC-IV, MEDS), cohort, events            (paper §3)
    dialogue  synthesis, length budget, verifier, viewer                     (§3, App. C)
    tasks     T1-T9 (+ extended T10) generators, gold rules, gates L0-L4    (§3, App. A)
    strategies  the eight history representations + extras, prep models     (§4)
    llm       backbones, client, response cache, token counts               (§4, App. D)
    eval      the harness, the answering prompt, offline answering policies (§4)
    analysis  metrics, statistics, the paper's tables, figures, audits      (§5, App. B-H)

Names resolve lazily (PEP 562): ``import clinlib`` stays cheap for the command line and the
tests, and a notebook pays only for the stages it touches.
"""

from __future__ import annotations

import importlib
from typing import Any

from clinlib.core.startup import skip_slow_optional_imports

skip_slow_optional_imports()  # before anything imports altair/jsonschema (docs/benchmarks.md)

# public name -> (module, attribute); attribute None = the module itself
_API: dict[str, tuple[str, str | None]] = {
    # profiles, paths, artifacts (docs/design.md "The artifact contract")
    "resolve_profile": ("clinlib.core.config", "resolve_profile"),
    "artifact_path": ("clinlib.core.config", "artifact_path"),
    "build_dir": ("clinlib.core.config", "build_dir"),
    "FIGURES_DIR": ("clinlib.core.config", "FIGURES_DIR"),
    "load": ("clinlib.data.build", "load"),
    "read_source_info": ("clinlib.data.build", "read_source_info"),
    "evaluable_patients": ("clinlib.core.guards", "evaluable_patients"),
    # prose that cannot drift: seed facts with their passages
    "SEED_FACTS": ("clinlib.core.seed_facts", "SEED_FACTS"),
    "seed_fact": ("clinlib.core.seed_facts", "seed_fact"),
    # ... and notebook prose rendered from values, claims checked where they are made
    "md": ("clinlib.core.prose", "md"),
    "claim": ("clinlib.core.prose", "claim"),
    "span": ("clinlib.core.prose", "span"),
    "ClaimFailed": ("clinlib.core.prose", "ClaimFailed"),
    "VacuousClaim": ("clinlib.core.claims", "VacuousClaim"),
    "sign_word": ("clinlib.analysis.meaning", "sign_word"),
    "clip_interval": ("clinlib.analysis.meaning", "clip_interval"),
    "strategy_role": ("clinlib.analysis.meaning", "role"),
    "label_strategies": ("clinlib.analysis.meaning", "label_strategies"),
    "StatedFigure": ("clinlib.analysis.meaning", "Figure"),
    "compare_figures": ("clinlib.analysis.meaning", "compare"),
    "Incomparable": ("clinlib.analysis.meaning", "Incomparable"),
    # figure style
    "savefig": ("clinlib.core.plots", "savefig"),
    "savetable": ("clinlib.core.plots", "savetable"),
    "use_theme": ("clinlib.core.plots", "use_theme"),
    "PALETTE": ("clinlib.core.plots", "PALETTE"),
    # registries
    "PAPER_STRATEGIES": ("clinlib.strategies.registry", "PAPER_STRATEGIES"),
    "DIAGNOSTIC_STRATEGIES": ("clinlib.strategies.registry", "DIAGNOSTIC_STRATEGIES"),
    "EVALUATION_STRATEGIES": ("clinlib.strategies.registry", "EVALUATION_STRATEGIES"),
    "PAPER_BACKBONES": ("clinlib.llm.presets", "PAPER_BACKBONES"),
    "get_strategy": ("clinlib.strategies.registry", "get_strategy"),
    "list_strategies": ("clinlib.strategies.registry", "list_strategies"),
    "build_all": ("clinlib.strategies.construction", "build_all"),
    "load_artifacts": ("clinlib.strategies.construction", "load_artifacts"),
    "PrepError": ("clinlib.strategies.prep", "PrepError"),
    "get_backbone": ("clinlib.llm.backbones", "get_backbone"),
    # provider batch jobs (README "Real endpoints": `RunOptions(mode="batch")`)
    "BatchClient": ("clinlib.llm.batch", "BatchClient"),
    "BatchPending": ("clinlib.llm.batch", "BatchPending"),
    "BatchServer": ("clinlib.llm.batchserver", "BatchServer"),
    "target_counts": ("clinlib.tasks.build", "target_counts"),
    "injected_dialogue": ("clinlib.tasks.injections", "injected_dialogue"),
    # noise augmentation (MedMemoryBench §4 "Noise Augmentation"), notebook 14
    "add_noise": ("clinlib.dialogue.noise", "add_noise"),
    "noise_facts": ("clinlib.dialogue.noise", "noise_facts"),
    "hide_noise_tags": ("clinlib.dialogue.noise", "hide_noise_tags"),
    "relatives_of": ("clinlib.dialogue.noise", "relatives_of"),
    "memory_stats": ("clinlib.analysis.memory_stats", None),  # 14: misattributed, Friedman, CV
    # the extended question set and T10 ordering (docs/design.md "Extended question set")
    "EXTENDED_TASK_NAMES": ("clinlib.tasks.answers.formats", "EXTENDED_TASK_NAMES"),
    "VALUE_EXAMPLE": ("clinlib.tasks.answers.formats", "VALUE_EXAMPLE"),
    "load_questions": ("clinlib.tasks.extended", "load_questions"),
    "build_temporal_questions": ("clinlib.tasks.extended", "build_temporal_questions"),
    "extended_counts": ("clinlib.tasks.extended", "extended_counts"),
    "kendall_tau": ("clinlib.tasks.answers.order", "kendall_tau"),
    "score_table": ("clinlib.analysis.metrics.scores", "score_table"),
    # evaluation settings (post / pre / stream / mixed; MedMemoryBench §5 "Evaluation Protocol"), 14
    "settings": ("clinlib.tasks.settings", None),
    "setting_plan": ("clinlib.strategies.construction", "setting_plan"),
    "accumulation": ("clinlib.analysis.streaming", None),  # 14: accuracy vs checkpoint
    # the modules behind the notebooks (README "Notebook map")
    "cohort_report": ("clinlib.data.report", None),  # 01
    "dialogues": ("clinlib.dialogue.synth", None),
    "dialogue_stats": ("clinlib.dialogue.stats", None),  # 02
    "render_dialogue": ("clinlib.dialogue.render", "render_dialogue"),  # 02
    "verify": ("clinlib.dialogue.verify", None),  # 02
    "dialogue_budget": ("clinlib.dialogue.budget", None),  # 02: the length budget
    "dialogue_viewer": ("clinlib.dialogue.viewer", None),  # 02, apps/dialogue_viewer
    "corpus_shape": ("clinlib.analysis.corpus_shape", None),  # 02
    # dialogues and questions written by a backbone, verified (Fig. 2 stages 3-4): 02, 03
    "rewrite_corpus": ("clinlib.eval.synthesis.rewrite", "rewrite_corpus"),  # 02
    "hostile_refusals": ("clinlib.eval.synthesis.hostile", "refusal_table"),  # 02
    "rewrite_dialogues": ("clinlib.eval.synthesis.rewrite", "rewrite_dialogues"),
    "estimate_rewrite": ("clinlib.eval.synthesis.rewrite", "estimate_rewrite"),
    "rewrite_report": ("clinlib.dialogue.rewrite_report", None),  # 02
    "visit_draft": ("clinlib.dialogue.rewrite", "visit_draft"),  # 02
    "paraphrase_questions": ("clinlib.eval.synthesis.paraphrase", "paraphrase_questions"),  # 03
    "estimate_paraphrase": ("clinlib.eval.synthesis.paraphrase", "estimate_paraphrase"),
    "paraphrase_frame": ("clinlib.eval.synthesis.paraphrase", "paraphrase_frame"),  # 03
    "answer_in_memory": ("clinlib.eval.synthesis.paraphrase", "answer_in_memory"),  # 03
    "paraphrase_checks": ("clinlib.tasks.paraphrase", None),  # 03
    "question_gates": ("clinlib.tasks.gates", None),  # 03: L3 on a reworded set
    "paraphrase_robustness": ("clinlib.analysis.paraphrase_robustness", None),  # 03
    "task_report": ("clinlib.tasks.report", None),  # 03
    "l5_audit": ("clinlib.tasks.audit", None),  # 03, `clintrace audit`
    "runner": ("clinlib.eval.harness.runner", None),  # 04, 06-11, 13
    # a run named by records: what (RunSpec) and how (RunOptions), `runner.run(spec, options)`
    "RunSpec": ("clinlib.eval.harness.records", "RunSpec"),
    "RunOptions": ("clinlib.eval.harness.records", "RunOptions"),
    # 07-10, 16: the offline readers' predictions, run if missing, and their views
    "offline_predictions": ("clinlib.analysis.offline_run", "offline_predictions"),
    "row_source": ("clinlib.analysis.offline_run", "row_source"),
    "ROW_SOURCES": ("clinlib.analysis.offline_run", "SOURCES"),
    "strategy_views": ("clinlib.strategies.views", None),  # 05
    "probe": ("clinlib.analysis.probe", None),  # 06
    "paper": ("clinlib.analysis.paper", None),  # 06-10, 13
    "metrics": ("clinlib.analysis.metrics", None),  # 07-10, 13
    "analysis_figures": ("clinlib.analysis.figures", None),  # 07-11
    "paper_figures": ("clinlib.analysis.paper_figures", None),  # 08-10, 12
    "token_totals": ("clinlib.analysis.token_totals", None),  # 10
    "ablations": ("clinlib.analysis.ablations", None),  # 11
    "cluster_stats": ("clinlib.analysis.stats.cluster", None),  # 07-11: patient-clustered stats
    "cluster_report": ("clinlib.analysis.stats.cluster_tables", None),  # 07-11: their tables
    "headline": ("clinlib.analysis.headline", None),  # every notebook's last cell: its checks
    "failures": ("clinlib.analysis.failures", None),  # 13, apps/failure_explorer
    "evidence": ("clinlib.analysis.evidence", None),  # 05, 13, 16: evidence recall, loss split
    "evidence_stage": ("clinlib.analysis.evidence_stage", None),  # 05, 13: the stage's artifacts
    "ablation_stage": ("clinlib.analysis.ablation_stage", None),  # 11: the stage's artifacts
    "substrate": ("clinlib.analysis.substrate", None),  # 16: App. G.8 dialogue vs event table
    "pages": ("clinlib.core.pages", None),  # the apps' paging and output budget
    "temporal": ("clinlib.analysis.temporal", None),  # 15
    "appendix": ("clinlib.analysis.appendix", None),  # 16: the paper's appendix diagnostics
    "subset_pairs": ("clinlib.tasks.relative", "subset_pairs"),  # 15
    "decisions": ("clinlib.analysis.decisions", None),  # 15: T11, Lab-F, tau by items
    "long_cohort": ("clinlib.data.long_cohort", None),  # 15: LongMedBench's cohort rule
    "longmed": ("clinlib.analysis.longmed", None),  # 15: the evaluate-longmed stage's tables
    "population": ("clinlib.analysis.population", None),  # 17
    "population_eval": ("clinlib.eval.population.answer", None),  # 17
    "population_stage": ("clinlib.analysis.population_stage", None),  # 17: the cached scoreboards
    "population_scores": ("clinlib.analysis.population_scores", None),  # 17: Figs 3, 5, 6
    "traps": ("clinlib.tasks.traps.stage", None),  # 18: trap facts and the six query types
    "trap_eval": (
        "clinlib.eval.traps.questions",
        None,
    ),  # 18: trap questions asked, reference reader
    "safety": ("clinlib.analysis.safety", None),  # 18: safe rate, retention, Table 14
    "trap_dialogue": ("clinlib.tasks.traps.facts", "trap_dialogue"),  # 18
    "ask_traps": ("clinlib.eval.traps.ask", "ask_traps"),  # trap questions to any backbone
    "trap_answers": ("clinlib.eval.traps.stage", None),
    "task_spec": (
        "clinlib.tasks.registry",
        "get_spec",
    ),  # 18: a task's spec (its defaults)  # 18: the trap-answers stage's artifacts
    # a real local model, offline (README "A local model"): 04, 06, 11
    "serve_local": ("clinlib.llm.local_server", "serve_local"),
    "local_available": ("clinlib.llm.local_server", "local_available"),
    "slice_profile": ("clinlib.eval.harness.slices", "slice_profile"),
    "smallest_patients": ("clinlib.eval.harness.slices", "smallest_patients"),
    "local_slice": ("clinlib.eval.harness.slices", "local_slice"),
    # the judge, its audit against deterministic gold, core memory (05, 18)
    "judge_predictions": ("clinlib.eval.judge.scoring", "judge_predictions"),
    "judge_audit": ("clinlib.analysis.judge_audit", "judge_audit"),
    "overlap_scores": ("clinlib.analysis.judge_audit", "overlap_scores"),
    "core_memory": ("clinlib.strategies.core_memory", None),
    # the stored free-text trap answers (IG, MCD) judged (18)
    "judge_traps": ("clinlib.eval.judge.run", "judge_traps"),
}

__all__ = sorted(_API)


def __getattr__(name: str) -> Any:
    try:
        module, attr = _API[name]
    except KeyError:
        raise AttributeError(f"module 'clinlib' has no attribute {name!r}") from None
    # the one sanctioned in-function import: lazy public names (PEP 562)
    value = importlib.import_module(module)
    value = value if attr is None else getattr(value, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
