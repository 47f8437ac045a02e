"""The checks: one module or package per domain. Their registry is envcheck.checks.check_registry (every check, in report
order) and the node path's envcheck.checks.node_path_registry; importing one domain imports neither."""
