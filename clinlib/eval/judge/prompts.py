"""The judge prompts (MedMemoryBench Appendix D.1 "LLM-as-Judge Prompt Template"; the query
types of MedMemoryBench §5 "Query Design", Table 1).

The four prompts :data:`TLA_JUDGE_PROMPT`, :data:`SUA_JUDGE_PROMPT`, :data:`IG_JUDGE_PROMPT`
and :data:`MCD_JUDGE_PROMPT` are the seed's, word for word. The seed prints each as one
paragraph; here line breaks separate its fields and list items, its typographic quotes are
straight quotes, and its LaTeX (``$\\ge$``, ``$<$``) and HTML entities (``&lt;``) are the
characters they stand for. Placeholders keep the seed's ``<name>`` form and are filled by
:func:`render_judge_prompt` (a plain substitution, so the JSON braces of the MCD prompt stay).

The seed writes a judge prompt only for the four free-text types. :data:`GENERIC_JUDGE_PROMPT`
is the kit's own (modelled on the TLA prompt's frame and output format, not the seed's): it
judges an answer to a question whose gold is deterministic (T1–T9, and the seed's S / O
types EEM and MQ), which is what the judge audit needs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

TLA_JUDGE_PROMPT = """\
You are a strict medical dialogue evaluation judge. Determine whether the model's answer correctly addresses the time-related question.
Question: <question>
Reference Answer: <expected_answer>
Answer Explanation: <explanation>
Model's Answer: <model_output>
Evaluation Criteria: This is a temporal localization question, which may take one of the following two forms:
1. Asking when a certain event occurred. The model must correctly provide the time point
2. Asking what happened at a certain time. The model must correctly describe the event content
Judge strictly:
- If the model's answer contains the correct time point or the correct event content, judge as [CORRECT]
- If the model's answer about the time/event does not match the reference answer or fails to answer, judge as [INCORRECT]
- Date formats do not need to be identical, but must refer to the same time point (e.g., "January 1, 2024" and "2024-01-01" are considered equivalent)
Output in the following JSON format: "is_correct": true/false, "reason": "brief justification"
Output JSON only, no other content."""

SUA_JUDGE_PROMPT = """\
You are a very strict medical dialogue evaluation judge. Determine whether the model's answer correctly reflects the patient's most recent status.
Question: <question>
Reference Answer: <expected_answer>
Answer Explanation: <explanation>
Model's Answer: <model_output>
Evaluation Criteria: This is a state update question, testing whether the model correctly answers the latest status based on the patient's historical information in memory.
Core Evaluation Principles (critically important):
1. Must be based on memory: The model's answer must demonstrate the use of the patient's past memory information, not guessing or generic medical knowledge.
2. No guessing allowed: If the model has not retrieved relevant memory information but gives a "coincidentally correct" answer, it should be judged as [INCORRECT].
3. Information source requirement: A correct answer should convey that the model "remembers" this patient's specific situation, rather than guessing.
Judge strictly:
- If the model's answer demonstrates the use of patient historical memory and the core content is consistent with the reference answer, judge as [CORRECT]
- If the model's answer contains key information points from the reference answer, and these clearly originate from patient memory retrieval, judge as [CORRECT]
- If the model's answer clearly contradicts the reference answer, omits key information, or provides outdated status, judge as [INCORRECT]
- If the model states it does not know or cannot answer, judge as [INCORRECT]
- If the model's answer appears too generic, lacks specific patient information support, or seems like a guess, even if the content happens to be close to the reference answer, judge as [INCORRECT]
Output in the following JSON format: "is_correct": true/false, "reason": "brief justification, must indicate whether the model demonstrated use of patient memory"
Output JSON only, no other content."""

IG_JUDGE_PROMPT = """\
You are a very strict medical dialogue evaluation judge. Determine whether the model's reasoning answer is correct.
Question: <question>
Reference Answer: <expected_answer>
Answer Explanation: <explanation>
<metadata_info>
Model's Answer: <model_output>
Evaluation Criteria: This is an inference generation question, testing whether the model can perform correct medical reasoning based on patient-specific information.
Core evaluation points:
1. Patient Information Utilization (Key)
- The model must demonstrate the use of patient-specific information from memory
- If required_patient_info is provided in metadata, the model's answer must reflect understanding of these key pieces of information (important)
- If the patient's specific circumstances and past memories are ignored or missing, judge as [INCORRECT]
2. Reasoning Quality
- The model must reason based on retrieved patient historical information, not purely from its own medical common sense
- If only a conclusion is given without sufficient reference to patient information and memory, judge as [INCORRECT]
- If the model gives a "common wrong answer" type of response (generic advice), judge as [INCORRECT]
3. Conclusion Correctness
- The final recommendation/conclusion should be fully consistent with the reference answer in direction
- Even if the conclusion is correct, if it lacks reasoning based on patient information, still judge as [INCORRECT]
Judgment rules:
- [CORRECT]: Answer uses patient-specific information, contains required patient information points, and reaches an accurate conclusion
- [INCORRECT]: Answer does not adequately consider the patient's specific circumstances
- [INCORRECT]: Answer ignores certain key information in required_patient_info
- [INCORRECT]: Answer matches the common_wrong_answer pattern
- [INCORRECT]: Model refuses to answer or claims no information
Output in the following JSON format: "is_correct": true/false, "reason": "brief justification"
Output JSON only, no other content."""

MCD_JUDGE_PROMPT = """\
You are an extremely strict medical multi-hop reasoning evaluation judge. Your task is to rigorously verify whether the model truly retrieved and used specific information from the patient's historical memory to perform multi-hop clinical reasoning.
Question: <question>
Reference Answer: <expected_answer>
Answer Explanation: <explanation>
<nodes_for_validation> <required_nodes_str>
Reasoning Hops: <hop_count>
Reasoning Pattern: <reasoning_pattern>
Model's Answer: <model_output>
---
Evaluation Task: Strict Node-by-Node Reasoning Chain Verification
This is a multi-hop clinical reasoning question. The core assessment is whether the model can accurately retrieve and use specific personalized medical information from the patient's historical memory.
Key Evaluation Principles (must be strictly followed)
1. Patient-Specific Information Principle: The model must explicitly reference the patient's specific data (such as specific test values, medication dosages, specific timing of symptom onset, particular diagnostic results), rather than giving generic medical common sense.
- "Poor blood sugar control may lead to...". This is generic medical knowledge, not patient-specific information
- "Your fasting blood glucose rose from 6.8 to 8.2...". This is patient-specific information
2. Memory Retrieval Evidence Principle: If the model fails to demonstrate specific references to the patient's historical records, even if the reasoning direction is correct, it should be judged as inadequate. The model must show it "remembers" the patient's specific situation.
3. Strict Causal Chain Correspondence Principle: The causal relationships established by the model must precisely correspond to the causal mechanisms described in the reasoning chain nodes. Similar but different mechanisms cannot substitute.
4. Node Content Precise Matching Principle: During node verification, it is not sufficient to judge as "covered" merely because the model mentioned a related concept. You must verify whether the model referenced the core specific content within the node.
Evaluation Steps
Step 1: Strict Node-by-Node Check
For each node in the reasoning chain, all of the following conditions must be verified:
Condition A - Specific Information Match:
- Did the model mention the specific data/time/event in this node?
- If the node contains specific values (e.g., "TSH 0.02"), the model must mention the same or equivalent value
- If the node contains a specific time (e.g., "October 2024"), the model must demonstrate awareness of that time point
- Merely mentioning the related concept (e.g., "thyroid function") without specific data does not count as coverage
Condition B - Correct Causal Mechanism:
- Does the causal mechanism described by the model exactly match the reference reasoning chain?
- Using a different pathophysiological explanation (even if it sounds reasonable) does not count as correct
- Skipping intermediate steps to reach a conclusion directly does not count as correct
Condition C - Clear Information Source:
- Does the model's answer clearly demonstrate that this information comes from the patient's historical memory?
- Inferences based purely on medical common sense cannot receive credit
Step 2: Calculate Three Scoring Dimensions (Strict Standards)
NCR (Node Coverage Rate) = Number of nodes fully satisfying Condition A / Total number of nodes
- Mentioning concept only without specific data. Node not counted as covered
- Incorrect data or mismatched timeline. Node not counted as covered
CRC (Causal Relation Correctness) = Number of correctly established causal links / Number of expected causal links
- Must be the causal mechanism described in the reference answer; "equivalent substitutions" not accepted
- Causal links skipping intermediate nodes. No credit
CC (Chain Completeness)
- 1.0 = Complete coverage of all nodes with correct causal relations
- 0.7 = Coverage of 80%+ nodes, core causal relations correct
- 0.5 = Coverage of 60%+ nodes, main causal relations correct
- 0.3 = Partial node coverage, causal relations have gaps
- 0.0 = No valid reasoning chain or completely wrong direction
Step 3: Comprehensive Judgment (High Standards)
[CORRECT] Conditions (all must be satisfied simultaneously):
- NCR ≥ 0.75 (at least three-quarters of nodes' specific content covered)
- CRC ≥ 0.75 (causal relations basically complete and correct)
- CC ≥ 0.7 (reasoning chain basically complete)
- Final conclusion consistent with reference answer
[PARTIALLY CORRECT] Conditions:
- NCR ≥ 0.5 and CRC ≥ 0.5 and CC ≥ 0.5
- Main reasoning direction correct, but with notable gaps
[INCORRECT] Conditions (any one triggers incorrect judgment):
- Model failed to retrieve patient-specific information from memory
- Reasoning based on generic medical knowledge rather than patient-specific situation
- Causal mechanism inconsistent with reference answer
- Conclusion direction incorrect
- NCR < 0.5 or CRC < 0.5 or CC < 0.5
Output Format
Output your strict evaluation result in the following JSON format: { "node_validations": [ { "node_id": 1, "mentioned": true/false, "specific_data_matched": true/false, "causal_link_correct": true/false, "note": "Must state: 1) What specific data the model mentioned 2) Whether it precisely matches node content 3) Whether the causal relation is correct" } ], "ncr_score": 0.0-1.0, "crc_score": 0.0-1.0, "cc_score": 0.0-1.0, "memory_retrieval_quality": "excellent/good/partial/poor/none", "uses_patient_specific_info": true/false, "is_correct": true/false, "reason": "Comprehensive justification, must state: 1) Whether the model used patient-specific information 2) Which nodes were not covered 3) Whether the causal chain is complete" }
Output JSON only, no other content."""

# The kit's prompt for questions with deterministic gold (not the seed's; see the module docstring).
GENERIC_JUDGE_PROMPT = """\
You are a strict medical dialogue evaluation judge. Determine whether the model's answer gives the same answer as the reference answer.
Question: <question>
Reference Answer: <expected_answer>
Answer Explanation: <explanation>
Model's Answer: <model_output>
Evaluation Criteria: This question has one correct answer (a value, a date, a direction of change, an option or yes/no), given as the reference answer.
Judge strictly:
- If the model's answer states the same answer as the reference answer, judge as [CORRECT]
- If the model's answer states a different answer, several answers, or fails to answer, judge as [INCORRECT]
- Surface forms do not need to be identical (e.g., "1.30 mg/dL" and "1.3 mg/dL", or an option's letter and its text, are considered equivalent)
Output in the following JSON format: "is_correct": true/false, "reason": "brief justification"
Output JSON only, no other content."""

GENERIC = "generic"
JUDGE_PROMPTS: dict[str, str] = {
    "TLA": TLA_JUDGE_PROMPT,
    "SUA": SUA_JUDGE_PROMPT,
    "IG": IG_JUDGE_PROMPT,
    "MCD": MCD_JUDGE_PROMPT,
    GENERIC: GENERIC_JUDGE_PROMPT,
}
# The seed's MCD "[CORRECT] Conditions": NCR >= 0.75, CRC >= 0.75, CC >= 0.7 (and the
# conclusion consistent with the reference, the judge's is_correct).
MCD_THRESHOLDS: dict[str, tuple[str, float]] = {
    "node_coverage": ("ncr_score", 0.75),
    "causal_relation": ("crc_score", 0.75),
    "chain_completeness": ("cc_score", 0.7),
}
MCD_CRITERIA: tuple[str, ...] = tuple(MCD_THRESHOLDS)
PLACEHOLDERS: tuple[str, ...] = (
    "question",
    "expected_answer",
    "explanation",
    "metadata_info",
    "nodes_for_validation",
    "required_nodes_str",
    "hop_count",
    "reasoning_pattern",
    "model_output",
)


def prompt_kind(task: str) -> str:
    """The prompt a question of ``task`` is judged with: its own for TLA / SUA / IG / MCD,
    :data:`GENERIC` otherwise."""
    return task if task in JUDGE_PROMPTS else GENERIC


def render_judge_prompt(kind: str, fields: Mapping[str, object]) -> str:
    """The prompt ``kind`` with every ``<placeholder>`` replaced by ``fields`` (missing: "")."""
    text = JUDGE_PROMPTS[kind]
    # model_output last, so that a placeholder-like string in an answer is never substituted
    for name in PLACEHOLDERS:
        text = text.replace(f"<{name}>", str(fields.get(name, "") or ""))
    return text


# what the seed's prompt text asks the reference material to hold beyond a non-empty field
REQUIRED_IN_FIELD: dict[str, dict[str, tuple[str, ...]]] = {
    "IG": {"metadata_info": ("required_patient_info", "common_wrong_answer")},
    "MCD": {"reasoning_pattern": ("->",)},
}


def read_fields(kind: str, text: str) -> dict[str, str] | None:
    """The placeholders' values read back out of a rendered prompt of ``kind`` (the template
    with each ``<placeholder>`` a capture group); None when the text is not that prompt."""
    template = JUDGE_PROMPTS[kind]
    pattern, names, pos = "", [], 0
    for m in re.finditer(r"<(" + "|".join(PLACEHOLDERS) + r")>", template):
        pattern += re.escape(template[pos : m.start()])
        if m.group(1) in names:  # a placeholder used twice: a back-reference
            pattern += f"(?P={m.group(1)})"
        else:
            names.append(m.group(1))
            pattern += f"(?P<{m.group(1)}>.*?)"
        pos = m.end()
    got = re.fullmatch(pattern + re.escape(template[pos:]), text, re.DOTALL)
    return None if got is None else {n: got.group(n) for n in names}


def missing_fields(kind: str, text: str) -> list[str]:
    """The placeholders of prompt ``kind`` that the rendered ``text`` leaves empty (or, per
    :data:`REQUIRED_IN_FIELD`, without the items the seed's prompt names); ``["<not this
    prompt>"]`` when the text does not read back as the prompt."""
    got = read_fields(kind, text)
    if got is None:
        return ["<not this prompt>"]
    out = [n for n, v in got.items() if not v.strip()]
    for name, items in REQUIRED_IN_FIELD.get(kind, {}).items():
        out += [f"{name}:{i}" for i in items if i not in got.get(name, "")]
    return out
