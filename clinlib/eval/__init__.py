"""Stage 5 (paper §4): the evaluation harness, the answering prompt, offline answering policies."""
