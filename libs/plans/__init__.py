"""Policy scoring and reorganization plans. Imports run one way: scorecard > policies (the families) > steps (plan
steps and documents), striping_advisor > types (Target, Variant, PlanPart and the other shared types)."""
