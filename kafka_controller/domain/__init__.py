"""Values only, no I/O: the vocabulary every other layer speaks."""
