"""Evaluation: offline readers: deterministic answering policies, not language models."""
