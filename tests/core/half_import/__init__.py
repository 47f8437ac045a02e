"""Modules whose import fails part-way after registering themselves, as `import torch._dynamo` does in a read-only
temp dir: torch/_dynamo/package.py registers its cache artifact with torch.compiler._cache's factory, a later module
asks tempfile for a temp dir and raises, and importing torch._dynamo again in that process then fails with
"AssertionError: Artifact of type=precompile already registered in mega-cache artifact factory" (reproduced with the
real torch in tests/hardened/test_poisoned_worker.py). Staged here: the registry and the failing step."""
