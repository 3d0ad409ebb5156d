"""The statistics: one module per question (run summaries, paired comparisons, significance tests,
power), the budget spread of Typhoon's masking, the paper's claims, the reference comparison, the
sequential and decisive studies, and the schedule theory (identifiability)."""
