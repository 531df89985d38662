"""Stage 2 (paper §3, Fig. 2 stage 3): dialogue synthesis, the length budget, the verifier."""
