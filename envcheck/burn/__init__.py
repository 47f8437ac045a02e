"""The burn-in (`envcheck burn`): repeated, deterministic workloads on every device of the node until a time budget
ends, compared bit for bit across devices of one model and with a float64 reference, timed per device for stragglers.

Shaped like collectives/ (nccl-tests): one machinery (the plan, the worker loop, the coordinator, the sampler, the
tally) and thin workload modules that supply only what differs (inputs, the call, the work done, the reference):
gemm, sdpa, convolution, reductions, exchange. The verdicts are pure (corruption, stragglers) and outcome turns
them into results with stable finding codes, figures and checksums for the reports and `envcheck fleet`.
"""
