"""Paraphrase templates of the T1–T9 questions and the controlled-injection sentences
(paper §3 "Task suite", Fig. 1; §5.5 the T3 probe; Appendix B subtypes).

The paper's generator produced an (anchor, gold) pair in Python and let a model paraphrase it;
the kit keeps the paraphrase step deterministic: every task has three or more templates and the
generator picks one by a hash of the question id (``template_id`` records which). Templates
hold no digits (except the rule parameters they state: T6's similarity margin, T8's
minimum delay), no answer vocabulary beyond the format statement and no cue that an answer
might be absent (T9 questions are worded exactly like T1 questions).

Every question ends with its task's answer-format statement
(``clinlib.tasks.answers.ANSWER_FORMATS``).
Dates are ISO ``YYYY-MM-DD``, as the dialogues write them.
"""

from __future__ import annotations

# --- T1 numeric lab retrieval (T9 lab / lab-unmeasured questions reuse these verbatim) ------
T1_TEMPLATES: tuple[str, ...] = (
    "What was the patient's {lab} on {date}?",
    "On {date}, what {lab} value was recorded for this patient?",
    "Report the patient's {lab} result from {date}.",
    "What did the {lab} measurement of {date} show?",
)

# --- T2 trend over 2-5 visits --------------------------------------------------------------
T2_TEMPLATES: tuple[str, ...] = (
    "Across the {n} encounters that began on {dates}, how did the patient's {lab} change from "
    "the first of these encounters to the last? Use the first {lab} measurement of each "
    "encounter.",
    "Take the first {lab} result of each of these {n} encounters: {dates}. What is the trend "
    "of the {lab} from the earliest to the latest of them?",
    "Comparing the patient's {lab} at the encounters of {dates} (first measurement of each "
    "encounter), what was the overall trend between the first and the last of these {n} "
    "encounters?",
)

# --- T3 controlled attribution ---------------------------------------------------------------
T3_TEMPLATES: tuple[str, ...] = (
    "In the encounter that began on {date}, did the clinician explicitly attribute the "
    "{lab} result of {value} {unit} to {problem}?",
    "During the encounter starting {date}, was the {lab} of {value} {unit} explicitly noted by "
    "the physician as consistent with {problem}?",
    "Did the physician, in the encounter of {date}, explicitly link the {lab} finding of "
    "{value} {unit} to {problem}?",
)
# The injected attribution sentence (paper §3 T3: "physician noted: finding is consistent with
# problem"). {finding} is "<lab label> of <value> <unit>", {problem} the diagnosis title.
T3_INJECTION = "Physician noted: {finding} is consistent with {problem}."

# --- T4 retrospective propagation ----------------------------------------------------------
# {labs} names the family's evidence labs ("% Hemoglobin A1c or Glucose"), so the question
# says which findings count without naming any event.
T4_TEMPLATES: tuple[str, ...] = (
    "At the encounter that began on {date}, {problem} (ICD code {code}) was coded for the "
    "first time. Which earlier abnormal {labs} results, documented before that encounter, "
    "are evidence for it?",
    "The diagnosis {problem} (ICD code {code}) first appears in the encounter of {date}. List "
    "the abnormal {labs} findings from earlier encounters that supported this diagnosis.",
    "Looking back from the encounter of {date}, where {problem} (ICD code {code}) was first "
    "recorded: which abnormal {labs} results from previous encounters point to it?",
)

# --- T5 controlled contradiction -----------------------------------------------------------
T5_TEMPLATES: tuple[str, ...] = (
    "Does the chart contain a self-contradictory statement about {topic}?",
    "Is there a statement in this record that contradicts another documented fact about {topic}?",
    "Regarding {topic}: does the record contradict itself?",
)
# Topics name what the question is about, in the same form for contradicted and clean facts.
T5_TOPIC_DX = "the diagnosis of {title} in the encounter that began on {date}"
T5_TOPIC_PROCEDURE = "the procedure {title} in the encounter that began on {date}"
T5_TOPIC_LAB = "the {lab} result of {date}"
# Contradicting statements inserted as a clinician turn after the anchor's turn.
T5_STATEMENTS_DX: tuple[str, ...] = (
    "Physician noted: the patient has never been diagnosed with {title}.",
    "Physician noted: {title} is not among this patient's diagnoses.",
    "Physician noted: there is no history of {title} ({code}).",
)
T5_STATEMENTS_PROCEDURE: tuple[str, ...] = (
    "Physician noted: no {title} was performed during this admission.",
    "Physician noted: the patient did not undergo {title} during this stay.",
    "Physician noted: {title} ({code}) was not done this admission.",
)
T5_STATEMENTS_LAB: tuple[str, ...] = (
    "Physician noted: the {lab} on {date} was {value} {unit}.",
    "Physician noted: {lab} measured on {date} came back at {value} {unit}.",
    "Physician noted: for the record, the {date} {lab} result is {value} {unit}.",
)

