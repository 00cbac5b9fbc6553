"""Guards: what a trace relied on (trace_result's GuardSpecs), where each value is read from
(sources), shape guards, Python's attribute lookup rule, and the C++ guard tree they become (tree)."""
