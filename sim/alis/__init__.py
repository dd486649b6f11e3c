"""ALIS (automatic locality-improving storage) in the simulator: the numeric cores (graph: pair counts and
pruning; runs: run discovery; layout: the reorganized area), the planner of each interval's directory (plan),
its parameters (params) and the policy that redirects a workload (policy). numpy and numba only; libs.alis
runs the same cores over a trace's tables with Spark."""
