"""Pure statistics for engine testing: LLR, SPRT, Elo, purge, SPSA, scheduling."""
