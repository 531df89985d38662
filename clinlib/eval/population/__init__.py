"""Evaluation: population questions answered (PopMedQA)."""
