"""Reports: the same Analysis rendered for a terminal, a ticket (markdown) or a machine (JSON)."""
