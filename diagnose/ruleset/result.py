"""What running the rules yields: findings (with evidence and a fix), the rules not applicable, passed
or broken. Defined beside the runner that makes them; findings/ ranks and reconciles them, reports/
shows them."""
from __future__ import annotations

from dataclasses import dataclass, field

SEVERITY_ORDER = {"critical": 0, "high": 1, "medium": 2, "low": 3, "info": 4}
CONFIDENCE_ORDER = {"high": 0, "medium": 1, "low": 2}


@dataclass
class Fix:
    engine: str
    remove: list = field(default_factory=list)
    set: dict = field(default_factory=dict)
    note: str = ""
    command: str | None = None

    def empty(self) -> bool:
        return not self.remove and not self.set

    def to_json(self) -> dict:
        return {"engine": self.engine, "flags": {"remove": list(self.remove), "set": dict(self.set)},
                "command": self.command, "note": self.note or None}


@dataclass
class Finding:
    id: str
    severity: str
    confidence: str
    title: str
    fix_title: str
    evidence: list
    fix: Fix
    impact: str
    impact_score: float
    fix_risk: str
    domain: str = ""
    related: list = field(default_factory=list)   # rules folded into this one

    def rank_key(self):
        return (SEVERITY_ORDER[self.severity], CONFIDENCE_ORDER[self.confidence], -self.impact_score)

    def to_json(self) -> dict:
        return {"id": self.id, "severity": self.severity, "confidence": self.confidence,
                "title": self.title, "fix_title": self.fix_title, "evidence": self.evidence,
                "fix": self.fix.to_json(), "impact": self.impact, "fix_risk": self.fix_risk,
                "related": self.related}


@dataclass
class Result:
    """One run: findings in rank order, plus what could not be judged."""
    findings: list
    not_applicable: list      # [{"id", "reason"}]
    errors: list              # [{"id", "error"}] for rules that raised
    passed: list              # ids evaluated and not firing
    combined_fix: Fix | None = None
    verdict: dict | None = None