# --- T6 cross-patient comparison (context = both dialogues, labelled A and B) --------------
T6A_TEMPLATES: tuple[str, ...] = (
    "Patients A and B both have {disease}. Which patient has more distinct diagnosis codes "
    "across all of their encounters? Answer similar if the numbers are equal.",
    "Counting distinct ICD diagnosis codes over every encounter, does Patient A or Patient B "
    "have more (both have {disease})? Answer similar if the counts are equal.",
    "Between Patient A and Patient B (both with {disease}), who carries the larger number of "
    "distinct diagnosis codes in the record? Answer similar if they are equal.",
)
T6B_TEMPLATES: tuple[str, ...] = (
    "Patients A and B both have {disease}. Which patient had the higher maximum {lab} across "
    "all encounters? Answer similar if the two maxima are within {pct}% of each other.",
    "Over their whole records, whose highest {lab} value was greater, Patient A's or Patient "
    "B's (both have {disease})? Answer similar if they are within {pct}% of each other.",
    "Compare the peak {lab} of Patient A and Patient B (both with {disease}): which is "
    "higher? Answer similar if they differ by at most {pct}%.",
)
T6C_TEMPLATES: tuple[str, ...] = (
    "Patients A and B both have {disease}. Whose {lab} changed more in absolute terms between "
    "their first and their last {lab} measurement? Answer similar if the two changes are "
    "within {pct}% of each other.",
    "Taking the absolute difference between the first and the last {lab} result of each "
    "patient (both have {disease}), is the change larger for Patient A or Patient B? Answer "
    "similar if they are within {pct}% of each other.",
    "Which patient's {lab} moved more from first to last measurement, Patient A or Patient B "
    "(both with {disease})? Answer similar if the changes differ by at most {pct}%.",
)

# --- T7 treatment fact recall (four options) -----------------------------------------------
T7_MEDICATION_TEMPLATES: tuple[str, ...] = (
    "Which medication was started during the encounter that began on {date}?",
    "During the encounter of {date}, which of these medications was ordered for the patient?",
    "Which drug did the patient receive during the hospital stay starting {date}?",
)
T7_PROCEDURE_TEMPLATES: tuple[str, ...] = (
    "Which procedure was performed during the encounter that began on {date}?",
    "During the encounter of {date}, which of these procedures did the patient undergo?",
    "Which procedure is documented for the hospital stay starting {date}?",
)
T7_OPTIONS_HEADER = "Options:"
T7_OPTION_LINE = "{letter}. {text}"

# --- T8 observed post-treatment change ------------------------------------------------------
T8_TEMPLATES: tuple[str, ...] = (
    "After {drug} was started on {date}, did the patient's {lab} go up, go down or stay about "
    "the same? Compare the latest {lab} at or before the start with the first {lab} at least "
    "{min_days} days after it.",
    "Compare the last {lab} measured on or before {date}, when {drug} was started, with the "
    "first {lab} measured {min_days} or more days later. How did it change?",
    "{drug} was started on {date}. Relative to the most recent prior {lab}, how had the {lab} "
    "changed at the first measurement taken at least {min_days} days after the start?",
)

# --- T9 abstention, non-lab kinds (lab kinds use T1_TEMPLATES and T1's format) -------------
T9_DOSE_TEMPLATES: tuple[str, ...] = (
    "What dose of {drug} was ordered during the encounter that began on {date}?",
    "During the encounter of {date}, what was the prescribed dose of {drug}?",
    "How much {drug} per dose was the patient prescribed in the stay starting {date}?",
)
T9_START_TEMPLATES: tuple[str, ...] = (
    "On what date was {drug} started during the encounter that began on {date}?",
    "During the encounter of {date}, when was {drug} first given?",
    "When did the patient start {drug} in the hospital stay beginning {date}?",
)
T9_START_FORMAT = "Answer with the date only, as YYYY-MM-DD."

