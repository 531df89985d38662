"""Evaluation: LLM-as-judge scoring and its audit (MedMemoryBench App. D.1)."""
