"""`envcheck fleet`: baselines learned from many nodes' reports, and the nodes and GPUs outside them.

sources (files, folders, stdin) -> nodes (one FleetNode per report: name, group, metrics, finding codes) -> learn
(median and MAD per group and metric; the outliers) -> baseline_file (TOML a profile can hold), fleet_text and page
(text and a self-contained HTML page). The front door is envcheck.app.fleet.
"""
