"""diagnose: find what is wrong with an LLM inference server, and which flags to change."""
__version__ = "0.1.0"
