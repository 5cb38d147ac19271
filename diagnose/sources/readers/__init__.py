"""The log reader stack: opening what the user named (files.py), cutting it into lines and
classifying them (scanner.py in Python, spread.py its blocks on worker processes, native/ in C,
segments.py their one consumer), peeling
collector and process prefixes (lineprefix.py), re-joining hard-wrapped pastes (unwrap.py)."""
