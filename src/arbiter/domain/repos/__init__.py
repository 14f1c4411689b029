"""Reading the code a run tests: the URL policy applied, git bounded, a mirror cache."""
