"""Policy scoring and reorganization plans. Imports run one way: scorecard > policies (the families) > steps (the
families' plan steps) > document (the plan document, its ids, check and exports) > cost, striping_advisor > types
(Target, Variant, PlanPart, Step and the other shared types)."""