# --- T10 temporal ordering (extended set; LongMedBench "Temporal reasoning") ----------------
# The shown items follow the body as "A. ..." lines (clinlib.tasks.generators.t10_text).
# Readers recognise the subtype by T10_MARKERS, which every template of the subtype contains.
T10_MARKERS: dict[str, str] = {
    "visit_cloze": "were removed from one hospital visit",
    "visit_sorting": "consecutive hospital visits of the patient are shown below, shuffled",
    "joint_sorting": "admission and discharge halves of five consecutive hospital visits",
    "visit_sorting_notes": "discharge-note summaries of five consecutive hospital visits",
}
T10_TEMPLATES: dict[str, tuple[str, ...]] = {
    "visit_cloze": (
        "Some treatment events (medications or procedures) were removed from one hospital "
        "visit of the patient. The rest of that visit, in time order, its lines numbered:\n"
        "{visit}\nInsert each removed event back at its original position: after which line "
        "does each go, and in what order? They are listed below, shuffled, with their "
        "timestamps.",
        "Several medication or procedure events were removed from one hospital visit of the "
        "patient; what remains of the visit, its lines numbered, is:\n{visit}\n"
        "Put each removed event, listed below in shuffled order with its timestamp, back at "
        "its original position: the line it goes after, in chronological order.",
    ),
    "visit_sorting": (
        "Five consecutive hospital visits of the patient are shown below, shuffled, with their "
        "dates and visit numbers removed. Order them chronologically from the clinical course "
        "alone.",
    ),
    "visit_sorting_notes": (
        "The discharge-note summaries of five consecutive hospital visits of the patient are "
        "shown below, shuffled, with their dates removed. Order them chronologically from the "
        "clinical course alone.",
    ),
    "joint_sorting": (
        "The admission and discharge halves of five consecutive hospital visits of the patient "
        "are shown below as ten shuffled clips, with dates and visit numbers removed. Pair each "
        "admission with its discharge and order all ten clips chronologically (each visit's "
        "admission half right before its discharge half).",
    ),
}

# --- T1R relative-time retrieval (an extended task beside T1; LongMedBench "event retrieval":
# the event is named by its position, not its date). {ordinal} is the measurement's rank among
# the visit's {lab} measurements, {visit} the visit's rank in the record — both words, as the
# dialogue's own greeting writes visit ordinals ("your third hospital stay"), and as the
# header "Visit N" numbers them. The explicit twin reuses T1_TEMPLATES verbatim.
T1R_RELATIVE_TEMPLATES: tuple[str, ...] = (
    "What was the patient's {lab} at the {ordinal} {lab} measurement of the {visit} hospital stay?",
    "During the patient's {visit} hospital stay, what value did the {ordinal} {lab} "
    "measurement show?",
    "Report the {ordinal} {lab} result recorded during the {visit} hospital stay.",
    "In the {visit} hospital stay, what was the {ordinal} {lab} value measured?",
)

# --- T11 decisions (extended set; LongMedBench "Task 3": next action, argument, discharge) ---
# {stream} is the current stay up to the cut (clinlib.tasks.generators.t10_text.visit_stream),
# {now} the cut's minute; the options follow as "A. ..." lines. Readers recognise the subtype
# by T11_MARKERS, which every template of the subtype contains.
T11_MARKERS: dict[str, str] = {
    "next_action": "which kind of action comes next",
    "argument": "the next action is",
    "discharge": "discharged within the next six hours",
}
T11_STAY = "The patient is in hospital. The current stay so far, in time order:\n{stream}\n"
T11_TEMPLATES: dict[str, tuple[str, ...]] = {
    "next_action": (
        T11_STAY + "It is now {now}. Given this stay and the patient's earlier stays, "
        "which kind of action comes next?",
    ),
    "argument": (
        T11_STAY + "It is now {now}, and the next action is a {action}. Given this stay and "
        "the patient's earlier stays, which {what} is it?",
    ),
    "discharge": (
        T11_STAY + "It is now {now}. Given this stay and the patient's earlier stays, will the "
        "patient be discharged within the next six hours?",
    ),
}

# --- T7R medication retrieval, explicit vs relative (extended; LongMedBench "event
# retrieval", Table 2's Medication column). The explicit twin is T7's medication question
# verbatim (by the encounter's date); the relative twin names the encounter by its rank in
# words, as T1R does ("the third hospital stay"), and states no number.
T7R_RELATIVE_TEMPLATES: tuple[str, ...] = (
    "Which medication was started during the patient's {visit} hospital stay?",
    "During the patient's {visit} hospital stay, which of these medications was ordered?",
    "Which drug did the patient receive during the {visit} hospital stay?",
)
