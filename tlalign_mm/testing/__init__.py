"""What the tests and the developer tools share: the step's cost counters
(:mod:`.cost`), the smoke run of a config (:mod:`.smoke`), the repository's
configs parsed once (:mod:`.configs`) and the benchmarked training steps
(:mod:`.steps`). Not imported by ``import tlalign_mm``."""
