"""Cluster mode: exit policy by fault class (Slurm prolog, Kubernetes preflight, node-problem-detector),
node_exporter textfiles, and Slurm's task variables for the many-node checks."""
